"""Causal triage of a distributed job's logs: the earliest real failure is the root cause; collective
timeouts, lost peers, the launcher's SIGTERM and its failure summary are consequences
(``jobs.consequences``). When every failure is a wait, ``jobs.waits`` names who the others waited for.
A log that ends without an error, for a job the user says hangs, is read as a hang.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import IO

from jobs import wording
from jobs.codes import meanings
from jobs.consequences import (
    clock,
    collective_of,
    consequences_of,
    from_launcher,
    rank_world,
    sort_key,
    symptoms_in_chinese,
    timeline,
    why,
)
from jobs.diagnosis import HANG_WORDS, JobDiagnosis, RootCause, clip
from jobs.events import SIGNALS, Event, JobEvents, collect
from jobs.lines import LogLine
from jobs.reader import read_job
from jobs.waits import NEXT_EVIDENCE, from_waits

# What to look at next for a kind whose fix is on the machine, not in the code or the documents.
CHECKS = {
    "host_oom": [
        "`dmesg -T | grep -i -E 'killed process|out of memory'` on that node: the OOM killer's line names the process "
        "and how much RAM it held",
        "the job's memory limit, not only the machine's: `cat /sys/fs/cgroup/memory.max` in the container, Slurm's "
        "`--mem`/`--mem-per-cpu`, the pod's memory limit",
        "what holds the RAM: every rank loading the whole dataset or a full model copy, DataLoader workers "
        "(`num_workers` x `prefetch_factor` batches each), CPU offload of optimizer states or parameters",
    ],
}
LAUNCH_WORDS = re.compile(r"(?i)Starting elastic_operator|rendezvous|torchrun|torch\.distributed\.run|Using nproc_per_node|master_addr")


def _earliest(events: list[Event]) -> Event:
    """By time when every candidate has one (files of different ranks), else in reading order."""
    if all(e.time for e in events):
        return min(events, key=sort_key)
    return min(events, key=lambda e: e.order)


def _attribute(job: JobEvents) -> None:
    """Give unattributed root events the rank that failed by itself, when exactly one did."""
    failed = {x.rank for x in job.exits if x.rank is not None and x.code is not None and x.code > 0}
    failed |= {x.rank for x in job.exits if x.rank is not None and x.code in (-7, -9, -11) and not x.after_first}
    if len(failed) == 1:
        rank = next(iter(failed))
        host = next((x.host for x in job.exits if x.rank == rank and x.host), None)
        for event in job.events:
            if event.kind == "root" and event.rank is None and event.category not in ("port_in_use", "rendezvous"):
                event.rank = rank
                event.host = event.host or host


def _exit_events(job: JobEvents) -> list[Event]:
    """Exit codes as events: SIGTERM is the launcher's doing; SIGKILL/SIGBUS/SIGSEGV may be the cause."""
    events = []
    for index, x in enumerate(job.exits):
        if x.code is None or x.code >= 0:
            continue
        name = SIGNALS.get(-x.code, f"signal {-x.code}")
        task = f"Slurm task {x.rank}: " if x.launcher == "srun" and x.rank is not None else ""
        line = f"{task}exitcode {x.code} ({name})" + (f": {x.note}" if x.note else "")
        if x.code in (-15, -1, -2, -3) or x.after_first:  # stopped: by the launcher, the scheduler, a user
            kind, category = "symptom", "killed_by_launcher"
        elif x.code == -6:
            kind, category = "symptom", "process_abort"
        elif x.code == -7:
            kind, category = "root", "dataloader_worker"
        elif x.code in (-11, -4, -8):
            kind, category = "root", "native_crash"  # a segfault: native code (an extension, a driver, a library)
        else:
            kind, category = "root", "host_oom"  # SIGKILL nobody else sent: usually the kernel's OOM killer
        summary, line_zh = f"killed by {name}", ""
        if x.after_first:
            summary = f"killed by {name} after another rank had failed: the launcher's (or the scheduler's) kill"
        elif x.oom:
            summary += ": Slurm reports Out Of Memory (the step's cgroup memory limit: --mem, --mem-per-cpu, --mem-per-gpu)"
            line += f": {summary}"
        elif x.code == -9:  # said where it is shown: a bare "exitcode -9" reads as a mystery
            summary += (", usually by the kernel's OOM killer: host RAM ran out (`dmesg -T | grep -i 'killed process'`"
                        " shows it), else the scheduler or a user sent it")
            line_zh = f"{line}：{wording.KILLED_BY_SIGKILL}"
            line += f": {summary}"
        events.append(Event(order=10**9 + index, kind=kind, category=category, summary=summary,
                            line=line, rank=x.rank, host=x.host, time=x.time, line_zh=line_zh))
    return events


def _raised(event: Event) -> bool:
    return event.category == "exception" or bool(re.match(r"^[\w.]+(Error|Exception)\b", event.line))


def _root_summary(event: Event, every: bool) -> str:
    who = "every rank" if every else (f"rank {event.rank}" if event.rank is not None else "the job")
    host = f" on {event.host}" if event.host and not every else ""
    place = ""
    if event.where:
        place = f" in {event.func} ({event.where})" if event.func and event.func != "<module>" else f" at {event.where}"
    verb = "raised" if _raised(event) else "reported"
    return f"{who}{host} {verb} {clip(event.line)}{place}{clock(event.time)}{_meaning(event)}"


def _meaning(event: Event) -> str:
    """What the line means where it does not say it (an argparse error: whose parser; a missing interface: which
    variable; a CUDA error code: what it is), after the line as printed."""
    if event.meaning:
        return f": {event.meaning}"
    if event.category == "cuda_error" and (codes := meanings([event.line, *event.detail], most=1)):
        return f": {codes[0].said('en')}"
    return ""


