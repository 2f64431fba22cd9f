"""The training jobs running on this machine, read from /proc only (never signalled, never written).

A worker is a process whose environment has RANK or LOCAL_RANK (torchrun, the DeepSpeed launcher and
accelerate set them); its launcher is the nearest ancestor that runs torchrun / torch.distributed.run /
torch.distributed.launch / the DeepSpeed launcher / accelerate launch. A worker's own children that
inherit its environment (DataLoader workers, the debug server's frontend, compile workers) are not ranks.
"""

from __future__ import annotations

import os
import queue
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from common.errors import InputError, UsageError
from common.textsafe import clip_words

PROC = Path("/proc")
_ENV_KEYS = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "TORCHELASTIC_RUN_ID",
             "MASTER_ADDR", "MASTER_PORT")
_LAUNCHER_SCRIPTS = {"torchrun": "torchrun", "deepspeed": "deepspeed", "accelerate-launch": "accelerate"}
_LAUNCHER_MODULES = {
    "torch.distributed.run": "torchrun", "torch.distributed.launch": "torch.distributed.launch",
    "deepspeed.launcher.launch": "deepspeed", "deepspeed.launcher.runner": "deepspeed",
    "accelerate.commands.launch": "accelerate",
}


@dataclass(frozen=True)
class ProcInfo:
    pid: int
    ppid: int
    argv: tuple[str, ...]
    state: str  # the /proc/PID/stat state letter: R, S, D, Z, ...
    env: dict[str, str]  # only the distributed keys (_ENV_KEYS)
    exe: str = ""

    @property
    def cmdline(self) -> str:
        return " ".join(self.argv)

    @property
    def is_python(self) -> bool:
        names = [os.path.basename(self.exe)] + [os.path.basename(a) for a in self.argv[:1]]
        return any(n.startswith("python") or n.startswith("pypy") for n in names)


@dataclass(frozen=True)
class Launcher:
    pid: int
    kind: str  # torchrun, deepspeed, accelerate, torch.distributed.launch
    argv: tuple[str, ...]

    @property
    def cmdline(self) -> str:
        return " ".join(self.argv)

    def option(self, name: str) -> str | None:
        """A launcher option's value (``--nnodes 2`` or ``--nnodes=2``; ``_`` and ``-`` alike)."""
        wanted = {name, name.replace("-", "_"), name.replace("_", "-")}
        for i, arg in enumerate(self.argv):
            key, eq, value = arg.partition("=")
            if key in wanted:
                return value if eq else (self.argv[i + 1] if i + 1 < len(self.argv) else None)
        return None


@dataclass(frozen=True)
class Worker:
    pid: int
    ppid: int
    rank: int | None
    local_rank: int | None
    world_size: int | None
    group_rank: int | None  # the node's rank (torchrun's GROUP_RANK)
    run_id: str | None
    master: str | None  # MASTER_ADDR:MASTER_PORT
    argv: tuple[str, ...]
    state: str = "S"

    @property
    def cmdline(self) -> str:
        return " ".join(self.argv)


@dataclass(frozen=True)
class TrainingJob:
    launcher: Launcher | None
    workers: tuple[Worker, ...]  # ordered by rank
    stuck: tuple[int, ...] = ()  # pids of this machine whose /proc files did not answer (stuck in the kernel)

    @property
    def world_size(self) -> int | None:
        sizes = [w.world_size for w in self.workers if w.world_size]
        return max(sizes) if sizes else None

    @property
    def master(self) -> str | None:
        return next((w.master for w in self.workers if w.master), None)

    @property
    def pids(self) -> list[int]:
        return ([self.launcher.pid] if self.launcher else []) + [w.pid for w in self.workers]

    def describe(self) -> str:
        if self.launcher:
            return f"{self.launcher.kind} (pid {self.launcher.pid})"
        return f"ranks of {self.master or 'an unknown master'}"


def read_processes(proc_root: Path = PROC, timeout_s: float = 5.0) -> tuple[dict[int, ProcInfo], list[int]]:
    """Every process we may read, and the pids whose /proc files did not answer within ``timeout_s``.

    Reading a process's cmdline or environ takes its memory lock, which a process stuck in the kernel (D state,
    often inside a GPU driver call: just what a hung job has) can hold forever. So the reads run on a few daemon
    threads and whatever has not answered by the deadline is left behind and named. Processes that vanish
    meanwhile or belong to others are skipped."""
    try:
        entries = [e for e in proc_root.iterdir() if e.name.isdigit()]
    except OSError:
        return {}, []
    todo: queue.SimpleQueue[Path] = queue.SimpleQueue()
    for entry in entries:
        todo.put(entry)
    results: dict[int, ProcInfo | None] = {}

    def work() -> None:
        while True:
            try:
                entry = todo.get_nowait()
            except queue.Empty:
                return
            results[int(entry.name)] = _read_one(entry)

    threads = [threading.Thread(target=work, name="proc-scan", daemon=True) for _ in range(min(8, len(entries)))]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + timeout_s
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    done = dict(results)
    stuck = sorted(int(e.name) for e in entries if int(e.name) not in done)
    return {pid: info for pid, info in done.items() if info is not None}, stuck


