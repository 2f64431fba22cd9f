"""What every rank of a hung job is doing now: a read-only stack snapshot, grouped, with the odd ones named.

Three sources feed the same grouping: py-spy on this machine's workers (``snapshot_job``), torch's debug
server for every node through rank 0 (``snapshot_from_debug_server``), and Flight Recorder dumps read by
torch's analyzer (``analyse_flight_recorder``). Identical stacks form a group; each group's place is the
innermost torch.distributed call (barrier, all_reduce, ...) and the deepest user frame. The ranks that are
not where the others are make the root cause: one rank outside every collective is a straggler; ranks in
different collectives are a collective mismatch; ranks inside init_process_group, or a launcher with no
workers, wait for the rendezvous.
"""

from __future__ import annotations

import socket
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from common.errors import ConfigError, InputError
from common.language import say
from jobs import hang_wording as said
from jobs import stack_hints as hints
from jobs.diagnosis import JobDiagnosis, RootCause, Symptom
from jobs.flight_recorder import FrFinding
from jobs.places import Place, RankStack, StackGroup, phrased
from jobs.pyspy import Frame
from jobs.pyspy import main_thread as _main_thread
from jobs.stacks import HangSnapshot, analyse_stacks, group_stacks, locate

__all__ = ["HangSnapshot", "RankStack", "analyse_flight_recorder", "analyse_stacks", "group_stacks", "locate",
           "merge_flight_recorder", "snapshot_from_debug_server", "snapshot_job", "take_snapshot"]

# -- entry points ------------------------------------------------------------------------------------------------

def snapshot_job(pid: int | None = None, *, native: bool = False, timeout_s: float = 10.0) -> JobDiagnosis | None:
    """Read-only stack snapshot of every rank of the training job on this machine (py-spy); None when no
    training process runs here."""
    snapshot = take_snapshot(pid, native=native, timeout_s=timeout_s)
    return snapshot.diagnosis if snapshot is not None else None


def take_snapshot(pid: int | None = None, *, native: bool = False, timeout_s: float = 10.0,
                  pyspy: str | None = None, proc_root: Path | None = None) -> HangSnapshot | None:
    """``snapshot_job`` with the groups, for rendering: every rank dumped at once; ConfigError when no rank can
    be read at all (ptrace refused, py-spy missing), one line that says how to allow it."""
    from jobs import procs
    from jobs.pyspy import dump_many

    job = procs.select_job(pid, proc_root or procs.PROC, timeout_s=min(5.0, timeout_s))
    if job is None:
        return None
    host = socket.gethostname()
    targets = [w.pid for w in job.workers] or ([job.launcher.pid] if job.launcher else [])
    dumps = dump_many(targets, native=native, timeout_s=timeout_s, binary=pyspy)
    failures = [d for d in dumps.values() if not d.ok]
    if failures and len(failures) == len(dumps):
        reasons = {d.reason for d in failures}
        if reasons & {"ptrace_denied", "missing"}:
            first = next(d for d in failures if d.reason in ("ptrace_denied", "missing"))
            raise ConfigError(first.error)
    source = say("hang.source.pyspy", "en", host=host)
    if not job.workers:
        assert job.launcher is not None
        launcher_dump = dumps.get(job.launcher.pid)
        frames = launcher_dump.main.frames if launcher_dump and launcher_dump.ok and launcher_dump.main else ()
        return _no_workers(job, frames, host, source)
    stacks = []
    for index, worker in enumerate(job.workers):
        result = dumps[worker.pid]
        thread = result.main if result.ok else None
        error = None if result.ok else result.error
        if result.ok and thread is None:
            error = f"py-spy found no thread in pid {worker.pid}"
        stacks.append(RankStack(worker.rank if worker.rank is not None else index, thread.frames if thread else (),
                                worker.pid, host, error))
    snapshot = analyse_stacks(stacks, world_size=job.world_size, source=source, job=job.describe(), native=native)
    if job.launcher is not None:
        _then_stop(snapshot.diagnosis, job.launcher.kind, job.launcher.pid)
    if job.stuck:
        pids = ", ".join(map(str, job.stuck[:8]))
        snapshot.diagnosis.symptoms.append(Symptom("stuck_in_kernel", [], said.stuck_in_kernel(pids, min(5.0, timeout_s), "en")))
        said.add_symptom(snapshot.diagnosis, said.stuck_in_kernel(pids, min(5.0, timeout_s), "zh"))
    return snapshot


