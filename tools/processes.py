"""Training processes here: each running job (its launcher PID and ranks) told apart from leftovers; read-only."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Collection
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from tools.base import Clock, Finding, ProbeContext, ProbeResult, finish
from tools.redact import mask_text

NAME = "processes"
MAX_LISTED = 30
MAX_JOBS = 5
# Longer than torchrun's rendezvous timeouts (600 s by default, torch/distributed/elastic/rendezvous): a launcher
# without a live rank for this long is not starting up any more.
STALE_LAUNCHER_S = 1800.0
# A process that started this soon after the process that now is its parent (pid 1, a subreaper) was started by
# it (a container's main process, a service started at boot); one that started later was adopted: its parent died.
BORN_WITH_ADOPTER_S = 60.0
_LAUNCHER = re.compile(
    r"(^|[/\s])(torchrun|deepspeed|accelerate(-launch)?\s+launch|accelerate-launch|raylet)(\s|$)"
    r"|torch\.distributed\.(run|launch)|deepspeed\.launcher\.(launch|runner)"
)
_TRAINING = re.compile(
    _LAUNCHER.pattern
    + r"|python[\d.]*\s+(-\S+\s+)*\S*train\S*\.py"
    r"|(^|[/\s])vllm(\s|$)|vllm\.entrypoints"
    r"|^ray::|default_worker\.py"
)
# Processes that adopt orphans besides pid 1 (PR_SET_CHILD_SUBREAPER): container inits and the user's systemd.
_SUBREAPER = re.compile(r"(^|/)(tini|dumb-init|docker-init|catatonit|s6-svscan)(\s|$)|(^|/)systemd\s+--user")
_KINDS = (("torch.distributed", "torchrun"), ("torchrun", "torchrun"), ("deepspeed", "deepspeed"),
          ("accelerate", "accelerate"), ("raylet", "ray"))

Verdict = Literal["running", "leftover"]


@dataclass(frozen=True)
class Proc:
    pid: int
    ppid: int
    cmdline: str
    age_s: float | None
    state: str = ""  # /proc/PID/stat's state letter: R, S, D, Z (defunct), ...; "" when not known


@dataclass(frozen=True)
class Job:
    """A tree of training processes: its launcher (or the lone process), the ranks, and what it looks like."""

    root: Proc
    launcher: Proc | None
    ranks: tuple[Proc, ...]  # the launcher's children that still run
    defunct: tuple[Proc, ...]  # exited children nobody reaped yet (zombies)
    members: tuple[Proc, ...]  # every training process of the tree, root included
    verdict: Verdict
    reason: str

    @property
    def head(self) -> Proc:
        """The one process to stop the whole job: the launcher (it passes SIGTERM to every rank), else the root."""
        return self.launcher or self.root


ProcReader = Callable[[], list[Proc]]


def available(ctx: ProbeContext) -> tuple[bool, str]:
    if not Path("/proc/self").exists():
        return False, "/proc not found (not Linux)"
    return True, ""


def read_procs(proc_root: Path = Path("/proc")) -> list[Proc]:
    """Every process we can read; vanished or foreign ones are skipped."""
    ticks = os.sysconf("SC_CLK_TCK")
    try:
        uptime = float((proc_root / "uptime").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        uptime = None
    procs = []
    for pid_dir in proc_root.iterdir():
        if not pid_dir.name.isdigit():
            continue
        try:
            cmdline = (pid_dir / "cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace").strip()
            stat = (pid_dir / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()  # the command name may contain spaces and parentheses
        state, ppid, start = fields[0], int(fields[1]), int(fields[19])
        if not cmdline and state == "Z":  # a zombie has no command line left: name it as ps does
            cmdline = f"[{stat[stat.find('(') + 1 : stat.rfind(')')]}] <defunct>"
        age = round(uptime - start / ticks, 1) if uptime is not None else None
        procs.append(Proc(int(pid_dir.name), ppid, cmdline, age, state))
    return procs


def ancestors(pid: int, parents: dict[int, int]) -> set[int]:
    seen = {pid}
    while pid in parents and parents[pid] not in seen and parents[pid] > 0:
        pid = parents[pid]
        seen.add(pid)
    return seen


def is_subreaper(cmdline: str) -> bool:
    return bool(_SUBREAPER.search(cmdline))


def find_jobs(procs: list[Proc], skip: Collection[int] = ()) -> list[Job]:
    """Groups the training processes into jobs (a launcher's tree, or a lone process) and judges each one."""
    by_pid = {p.pid: p for p in procs}
    hits = {p.pid for p in procs if p.pid not in skip and _TRAINING.search(p.cmdline)}
    hits |= {p.pid for p in procs if p.state == "Z" and p.ppid in hits and p.pid not in skip}
    trees: dict[int, list[Proc]] = {}
    for pid in sorted(hits):
        trees.setdefault(_root(pid, by_pid, hits), []).append(by_pid[pid])
    return [_judge(by_pid[root], members, by_pid) for root, members in trees.items()]


def _root(pid: int, by_pid: dict[int, Proc], hits: set[int]) -> int:
    """The topmost training process above ``pid`` (through shells and other helpers in between)."""
    top, seen = pid, {pid}
    while (ppid := by_pid[pid].ppid) in by_pid and ppid not in seen and ppid > 0:
        pid = ppid
        seen.add(pid)
        if pid in hits:
            top = pid
    return top


def _judge(root: Proc, members: list[Proc], by_pid: dict[int, Proc]) -> Job:
    verdict: Verdict
    launchers = {p.pid: p for p in members if p.state != "Z" and _LAUNCHER.search(p.cmdline)}
    launcher = next((p for p in members if p.pid in launchers and p.ppid not in launchers), None)
    children = [p for p in members if p.ppid in launchers and p.pid not in launchers]
    ranks = tuple(p for p in children if p.state != "Z")
    defunct = tuple(p for p in members if p.state == "Z")
    if launcher is not None:
        if ranks:
            verdict, reason = "running", f"{len(ranks)} rank(s) alive"
        elif launcher.age_s is None or launcher.age_s < STALE_LAUNCHER_S:
            verdict, reason = "running", "no rank alive yet: starting up or waiting at rendezvous"
        else:
            verdict, reason = "leftover", f"launcher without a live rank for {_age(launcher.age_s)}"
    elif _adopted(root, by_pid):
        verdict, reason = "leftover", f"its parent exited (adopted by pid {root.ppid})"
    else:
        verdict, reason = "running", "its parent is alive"
    return Job(root, launcher, ranks, defunct, tuple(members), verdict, reason)


def _adopted(proc: Proc, by_pid: dict[int, Proc]) -> bool:
    """Its parent died and pid 1 or a subreaper took it over (ppid 0 means a parent outside our pid namespace)."""
    parent = by_pid.get(proc.ppid)
    if proc.ppid != 1 and not (parent is not None and is_subreaper(parent.cmdline)):
        return False
    if parent is not None and parent.age_s is not None and proc.age_s is not None:
        return parent.age_s - proc.age_s >= BORN_WITH_ADOPTER_S
    return True


def probe(ctx: ProbeContext, reader: ProcReader = read_procs, self_pid: int | None = None) -> ProbeResult:
    """List training processes (torchrun, deepspeed, accelerate launch, python *train*.py, vllm, ray workers): each running job with its launcher PID and ranks, and the leftovers apart; never stops anything."""  # noqa: E501 - the LLM-facing description is one line
    clock = Clock(ctx.timeout_s)
    procs = reader()
    parents = {p.pid: p.ppid for p in procs}
    skip = ancestors(self_pid if self_pid is not None else os.getpid(), parents)
    by_pid = {p.pid: p for p in procs}
    jobs = find_jobs(procs, skip)
    verdicts = {m.pid: (job, _role(m, job)) for job in jobs for m in job.members}
    hits = sorted((by_pid[pid] for pid in verdicts), key=lambda p: p.pid)
    listed = [
        {**asdict(p), "cmdline": mask_text(p.cmdline)[:300],
         "parent": mask_text(by_pid[p.ppid].cmdline)[:120] if p.ppid in by_pid else None,
         "job": verdicts[p.pid][0].head.pid, "role": verdicts[p.pid][1], "verdict": verdicts[p.pid][0].verdict}
        for p in hits[:MAX_LISTED]
    ]
    running = sorted((j for j in jobs if j.verdict == "running"), key=lambda j: (j.head.age_s is None, j.head.age_s or 0))
    leftovers = sorted((j for j in jobs if j.verdict == "leftover"), key=lambda j: j.head.pid)
    findings = [_running_finding(job) for job in running[:MAX_JOBS]]
    if len(running) > MAX_JOBS:
        findings.append(Finding("TRAINING_JOB_RUNNING", "info", f"{len(running) - MAX_JOBS} more training job(s) running",
                                ", ".join(f"pid {j.head.pid}" for j in running[MAX_JOBS:MAX_JOBS + 20]), "", _TOPICS))
    if leftovers:
        findings.append(_leftover_finding(leftovers))
    evidence = {"processes": listed, "matched": len(hits), "scanned": len(procs),
                "jobs": [_job_evidence(j) for j in (running + leftovers)[:MAX_LISTED]]}
    if running:
        ok = f"{len(running)} training job(s) running, none left over ({len(procs)} scanned)"
    else:
        ok = f"no training processes running ({len(procs)} scanned)"
    return finish(NAME, clock, findings, evidence, ok)


_TOPICS = ("training job", "nccl hang", "hang", "distributed training")


def _role(proc: Proc, job: Job) -> str:
    if proc.state == "Z":
        return "defunct"
    if job.launcher is not None and proc.pid == job.launcher.pid:
        return "launcher"
    return "rank" if proc in job.ranks else "process"


def _kind(job: Job) -> str:
    if job.launcher is None:
        return "training process"
    found = [(job.launcher.cmdline.find(word), kind) for word, kind in _KINDS if word in job.launcher.cmdline]
    return (min(found)[1] if found else "launcher") + " job"  # the first word: the launcher, not its arguments


def _running_finding(job: Job) -> Finding:
    head = job.head
    if job.launcher is not None:
        ranks = ", ".join(str(p.pid) for p in job.ranks[:16]) + (" ..." if len(job.ranks) > 16 else "")
        who = f"launcher pid {head.pid}, " + (f"{len(job.ranks)} rank(s): pids {ranks}" if job.ranks else job.reason)
        stop = (f"stop that job alone by its launcher's PID: `kill -TERM {head.pid}` (the launcher passes SIGTERM on "
                "to every rank; each rank runs in a session of its own, so a process-group kill misses ranks)")
    else:
        others = len(job.members) - 1 - len(job.defunct)
        who = f"pid {head.pid}" + (f" with {others} child process(es)" if others > 0 else "")
        stop = f"stop it alone by its PID: `kill -TERM {head.pid}`"
    lines = [f"pid {head.pid} (age {_age(head.age_s)}): {mask_text(head.cmdline)[:120]}"]
    if job.ranks:
        lines.append(f"rank pid {job.ranks[0].pid}: {mask_text(job.ranks[0].cmdline)[:120]}")
    if job.defunct:
        lines.append(f"{len(job.defunct)} exited child process(es) not yet reaped: "
                     + ", ".join(str(p.pid) for p in job.defunct[:8]))
    return Finding(
        "TRAINING_JOB_RUNNING", "info",
        f"{_kind(job)} running ({who}; started {_age(head.age_s)} ago): a running job, not a leftover",
        "; ".join(lines),
        f"Leave it running while you look. If it is the job that hangs, take its stacks first "
        f"(`traindoc hang --pid {head.pid}`), then {stop}. traindoc never stops processes itself.",
        _TOPICS)


def _leftover_finding(jobs: list[Job]) -> Finding:
    lines = [f"pid {j.head.pid} (age {_age(j.head.age_s)}, {j.reason}): {mask_text(j.head.cmdline)[:120]}" for j in jobs]
    pids = " ".join(str(j.head.pid) for j in jobs[:10])
    return Finding(
        "LEFTOVER_TRAINING_PROCESS", "problem",
        f"{len(jobs)} training process(es) look left over (oldest {_age(max((j.head.age_s or 0) for j in jobs))})",
        "; ".join(lines[:5]) + (f" (+{len(lines) - 5} more)" if len(lines) > 5 else ""),
        f"If they are not something you still run, stop each one by its own PID: `kill -TERM {pids}`; check "
        "`nvidia-smi` afterwards. If one of them is the job that hangs, take its stacks first "
        f"(`traindoc hang --pid {jobs[0].head.pid}`). traindoc never stops processes itself.",
        ("leftover process", "zombie process", "address already in use", "cuda out of memory"))


def _job_evidence(job: Job) -> dict[str, Any]:
    return {"pid": job.head.pid, "launcher": job.launcher.pid if job.launcher else None,
            "ranks": [p.pid for p in job.ranks], "defunct": [p.pid for p in job.defunct],
            "processes": len(job.members), "age_s": job.head.age_s, "verdict": job.verdict, "reason": job.reason}


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f}min"
    return f"{seconds / 3600:.1f}h"