def _read_one(entry: Path) -> ProcInfo | None:
    try:
        stat = (entry / "stat").read_text()
        raw = (entry / "cmdline").read_bytes()
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2:].split()  # the command name may hold spaces and parentheses
    if len(fields) < 2:
        return None
    argv = tuple(a.decode("utf-8", "replace") for a in raw.rstrip(b"\0").split(b"\0")) if raw else ()
    return ProcInfo(int(entry.name), int(fields[1]), argv, fields[0], _environ(entry), _readlink(entry / "exe"))


def _environ(entry: Path) -> dict[str, str]:
    try:
        raw = (entry / "environ").read_bytes()
    except OSError:
        return {}
    if b"RANK=" not in raw:
        return {}
    env = {}
    for item in raw.split(b"\0"):
        key, _, value = item.partition(b"=")
        name = key.decode("utf-8", "replace")
        if name in _ENV_KEYS:
            env[name] = value.decode("utf-8", "replace")
    return env


def _readlink(path: Path) -> str:
    try:
        return os.readlink(path)
    except OSError:
        return ""


def launcher_kind(argv: Sequence[str]) -> str | None:
    """torchrun, deepspeed, accelerate, ... when this command line is a distributed launcher."""
    for i, arg in enumerate(argv[:4]):
        base = os.path.basename(arg)
        if base in _LAUNCHER_SCRIPTS:
            return _LAUNCHER_SCRIPTS[base]
        if base == "accelerate" and "launch" in argv[i + 1:i + 2]:
            return "accelerate"
        if arg == "-m" and i + 1 < len(argv):
            return _LAUNCHER_MODULES.get(argv[i + 1])
        if i > 0 and not arg.startswith("-"):
            break  # the script: what follows are its own arguments
    return None


def find_jobs(proc_root: Path = PROC, exclude: Sequence[int] = (), timeout_s: float = 5.0) -> list[TrainingJob]:
    """Every training job of this machine: workers grouped by launcher (or by run id and master)."""
    procs, stuck = read_processes(proc_root, timeout_s)
    return _jobs(procs, _self_and_ancestors(procs, exclude), stuck)


def select_job(pid: int | None = None, proc_root: Path = PROC, timeout_s: float = 5.0) -> TrainingJob | None:
    """The job to snapshot: the one ``pid`` belongs to (the launcher, a worker or a worker's child), or the
    only job on this machine. None when nothing runs; one-line errors for a bad pid or several jobs."""
    procs, stuck = read_processes(proc_root, timeout_s)
    if pid is not None and pid in stuck:
        raise InputError(f"--pid {pid}: its /proc files did not answer within {timeout_s:g} s (stuck in the kernel, "
                         f"D state: often a GPU driver call); as root, `cat /proc/{pid}/stack` shows where")
    if pid is not None and pid not in procs:
        raise InputError(f"--pid {pid}: no such process")
    jobs = _jobs(procs, _self_and_ancestors(procs, ()), stuck)
    if pid is None:
        if len(jobs) > 1:
            raise SeveralJobs(tuple(_listing(job, proc_root) for job in jobs))
        return jobs[0] if jobs else None
    related = {pid} | _ancestors(procs, pid)
    for job in jobs:
        if set(job.pids) & related:
            return job
    descendants = _descendants(procs, pid)
    for job in jobs:
        if set(job.pids) & descendants:
            return job
    command = procs[pid].cmdline[:80] or procs[pid].state
    raise InputError(f"--pid {pid} ({command}) is not part of a training job: no RANK/LOCAL_RANK in its environment "
                     "and no torchrun/deepspeed launcher above or below it")


@dataclass(frozen=True)
class JobListing:
    """One job among several on a machine, as a user picks it: its first PID (the launcher's), command and owner."""

    pid: int
    command: str
    user: str


class SeveralJobs(UsageError):
    """Several training jobs run here and none was picked: the caller lists them (``jobs``) and how to pick one."""

    def __init__(self, jobs: tuple[JobListing, ...]) -> None:
        listed = ", ".join(f"pid {j.pid}" for j in jobs[:6])
        super().__init__(f"{len(jobs)} training jobs run on this machine ({listed})", hint="pick one with --pid")
        self.jobs = jobs


COMMAND_CHARS = 120  # a listed job's command: enough to tell two jobs apart