def _then_stop(diagnosis: JobDiagnosis, kind: str, pid: int) -> None:
    """The last step of what to do: once the stacks (and any Flight Recorder dumps) are kept, stop *this* job by its
    launcher. torchrun forwards SIGTERM to every rank (each in a session of its own, so a process-group kill
    misses them); a kill by name would stop every job of that name on a shared node."""
    diagnosis.next_evidence.append(said.then_stop(kind, pid, "en"))
    own = diagnosis.wording.get("zh")
    if own is not None:
        step = said.then_stop(kind, pid, "zh")
        own["next"] = f"{own['next']}\n{step}" if own.get("next") else step


def snapshot_from_debug_server(url: str, timeout_s: float = 10.0, *, native: bool = False) -> HangSnapshot:
    """Every rank on every node through rank 0's torch debug server: stacks, then Flight Recorder traces."""
    from jobs.debug_server import read_debug_server
    from jobs.flight_recorder import analyse_dumps

    reading = read_debug_server(url, timeout_s=timeout_s, native=native)
    stacks = []
    for rank in sorted(set(reading.threads) | set(reading.errors)):
        thread = _main_thread(reading.threads.get(rank, ()))
        error = reading.errors.get(rank) if thread is None else None
        stacks.append(RankStack(rank, thread.frames if thread else (), reading.pids.get(rank), reading.hosts.get(rank),
                                error or (None if thread else "no stack")))
    if not stacks:
        raise InputError(f"--debug-server {url}: the server listed no ranks")
    snapshot = analyse_stacks(stacks, world_size=len(stacks), source=say("hang.source.debug_server", "en", url=reading.url),
                              job=say("hang.source.ranks_behind", "en", count=len(stacks), url=reading.url), native=native)
    if reading.fr_dumps:
        finding = analyse_dumps(reading.fr_dumps, timeout_s=max(timeout_s, 30.0))
        if finding.error is None:
            merge_flight_recorder(snapshot, finding)
    return snapshot


def analyse_flight_recorder(fr_dir: Path, timeout_s: float = 60.0) -> HangSnapshot:
    """Flight Recorder dump files (one per rank) read by torch's analyzer: where ranks diverge."""
    from jobs.flight_recorder import analyse_dir

    finding = analyse_dir(fr_dir, timeout_s=timeout_s)
    if finding.error is not None:
        raise InputError(f"--fr-dir {fr_dir}: {finding.error}")
    if finding.missing_ranks:
        joined = [r for r in finding.expected_ranks if r not in finding.missing_ranks]
        category, rank = ("straggler", finding.missing_ranks[0]) if len(finding.missing_ranks) <= len(joined) else ("unknown", None)
        if len(finding.missing_ranks) > 1 and category == "straggler":
            rank = None
    elif finding.mismatched:
        category, rank = "collective_mismatch", min(finding.mismatched) if len(finding.mismatched) == 1 else None
    elif finding.state == "started":
        category, rank = "network", None
    else:
        category, rank = "unknown", None
    evidence = [said.last_op(o.rank, o.name, o.seq, o.state, o.where, "en") for o in finding.last_ops[:8]]
    where = finding.where
    if rank is not None:  # the odd rank's own last call says more than the collective the others entered
        where = next((o.where for o in finding.last_ops if o.rank == rank and o.where), where)
    next_keys = [] if category in ("straggler", "collective_mismatch") else [hints.NCCL, hints.NATIVE]
    if category == "straggler":
        next_keys.append("hang.hint.missing_rank")
    diagnosis = JobDiagnosis(
        kind="hang", root_cause=RootCause(category, rank, finding.summary, evidence=evidence, where=where,
                                          confidence=0.7 if category != "unknown" else 0.3),
        ranks=finding.ranks, collective=finding.collective, next_evidence=[say(key, "en") for key in next_keys],
        search_lines=[finding.summary],
        wording={"zh": said.wording(said.flight_recorder(finding, "zh"), next_items=[say(key, "zh") for key in next_keys],
                                    collective=finding.collective)},
    )
    return HangSnapshot(diagnosis, [], say("hang.source.flight_recorder", "en", folder=fr_dir), flight_recorder=finding)