def _confidence(root: Event, others: list[Event]) -> float:
    score = 0.55
    if root.rank is not None:
        score += 0.15
    if root.where or root.frames:
        score += 0.1
    if root.category != "exception":
        score += 0.1
    if any(e.kind == "root" and e.rank not in (None, root.rank) for e in others):
        score -= 0.2  # other ranks failed on their own too
    return round(max(0.1, min(score, 0.95)), 2)


def _from_root(job: JobEvents, roots: list[Event], events: list[Event]) -> JobDiagnosis:
    first = _earliest(roots)
    same_rank = [e for e in roots if e.rank == first.rank]
    specific = [e for e in same_rank if e.category != "exception" and abs(e.order - first.order) < 400]
    chosen = min(specific, key=lambda e: e.order) if specific and first.category == "exception" else first
    if not chosen.frames:  # a logged message ("out of memory, skipping the batch") with the traceback printed after it
        raised = [e for e in same_rank if e.summary == chosen.summary and e.frames and 0 < e.order - chosen.order < 400]
        if raised:
            exception = min(raised, key=lambda e: e.order)
            exception.time = exception.time or chosen.time
            chosen = exception
    if chosen.where is None:  # a chained exception: the user's frame is in the traceback printed next
        near = [e for e in same_rank if e.where and abs(e.order - chosen.order) < 400]
        if near:
            donor = min(near, key=lambda e: abs(e.order - chosen.order))
            chosen.where, chosen.func, chosen.frames = donor.where, donor.func, chosen.frames or donor.frames
    ranks_with_it = {e.rank for e in roots if e.category == chosen.category and e.rank is not None}
    world = rank_world(job)
    every = len(ranks_with_it) >= 2 and ranks_with_it >= world
    rank = None if every else chosen.rank
    symptoms = consequences_of(events, chosen)
    # The line that names the cause, where the error itself does not: what its message continues with (NCCL's
    # "Last error: Bootstrap : no socket interface found"), and NCCL's warnings on the same rank just before it.
    warned = [e.line for e in same_rank if "NCCL WARN" in e.line and 0 < chosen.order - e.order < 200][-2:]
    naming = list(dict.fromkeys([*chosen.detail, *warned]))
    evidence = [chosen.line] + [f for f in chosen.frames[-3:]] + naming
    root = RootCause(
        category=chosen.category, rank=rank, summary=_root_summary(chosen, every), host=chosen.host,
        evidence=evidence, where=chosen.where, confidence=_confidence(chosen, roots),
    )
    return JobDiagnosis(
        kind="log", root_cause=root, symptoms=symptoms, timeline=timeline(events), ranks=sorted(world),
        why_consequences=why(chosen, rank, symptoms), collective=collective_of(job),
        search_lines=[chosen.line, *naming], next_evidence=list(CHECKS.get(chosen.category, [])),
        wording={"zh": symptoms_in_chinese(events, chosen, rank) | {"root": wording.root_summary(chosen, every, _raised(chosen))}
                 | ({"next": "\n".join(wording.CHECKS[chosen.category])} if chosen.category in wording.CHECKS else {})},
    )


def _hang(job: JobEvents) -> JobDiagnosis:
    launched_only = job.worker_lines == 0 and LAUNCH_WORDS.search(job.last_line or "") is not None
    if launched_only or (job.worker_lines == 0 and job.lines > 0):
        summary = ("the log stops after the launch with no output from any rank: the launcher is most likely "
                   "waiting at rendezvous for nodes (or ranks) that never joined")
        root = RootCause("rendezvous", None, summary, evidence=[job.last_line[:240]] if job.last_line else [], confidence=0.5)
        chinese = wording.RENDEZVOUS
    else:
        summary = (f"the log ends without an error while the job hangs; the last line was: {job.last_line[:160]!r}. "
                   "The log alone cannot tell where each rank waits")
        root = RootCause("unknown", None, summary, evidence=[job.last_line[:240]] if job.last_line else [], confidence=0.2)
        chinese = wording.ended_without_error(job.last_line or "")
    return JobDiagnosis("log", root, [], [], sorted(rank_world(job)), "", collective_of(job), list(NEXT_EVIDENCE),
                        ["hang " + (job.last_line[:200] if job.last_line else "")],
                        wording={"zh": {"root": chinese, "next": "\n".join(wording.NEXT_EVIDENCE)}})


def triage_events(job: JobEvents, question: str = "") -> JobDiagnosis | None:
    _attribute(job)
    events = sorted(job.events + _exit_events(job), key=lambda e: e.order)
    roots = [e for e in events if e.kind == "root"]
    if roots:
        return _from_root(job, roots, events)
    if any(e.category in ("collective_timeout", "peer_closed") for e in events):
        return from_waits(job, events)
    if HANG_WORDS.search(question) or (job.lines and not events and HANG_WORDS.search(job.last_line)):
        return _hang(job)
    if events:  # the launcher's report and its reaction alone (a paste of its last lines): never "every rank timed out"
        return from_launcher(job, events)
    return None


def triage_lines(lines: Iterable[LogLine], question: str = "") -> JobDiagnosis | None:
    return triage_events(collect(lines), question)


def triage_paths(paths: Sequence[Path], question: str = "", stdin: IO[bytes] | None = None) -> JobDiagnosis | None:
    """The diagnosis of the job whose logs are ``paths`` (files, folders, .gz, "-" for ``stdin``)."""
    return triage_lines(read_job(paths, stdin), question)