def _listing(job: TrainingJob, proc_root: Path) -> JobListing:
    pid = job.pids[0]
    argv = list(job.launcher.argv if job.launcher else job.workers[0].argv)
    if len(argv) > 1 and Path(argv[0]).name.startswith("python"):
        argv = argv[1:]  # `python /venv/bin/torchrun ...` reads as `torchrun ...`
    command = " ".join([Path(argv[0]).name, *argv[1:]]) if argv else ""
    return JobListing(pid, clip_words(command, COMMAND_CHARS), _owner(proc_root / str(pid)))


def _owner(entry: Path) -> str:
    """The user a process runs as (the owner of its /proc entry), by name where the system knows it."""
    import pwd

    try:
        uid = entry.stat().st_uid
    except OSError:
        return "?"
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def _jobs(procs: dict[int, ProcInfo], skip: set[int], stuck: Sequence[int] = ()) -> list[TrainingJob]:
    launchers = {p.pid: Launcher(p.pid, kind, p.argv) for p in procs.values()
                 if p.pid not in skip and (kind := launcher_kind(p.argv))}
    candidates = {p.pid: p for p in procs.values()
                  if p.pid not in skip and p.pid not in launchers and ("RANK" in p.env or "LOCAL_RANK" in p.env)}
    workers: dict[int, ProcInfo] = {}
    for proc in candidates.values():
        parent = candidates.get(proc.ppid)
        if parent is not None and parent.env.get("RANK") == proc.env.get("RANK"):
            if parent.is_python or not proc.is_python:
                continue  # a child of a rank (DataLoader worker, debug-server frontend), not a rank
        workers[proc.pid] = proc
    # A shell wrapper between launcher and Python: its Python child (same RANK) replaced it above.
    workers = {pid: p for pid, p in workers.items()
               if p.is_python or not any(c.ppid == pid and c.pid in workers for c in workers.values())}
    grouped: dict[object, list[Worker]] = {}
    owner: dict[object, Launcher | None] = {}
    for proc in workers.values():
        launcher = _nearest_launcher(procs, launchers, proc.pid)
        env = proc.env
        key: object = launcher.pid if launcher else ("env", env.get("TORCHELASTIC_RUN_ID"), env.get("MASTER_ADDR"),
                                                     env.get("MASTER_PORT"))
        owner[key] = launcher
        grouped.setdefault(key, []).append(_worker(proc))
    jobs = [TrainingJob(owner[key], tuple(sorted(ws, key=_rank_order)), tuple(stuck)) for key, ws in grouped.items()]
    busy = {job.launcher.pid for job in jobs if job.launcher}
    for launcher in launchers.values():
        if launcher.pid in busy:
            continue
        # A launcher above another one (deepspeed's runner above its launch.py) is not a job of its own.
        if any(launcher.pid in _ancestors(procs, other) for other in launchers if other != launcher.pid):
            continue
        jobs.append(TrainingJob(launcher, (), tuple(stuck)))
    jobs.sort(key=lambda j: j.pids[0] if j.pids else 0)
    return jobs


def _worker(proc: ProcInfo) -> Worker:
    env = proc.env
    master = f"{env['MASTER_ADDR']}:{env.get('MASTER_PORT', '?')}" if env.get("MASTER_ADDR") else None
    return Worker(proc.pid, proc.ppid, _int(env.get("RANK")), _int(env.get("LOCAL_RANK")), _int(env.get("WORLD_SIZE")),
                  _int(env.get("GROUP_RANK")), env.get("TORCHELASTIC_RUN_ID"), master, proc.argv, proc.state)


def _rank_order(worker: Worker) -> tuple[int, int]:
    return (worker.rank if worker.rank is not None else 1 << 30, worker.pid)


def _nearest_launcher(procs: dict[int, ProcInfo], launchers: dict[int, Launcher], pid: int) -> Launcher | None:
    current = procs.get(pid)
    for _ in range(8):
        if current is None or current.ppid <= 0:
            return None
        if current.ppid in launchers:
            return launchers[current.ppid]
        current = procs.get(current.ppid)
    return None


def _ancestors(procs: dict[int, ProcInfo], pid: int) -> set[int]:
    seen: set[int] = set()
    current = procs.get(pid)
    while current is not None and current.ppid > 0 and current.ppid not in seen:
        seen.add(current.ppid)
        current = procs.get(current.ppid)
    return seen


def _descendants(procs: dict[int, ProcInfo], pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for proc in procs.values():
        children.setdefault(proc.ppid, []).append(proc.pid)
    found: set[int] = set()
    stack = [pid]
    while stack:
        for child in children.get(stack.pop(), ()):
            if child not in found:
                found.add(child)
                stack.append(child)
    return found


def _self_and_ancestors(procs: dict[int, ProcInfo], exclude: Sequence[int]) -> set[int]:
    me = os.getpid()
    return {me, *exclude} | _ancestors(procs, me)


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value not in (None, "") else None
    except ValueError:
        return None