def merge_flight_recorder(snapshot: HangSnapshot, finding: FrFinding) -> None:
    """The analyzer's finding joins the stacks: the collective by sequence number, and a straggler when only
    the dumps show which rank never joined."""
    diagnosis = snapshot.diagnosis
    own = diagnosis.wording.setdefault("zh", {})  # the Chinese sentences follow the English ones
    found = {"en": finding.summary, "zh": said.flight_recorder(finding, "zh")}
    snapshot.flight_recorder = finding
    if finding.collective:
        diagnosis.collective = (f"{diagnosis.collective}{say('jobs.clause_sep', 'en')}{finding.collective}"
                                if diagnosis.collective else finding.collective)
        own["collective"] = (f"{own['collective']}{say('jobs.clause_sep', 'zh')}{finding.collective}"
                             if own.get("collective") else finding.collective)
    diagnosis.symptoms.append(Symptom("flight_recorder", finding.missing_ranks or sorted(finding.mismatched),
                                      say("hang.fr.finding", "en", summary=found["en"])))
    said.add_symptom(diagnosis, say("hang.fr.finding", "zh", summary=found["zh"]))
    diagnosis.next_evidence = [e for e in diagnosis.next_evidence if e != hints.FR_HINT]
    if own.get("next"):
        own["next"] = "\n".join(e for e in own["next"].splitlines() if e != say(hints.FR, "zh"))
        if not own["next"]:
            del own["next"]
    root = diagnosis.root_cause
    if root is not None and root.category in ("unknown", "network") and len(finding.missing_ranks) == 1:
        summary = root.summary + say("jobs.clause_sep", "en") + say("hang.fr.finding", "en", summary=found["en"])
        diagnosis.root_cause = replace(root, category="straggler", rank=finding.missing_ranks[0], summary=summary,
                                       confidence=0.6)
        own["root"] = (own.get("root") or root.summary) + say("jobs.clause_sep", "zh") + \
            say("hang.fr.finding", "zh", summary=found["zh"])


def _no_workers(job: Any, frames: Sequence[Frame], host: str, source: str) -> HangSnapshot:
    launcher = job.launcher
    nnodes = launcher.option("--nnodes")
    endpoint = launcher.option("--rdzv-endpoint") or launcher.option("--master-addr")
    port = launcher.option("--master-port")
    target = endpoint + (f":{port}" if port and endpoint and ":" not in endpoint else "") if endpoint else None
    python = [f for f in frames if f.kind != "native"]
    label, phrase = phrased("hang.label.rendezvous", launcher=launcher.kind)
    place = Place("rendezvous", label, None, python[0] if python else None, phrase=phrase)
    inner = place.inner.text() if place.inner else None
    summary = said.no_workers(launcher.kind, launcher.pid, nnodes, target, inner, "en")
    group = StackGroup(place, [], [launcher.pid], [host], [f.text() for f in frames if f.kind != "native"][:12])
    evidence = [launcher.cmdline[:300]] + [f.text() for f in frames if f.kind != "native"][:5]
    root = RootCause("rendezvous", None, summary, host=host, evidence=evidence, where=place.inner.text() if place.inner else None,
                     confidence=0.6)
    next_keys = [*hints.RENDEZVOUS, hints.NODES]
    diagnosis = JobDiagnosis(kind="hang", root_cause=root, next_evidence=[say(key, "en") for key in next_keys],
                             search_lines=[summary],
                             wording={"zh": said.wording(said.no_workers(launcher.kind, launcher.pid, nnodes, target, inner, "zh"),
                                                         next_items=[say(key, "zh") for key in next_keys])})
    return HangSnapshot(diagnosis, [group], source, job.describe())
