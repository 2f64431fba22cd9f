"""From log lines to per-rank events: tracebacks grouped per rank, signature hits, exit codes.

Combined logs interleave ranks; each (file, rank) stream keeps its own traceback state, so rank 2's
frames never end up under rank 0's exception. torchrun's failure summary (ChildFailedError) gives
each failed rank's exit code, pid, host and time: a negative code is a signal, and SIGTERM means the
launcher stopped that rank because another one failed. A paste may start inside that table (its `rank :` and
`exitcode :` lines are read on their own); other launchers report exits in their own words
(``jobs.signatures.exit_report``: srun, DeepSpeed, Lightning, accelerate, mpirun, mp.spawn).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from jobs.lines import LogLine, summary_time
from jobs.signatures import exit_report, meaning, worth_reading

TRACEBACK = re.compile(r"^\s*(?:Original )?Traceback \(most recent call last\):")
FRAME = re.compile(r'^\s*File "(?P<path>[^"]+)", line (?P<line>\d+), in (?P<func>\S+)')
NATIVE_FRAME = re.compile(r"^#\d+ (?P<func>\S+) from (?P<path>\S+):(?P<line>\d+)")  # c10's "Stack trace of"
EXCEPTION = re.compile(r"^(?P<cls>[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Failure|Warning|Fault|Abort)\w*)(?::\s?(?P<msg>.*))?$")
LIBRARY_PATH = re.compile(r"site-packages|dist-packages|/lib/python\d|<frozen|^/pytorch/|/torch/|<string>|importlib")
SUMMARY_ENTRY = re.compile(r"^\s*\[(?P<n>\d+)\]:\s*$")
SUMMARY_FIELD = re.compile(r"^\s*(?P<key>time|host|rank|exitcode|error_file|traceback)\s*:\s*(?P<value>.*)$")
SUMMARY_RANK = re.compile(r"(?P<rank>\d+)(?: \(local_rank:? ?(?P<local>\d+)?)?")  # a line cut mid-way still gives the rank
SUMMARY_CODE = re.compile(r"(?P<code>-?\d+)(?: \(pid:? ?(?P<pid>\d+)?)?")
# Fields only torchrun's failure table prints: a paste that starts inside the table (its "[0]:" and header cut off)
# opens an entry on them; "time :" and "host :" lines just before are kept until one comes.
TABLE_FIELD = re.compile(r"^\s*(?:rank\s*:\s*\d+ \(local_r|exitcode\s*:\s*(?:-\d+|[1-9]\d*)(?:\s|$))")
# DeepSpeed's launcher: "[launch.py:321:sigkill_handler] ['python', '-u', 'train.py', '--local_rank=1', ...] exits
# with return code = -9". The command it prints is the last one it started, not the failed rank's (launch.py keeps
# the loop variable), so the line gives the code and no rank (signatures.json's "exits" table reads it so).
NCCL_RANK = re.compile(r"NCCL INFO (?:comm|ncclCommInitRank\w*) (?:comm )?0x[0-9a-f]+ rank (?P<rank>\d+) n[Rr]anks (?P<n>\d+)")
# The world as a launcher, a trainer or the asker states it: WORLD_SIZE=8, "World size: 8", accelerate's "Num
# processes: 8", "world size 8" in a report's own words.
WORLD = re.compile(r"\b(?:WORLD_SIZE|[Ww]orld[ _][Ss]ize|nranks|nRanks|[Nn]um[ _]processes)\s*[=:]?\s*(?P<n>\d{1,5})\b")
# A launch command states the world: torchrun's --nproc-per-node (times --nnodes on the same line), DeepSpeed's
# --num_gpus (times --num_nodes). A paste that starts with the command and shows only the ranks that timed out
# then names the ranks that did not report (jobs.verdicts.waits: the suspects).
LAUNCH_PROCS = re.compile(r"--(?:nproc[_-]per[_-]node|num[_-]gpus)[= ](?P<n>\d{1,4})\b")
LAUNCH_NODES = re.compile(r"--(?:nnodes|num[_-]nodes)[= ](?P<n>\d{1,4})\b")
WHAT = re.compile(r"^(?:terminate called after throwing an instance of '[\w:]+'\s*)?what\(\):\s*")  # C++ exceptions
C10_RANK = re.compile(r"\bRank (?P<rank>\d+)\]")
PROCESS_PID = re.compile(r"(?:Sending process|PID|pid:?) (?P<pid>\d+)")
COLLECTIVE = re.compile(r"SeqNum=(?P<seq>\d+), OpType=(?P<op>\w+)")
DETAIL_LINES = 4  # lines an error message may continue on
# Errors whose message names its cause on the lines after it: NCCL's ("invalid usage ... Last error: <cause>").
CONTINUED = re.compile(r"NCCL error|nccl\w*Error|invalid usage|unhandled system error|internal error")
RICH_BOX = ("│", "╭", "╰")  # rich.traceback draws frames in a box; the exception follows below it
SIGNALS = {1: "SIGHUP", 2: "SIGINT", 6: "SIGABRT", 7: "SIGBUS", 9: "SIGKILL", 11: "SIGSEGV", 15: "SIGTERM"}
COLLECTIVE_CALLS = ("barrier", "all_reduce", "allreduce", "all_gather", "broadcast", "reduce_scatter", "reduce",
                    "gather", "scatter", "all_to_all", "send", "recv", "wait", "monitored_barrier")


@dataclass
class Event:
    order: int  # reading order across all files
    kind: str  # "root" | "symptom"
    category: str
    summary: str  # what the signature says it is
    line: str  # the evidence: the exception or error line as printed
    rank: int | None
    host: str | None = None
    time: datetime | None = None
    not_before: datetime | None = None  # no time of its own: the last time its rank's stream printed before it
    where: str | None = None  # "train.py:35"
    func: str | None = None  # the user function it happened in
    call: str | None = None  # for a collective timeout: the torch.distributed call waited in
    frames: list[str] = field(default_factory=list)
    source: str = ""
    local_rank: int | None = None  # torchrun's tee prefix ([default1]:) names the local rank
    line_zh: str = ""  # ``line`` in Chinese, where traindoc wrote it (an exit code explained), not the log
    detail: list[str] = field(default_factory=list)  # the lines the error message continues on (NCCL's "Last error:")
    meaning: str = ""  # what the line means, where the line alone does not say it (signatures.json's "explain")


@dataclass
class Exit:
    """One rank's entry in torchrun's failure summary, or its "failed (exitcode" line."""

    rank: int | None
    local_rank: int | None
    code: int | None
    pid: int | None = None
    host: str | None = None
    time: datetime | None = None
    note: str = ""
    launcher: str = "torchrun"  # whose report: torchrun, deepspeed, srun, lightning, accelerate, mpirun, spawn
    first: bool = False  # torchrun's "Root Cause (first observed failure)" entry
    oom: bool = False  # Slurm's "Out Of Memory": the step's cgroup OOM-killed it
    after_first: bool = False  # a SIGKILL that followed another kind of failure: the launcher's or scheduler's kill


@dataclass
class _Traceback:
    frames: list[tuple[str, int, str]] = field(default_factory=list)  # (path, line, func)
    first: LogLine | None = None


@dataclass
class JobEvents:
    events: list[Event] = field(default_factory=list)
    exits: list[Exit] = field(default_factory=list)
    ranks: set[int] = field(default_factory=set)
    hosts: dict[int, str] = field(default_factory=dict)
    pid_rank: dict[int, int] = field(default_factory=dict)
    world_size: int | None = None
    collectives: dict[int, str] = field(default_factory=dict)  # rank -> "ALLREDUCE SeqNum=4"
    lines: int = 0
    worker_lines: int = 0  # lines a rank printed (not the launcher)
    last_line: str = ""


def user_frame(frames: list[tuple[str, int, str]]) -> tuple[str | None, str | None]:
    """("file.py:LINE", function) of the deepest frame outside libraries; a comprehension or lambda is
    named by the function that holds it."""
    user = [(path, line, func) for path, line, func in frames if not LIBRARY_PATH.search(path)]
    if not user:
        return None, None
    path, line, func = user[-1]
    named = next((f for _, _, f in reversed(user) if not f.startswith("<") or f == "<module>"), func)
    return f"{path.rsplit('/', 1)[-1]}:{line}", named


def collective_call(frames: list[tuple[str, int, str]]) -> str | None:
    """The torch.distributed call a stack waits in (the innermost one)."""
    for path, _line, func in reversed(frames):
        if "distributed" in path and func.lstrip("_") in COLLECTIVE_CALLS:
            return func.lstrip("_")
    return None


class EventCollector:
    """Feed lines in reading order; ``result()`` is every event of the job."""

    def __init__(self) -> None:
        self.job = JobEvents()
        self._tracebacks: dict[tuple[str, int | None, int | None], _Traceback] = {}
        self._summary: Exit | None = None
        self._in_summary = False
        self._root_section = False  # in torchrun's "Root Cause (first observed failure)" block
        self._implicit = False  # in a table whose header the paste cut off
        self._pending: list[LogLine] = []  # "time :" / "host :" lines that may open such a table
        self._order = 0
        self._locals: set[tuple[str | None, int]] = set()
        self._last_time: dict[tuple[str, int | None, int | None], datetime] = {}
        self._continued: dict[tuple[str, int | None, int | None], Event] = {}  # an error whose message may go on

    def feed(self, line: LogLine) -> None:
        self._order += 1
        job = self.job
        job.lines += 1
        text = line.text
        if line.rank is not None:
            job.ranks.add(line.rank)
            if line.host:
                job.hosts.setdefault(line.rank, line.host)
        if line.rank is not None or line.local_rank is not None:
            job.worker_lines += 1
            if line.local_rank is not None:
                self._locals.add((line.host, line.local_rank))
        if text.strip():
            job.last_line = text.strip()
        if line.time is not None:
            self._last_time[self._stream(line)] = line.time
        if self._continued and self._continues(line):
            return
        if not worth_reading(text) and not self._tracebacks and not self._in_summary:
            return
        if text.lstrip().startswith(RICH_BOX):  # rich's traceback box quotes source code, not what happened
            return
        self._learn(line)
        if self._summary_line(line):
            return
        key = (line.source, line.rank, line.local_rank)
        if TRACEBACK.match(text):
            self._tracebacks[key] = _Traceback(first=line)
            return
        trace = self._tracebacks.get(key)
        if trace is not None:
            if frame := FRAME.match(text):
                trace.frames.append((frame["path"], int(frame["line"]), frame["func"]))
                return
            if text.startswith((" ", "\t")) or not text.strip() or set(text.strip()) <= set("^~ "):
                return  # a frame's code line, or the caret line under it
            exception = EXCEPTION.match(text.strip())
            del self._tracebacks[key]
            if exception is not None:
                self._add(line, text.strip(), trace.frames)
                return
        if native := NATIVE_FRAME.match(text.strip()):
            self._native_frame(line, native)
            return
        if (found := meaning(text)) is not None:
            self._add(line, WHAT.sub("", text.strip()), [], found_kind=found.kind)

    # -- pieces ------------------------------------------------------------------------------------
    def _continues(self, line: LogLine) -> bool:
        """A line the last error of its stream goes on with (NCCL's ``ncclInvalidUsage: ...``, ``Last error:``,
        then the line naming the cause): kept with that error, up to DETAIL_LINES of them."""
        key = self._stream(line)
        event = self._continued.get(key)
        text = line.text.strip()
        if event is None:
            return False
        if (not text or line.time is not None or TRACEBACK.match(line.text) or FRAME.match(line.text)
                or len(event.detail) >= DETAIL_LINES):  # a line with its own time is a message of its own
            del self._continued[key]
            return False
        event.detail.append(text[:300])
        # NCCL's wrapper ("invalid usage", "unhandled system error") names its cause on a line below: that line's own
        # meaning is the failure ("Last error: Bootstrap : no socket interface found" is the network set-up)
        if (CONTINUED.search(event.line) and (found := meaning(text)) is not None and found.kind == "root"
                and found.category != event.category):
            event.category, event.summary = found.category, found.summary
            event.meaning = found.summary if found.explain else event.meaning
        return True

    def _learn(self, line: LogLine) -> None:
        job = self.job
        if match := NCCL_RANK.search(line.text):
            rank = int(match["rank"])
            job.ranks.add(rank)
            job.world_size = max(job.world_size or 0, int(match["n"]))
            if line.pid is not None:
                job.pid_rank[line.pid] = rank
            if line.host:
                job.hosts.setdefault(rank, line.host)
        elif (match := WORLD.search(line.text)) and 0 < int(match["n"]) <= 100000:
            job.world_size = max(job.world_size or 0, int(match["n"]))
        elif (procs := LAUNCH_PROCS.search(line.text)) is not None:
            nodes = LAUNCH_NODES.search(line.text)
            if 0 < (world := int(procs["n"]) * (int(nodes["n"]) if nodes else 1)) <= 100000:
                job.world_size = max(job.world_size or 0, world)
        if match := COLLECTIVE.search(line.text):
            if (owner := self._rank(line)) is not None:
                job.collectives.setdefault(owner, f"{match['op']} SeqNum={match['seq']}")
        if (report := exit_report(line.text)) is not None:
            host = report.host or line.host
            ranks: tuple[int | None, ...] = report.ranks or (None,)
            for named in ranks:
                job.exits.append(Exit(named, report.local_rank, report.code, report.pid, host, line.time,
                                      launcher=report.launcher, oom=report.oom))
                if named is not None:
                    job.ranks.add(named)
                    if host:
                        job.hosts.setdefault(named, host)

    def _summary_line(self, line: LogLine) -> bool:
        """torchrun's "Root Cause (first observed failure)" / "Failures:" blocks, or the part of one a paste kept."""
        text = line.text
        stripped = text.strip()
        if "Root Cause (first observed failure)" in text or stripped in ("Failures:", "Other Failures:"):
            self._in_summary, self._implicit, self._summary = True, False, None
            self._root_section = "Root Cause" in text
            self._add(line, stripped, [], found_kind="symptom")
            return True
        field_match = SUMMARY_FIELD.match(text)
        if not self._in_summary:
            if field_match is None:
                self._pending.clear()
                return False
            if not TABLE_FIELD.match(text):
                self._pending = [*self._pending[-3:], line]  # "time :" / "host :": torchrun's, if a table field follows
                return False
            self._in_summary, self._implicit, self._root_section = True, True, False
            self._summary = Exit(None, None, None)
            self.job.exits.append(self._summary)
            self._add(line, stripped, [], found_kind="symptom")  # the table is the launcher's summary, cut or not
            for earlier in self._pending:
                self._summary_field(earlier, SUMMARY_FIELD.match(earlier.text))
            self._pending.clear()
        entry = SUMMARY_ENTRY.match(text)
        if entry or (not stripped and line.rank is not None):  # "[1]:" (the reader took it for a prefix)
            self._summary = Exit(int(entry["n"]) if entry else line.rank, None, None, first=self._root_section)
            self.job.exits.append(self._summary)
            return True
        if field_match is None or self._summary is None:
            if stripped.startswith("=" * 10) and self._summary is not None:
                self._in_summary = False
            elif self._implicit and stripped and not stripped.startswith(("-" * 10, "<NO_OTHER_FAILURES>")):
                self._in_summary = self._implicit = False  # the cut table ended: this line is something else
            return stripped.startswith(("-" * 10, "=" * 10, "<NO_OTHER_FAILURES>"))
        self._summary_field(line, field_match)
        return True

    def _summary_field(self, line: LogLine, field_match: re.Match[str] | None) -> None:
        if field_match is None or self._summary is None:
            return
        key, value = field_match["key"], field_match["value"].strip()
        entry_exit = self._summary
        if key == "time":
            entry_exit.time = summary_time(line.text)
        elif key == "host":
            entry_exit.host = value or None
        elif key == "rank" and (m := SUMMARY_RANK.match(value)):
            entry_exit.rank = int(m["rank"])
            entry_exit.local_rank = int(m["local"]) if m["local"] else entry_exit.local_rank
            self.job.ranks.add(entry_exit.rank)
        elif key == "exitcode" and (m := SUMMARY_CODE.match(value)):
            entry_exit.code = int(m["code"])
            entry_exit.pid = int(m["pid"]) if m["pid"] else None
        elif key == "traceback":
            entry_exit.note = value

    @staticmethod
    def _stream(line: LogLine) -> tuple[str, int | None, int | None]:
        """One process's lines in one file: torchrun's tee prefix when there is one, else the rank prefix."""
        return (line.source, line.local_rank, line.rank if line.local_rank is None else None)

    def _rank(self, line: LogLine) -> int | None:
        if line.rank is not None:
            return line.rank
        if line.pid is not None and line.pid in self.job.pid_rank:
            return self.job.pid_rank[line.pid]
        if match := C10_RANK.search(line.text):  # "[Rank 3] Watchdog caught ..." / "[PG ID 0 ... Rank 3]"
            return int(match["rank"])
        return None

    def _native_frame(self, line: LogLine, native: re.Match[str]) -> None:
        """c10's "Stack trace of the failed collective": attach the user frame to that rank's timeout."""
        rank = self._rank(line)
        for event in reversed(self.job.events):
            same_process = line.local_rank is not None and (event.source, event.local_rank) == (line.source, line.local_rank)
            if (event.rank == rank or same_process) and event.category == "collective_timeout":
                event.frames.append(f"{native['func']} ({native['path'].rsplit('/', 1)[-1]}:{native['line']})")
                if event.where is None and not LIBRARY_PATH.search(native["path"]):
                    event.where = f"{native['path'].rsplit('/', 1)[-1]}:{native['line']}"
                    event.func = native["func"]
                if event.call is None and native["func"].lstrip("_") in COLLECTIVE_CALLS:
                    event.call = native["func"].lstrip("_")
                return

    def _add(self, line: LogLine, text: str, frames: list[tuple[str, int, str]], found_kind: str | None = None) -> None:
        found = meaning(text)
        kind: str
        if found is not None:
            kind, category, summary = found.kind, found.category, found.summary
            explained = found.summary if found.explain else ""
        elif found_kind is None and frames is not None and EXCEPTION.match(text):
            kind, category, summary, explained = "root", "exception", "an exception", ""
        elif found_kind is not None:
            kind, category, summary, explained = found_kind, "launcher_summary", "the launcher's failure summary", ""
        else:
            return
        if text.startswith(("SignalException", "torch.distributed.elastic.multiprocessing.api.SignalException")):
            kind, category, summary = "symptom", "killed_by_launcher", "stopped by the launcher (SIGTERM)"
        where, func = user_frame(frames)
        self.job.events.append(Event(
            order=self._order, kind=kind, category=category, summary=summary, line=text[:500],
            rank=self._rank(line), host=line.host, time=line.time,
            not_before=None if line.time else self._last_time.get(self._stream(line)), where=where, func=func,
            call=collective_call(frames), frames=[f"{f} ({p.rsplit('/', 1)[-1]}:{n})" for p, n, f in frames[-6:]],
            source=line.source, local_rank=line.local_rank, meaning=explained,
        ))
        if kind == "root" and (CONTINUED.search(text) or text.rstrip().endswith(":")):  # "...: " goes on below
            self._continued[self._stream(line)] = self.job.events[-1]

    def _global_ranks(self) -> None:
        """Local ranks become global ones: from the failure summary's "rank R (local_rank L)" on each host,
        else, on a single node, the local rank is the global rank."""
        job = self.job
        by_host = {(x.host, x.local_rank): x.rank for x in job.exits if x.rank is not None and x.local_rank is not None}
        by_local: dict[int, set[int]] = {}
        for (_, local), rank in by_host.items():
            by_local.setdefault(local, set()).add(rank)  # type: ignore[arg-type]
        # A line without a host is on an unknown one: NCCL prefixes its own lines with the hostname, the
        # rank's other lines in the same file have none, and that is still one node.
        hosts = {host for host, _ in self._locals if host} | {x.host for x in job.exits if x.host}
        single_node = len(hosts) <= 1

        def resolve(host: str | None, local: int) -> int | None:
            if (host, local) in by_host:
                return by_host[(host, local)]
            if len(by_local.get(local, ())) == 1:
                return next(iter(by_local[local]))
            return local if single_node else None

        for host, local in self._locals:
            if (resolved := resolve(host, local)) is not None:
                job.ranks.add(resolved)
        pids = {x.pid: x.rank for x in job.exits if x.pid is not None and x.rank is not None} | job.pid_rank
        for event in job.events:
            if event.rank is None and event.local_rank is not None:
                event.rank = resolve(event.host, event.local_rank)
            if event.rank is None and (match := PROCESS_PID.search(event.line)):
                event.rank = pids.get(int(match["pid"]))

    def _merge_exits(self) -> None:
        """One process's exit reported twice (torchrun's "failed (exitcode: -9) local_rank: 1 (pid: 42)" and its table's
        entry for pid 42, or the table's "Signal 9 (SIGKILL) received by PID 42") is one exit, with what each says."""
        by_pid: dict[int, Exit] = {}
        kept: list[Exit] = []
        for x in self.job.exits:
            into = by_pid.get(x.pid) if x.pid is not None else None
            if into is not None and (into.host is None or x.host is None or into.host == x.host):
                for name in ("rank", "local_rank", "code", "host", "time"):
                    if getattr(into, name) is None:
                        setattr(into, name, getattr(x, name))
                into.first, into.oom, into.note = into.first or x.first, into.oom or x.oom, into.note or x.note
                continue
            if x.pid is not None:
                by_pid[x.pid] = x
            kept.append(x)
        self.job.exits = kept

    def _after_first(self) -> None:
        """srun's "Killed" tasks after a task exited with an error of its own are srun's kill (--kill-on-bad-exit, or the
        step torn down), not the host's OOM killer. torchrun's table is left as it is: its "first observed failure" is
        the first exit it noticed, and a rank SIGKILLed by the OOM killer may be noticed after its victims."""
        first = first_failure(self.job.exits)
        if first is None or first.code == -9 or first.launcher != "srun":
            return
        for x in self.job.exits:
            if x is not first and x.code == -9 and x.launcher == "srun" and not x.oom:
                x.after_first = True

    def result(self) -> JobEvents:
        self._merge_exits()
        self._after_first()
        self._global_ranks()
        return self.job


def first_failure(exits: list[Exit]) -> Exit | None:
    """The exit that came first among those that were not the launcher stopping a rank (SIGTERM): torchrun's "first
    observed failure", else the earliest by time, else the first reported."""
    failed = [x for x in exits if x.code not in (None, 0, -15) and not x.after_first]
    if not failed:
        return None
    if (marked := next((x for x in failed if x.first), None)) is not None:
        return marked
    timed = [x for x in failed if x.time is not None]
    return min(timed, key=lambda x: x.time) if len(timed) == len(failed) else failed[0]  # type: ignore[arg-type,return-value]


def collect(lines: Iterable[LogLine]) -> JobEvents:
    collector = EventCollector()
    for line in lines:
        collector.feed(line)
    return collector.result()
