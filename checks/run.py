"""Start the check's job on this node, watch every rank's progress, and stop every process it started.

torchrun is started in a session of its own (``start_new_session``), and torchrun starts each worker in a
session of its own too, so one process group does not hold them all. Every process of the check carries the
check's run id in its environment (``TRAINDOC_CHECK_RUN``): cleanup signals torchrun's group, then the group of
each process that carries the id (or the process alone where its group's leader does not), first SIGTERM, then
SIGKILL after a grace period. It runs on success, failure, timeout and Ctrl-C (KeyboardInterrupt, and SIGTERM
to traindoc, which is turned into one while the check runs). No other process is ever signalled: a pid is
signalled only while its environment shows this run's id.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from checks import collectives
from checks.meaning import Observed, outcome
from checks.report import CheckResult, op_rows, rank_states
from checks.variables import Setting

RUN_VARIABLE = "TRAINDOC_CHECK_RUN"
WORKER = Path(collectives.__file__).resolve()
POLL_S = 0.1
GRACE_S = 5.0  # after SIGTERM, before SIGKILL
# The launcher's own variables that would change what it starts (torchrun reads PET_* as its flags' defaults).
DROPPED = ("PET_", "TORCHELASTIC_")
DROPPED_NAMES = ("MASTER_ADDR", "MASTER_PORT", "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK",
                 "ROLE_RANK", "NODE_RANK", "NNODES")
TAIL_LINES = 60


@dataclass
class Plan:
    backend: str  # "nccl" or "gloo"
    nproc: int
    sizes: list[int]
    timeout_s: float
    iters: int = 5
    settings: dict[str, Setting] = field(default_factory=dict)
    python: str = sys.executable
    startup_s: float = 90.0  # importing torch, CUDA and the rendezvous, before the first operation
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    port: int = 0  # 0: a free port on 127.0.0.1, chosen when the plan is made

    @property
    def ops(self) -> list[tuple[str, int]]:
        return [(op, 0) if op == "barrier" else (op, s) for op in collectives.OPS for s in
                ([0] if op == "barrier" else self.sizes)]

    def command(self, progress_dir: Path | str) -> list[str]:
        return [self.python, "-m", "torch.distributed.run", "--nnodes=1", f"--nproc-per-node={self.nproc}",
                "--master-addr=127.0.0.1", f"--master-port={self.port}", "--max-restarts=0", str(WORKER),
                *worker_args(self, progress_dir)]

    def environment(self, base: Mapping[str, str]) -> dict[str, str]:
        env = {k: v for k, v in base.items() if not k.startswith(DROPPED) and k not in DROPPED_NAMES}
        env.update({name: s.value for name, s in self.settings.items()})
        env.update({RUN_VARIABLE: self.run_id, collectives.PARENT_VARIABLE: str(os.getpid()),
                    "OMP_NUM_THREADS": env.get("OMP_NUM_THREADS", "1"), "PYTHONUNBUFFERED": "1"})
        return env


def worker_args(plan: Plan, progress_dir: Path | str) -> list[str]:
    return ["--backend", plan.backend, "--sizes", ",".join(map(str, plan.sizes)), "--timeout", f"{plan.timeout_s:g}",
            "--iters", str(plan.iters), "--progress-dir", str(progress_dir)]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


# -- which processes are the check's -------------------------------------------------------------------------------

def _environ_of(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            return handle.read()
    except OSError:
        return b""


def _alive(pid: int) -> bool:
    """Running (a zombie has ended: only its parent's wait is left)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2:][:1] != b"Z"


def tagged(run_id: str) -> list[int]:
    """The live processes whose environment carries this run's id: the launcher, every worker, their children."""
    marker = f"{RUN_VARIABLE}={run_id}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid() and marker in _environ_of(int(entry)).split(b"\0") \
                and _alive(int(entry)):
            found.append(int(entry))
    return sorted(found)


def _signal_all(run_id: str, launcher: subprocess.Popen[Any] | None, sig: int) -> None:
    """``sig`` to the launcher's group and to each group (or process) of this run's id; nothing else."""
    mine = set(tagged(run_id))
    groups: set[int] = set()
    if launcher is not None and launcher.poll() is None:
        groups.add(launcher.pid)  # its own session: pgid == pid
    for pid in mine:
        try:
            group = os.getpgid(pid)
        except OSError:
            continue
        if group in mine or (launcher is not None and group == launcher.pid):
            groups.add(group)
        else:
            _send(os.kill, pid, sig)
    for group in groups:
        _send(os.killpg, group, sig)


def _send(call: Callable[[int, int], None], target: int, sig: int) -> None:
    try:
        call(target, sig)
    except (ProcessLookupError, PermissionError):
        pass


def cleanup(run_id: str, launcher: subprocess.Popen[Any] | None, grace_s: float = GRACE_S) -> list[int]:
    """Stop every process of this run: SIGTERM, then SIGKILL what is left after ``grace_s``. Returns the pids still
    running after that (none, unless a process ignores SIGKILL in the kernel)."""
    _signal_all(run_id, launcher, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and (tagged(run_id) or (launcher is not None and launcher.poll() is None)):
        time.sleep(POLL_S)
    if tagged(run_id) or (launcher is not None and launcher.poll() is None):
        _signal_all(run_id, launcher, signal.SIGKILL)
    if launcher is not None:
        try:
            launcher.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            pass
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and tagged(run_id):
        time.sleep(POLL_S)
    return tagged(run_id)


@contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """While the check runs, SIGTERM to traindoc stops it the way Ctrl-C does (and so cleans up)."""
    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, interrupt)
    except ValueError:  # not the main thread: nothing to install
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextmanager
def _no_interrupt() -> Iterator[None]:
    try:
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


# -- the run --------------------------------------------------------------------------------------------------------

_EXIT = re.compile(r"rank\s*:\s*(\d+)[^\n]*\n\s*exitcode\s*:\s*(-?\d+)")


def _exit_codes(text: str) -> dict[int, int]:
    """Each rank's exit code from torchrun's failure summary (``rank : 1 (local_rank: 1)`` / ``exitcode : -9``)."""
    return {int(rank): int(code) for rank, code in _EXIT.findall(text)}


@dataclass
class Started:
    """What the caller is told just before the job starts (and may print): the command and where it writes."""

    command: list[str]
    progress_dir: Path
    port: int
    run_id: str


def run_check(plan: Plan, *, on_start: Callable[[Started], None] = lambda s: None, interfaces: list[str] | None = None,
              consumer_gpus: bool = False, environ: Mapping[str, str] | None = None,
              on_progress: Callable[[Path], None] = lambda p: None) -> CheckResult:
    """Run the check's job, watch it, stop everything it started, and read what happened."""
    from checks.variables import missing_interfaces
    from tools.env_vars import list_interfaces

    nics = list_interfaces() if interfaces is None else interfaces
    if not plan.port:
        plan.port = free_port()
    with tempfile.TemporaryDirectory(prefix="traindoc-check-") as folder:
        progress = Path(folder) / "progress"
        progress.mkdir()
        command = plan.command(progress)
        output = Path(folder) / "launcher.log"
        on_start(Started(command, progress, plan.port, plan.run_id))
        launcher: subprocess.Popen[Any] | None = None
        stopped = "exited"
        left: list[int] = []
        gone: dict[int, float] = {}
        try:
            with _sigterm_as_interrupt(), output.open("wb") as sink:
                launcher = subprocess.Popen(command, env=plan.environment(os.environ if environ is None else environ),
                                            stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                            start_new_session=True, cwd=folder)
                stopped = _watch(plan, launcher, progress, gone, on_progress)
        finally:  # also on KeyboardInterrupt (Ctrl-C, or SIGTERM while the check runs), raised on to the caller
            with _no_interrupt():  # a second Ctrl-C does not cut the cleanup short
                left = cleanup(plan.run_id, launcher)
        tail = output.read_text(encoding="utf-8", errors="replace").splitlines()
        ranks = rank_states(progress, plan.nproc)
        for rank, code in _exit_codes("\n".join(tail)).items():
            if rank in ranks:
                ranks[rank].exit_code = code
        for rank, when in gone.items():
            ranks[rank].gone_at = when
        if stopped == "exited" and launcher is not None and launcher.returncode == 0 and \
                all(r.finished for r in ranks.values()):
            stopped = "finished"  # it ended between two looks
        rows = op_rows(progress, plan.ops, plan.nproc)
        observed = Observed(plan.backend, plan.nproc, ranks, rows, plan.ops, stopped, plan.timeout_s, tail[-TAIL_LINES:],
                            missing_interfaces(plan.settings, nics), nics, consumer_gpus)
        return CheckResult(plan.run_id, plan.backend, plan.nproc, command, launcher.pid if launcher else None, ranks,
                           rows, outcome(observed), stopped, launcher.returncode if launcher else None,
                           tail[-TAIL_LINES:], {n: (s.value, s.source) for n, s in plan.settings.items()}, left)


def _watch(plan: Plan, launcher: subprocess.Popen[Any], progress: Path, gone: dict[int, float],
           on_progress: Callable[[Path], None]) -> str:
    """Until the launcher exits, every rank finishes, or nothing moves for too long: how it stopped."""
    last_change = time.monotonic()
    last_seen: tuple[Any, ...] = ()
    joined_all = False
    while True:
        if launcher.poll() is not None:
            return "exited"
        states = rank_states(progress, plan.nproc)
        seen = tuple((len(s.done), s.joined, s.position, s.finished, s.error) for s in states.values())
        if seen != last_seen:
            last_seen, last_change = seen, time.monotonic()
            on_progress(progress)
        for state in states.values():
            if state.pid is not None and state.rank not in gone and not _alive(state.pid):
                gone[state.rank] = time.monotonic()
        joined_all = joined_all or all(s.joined for s in states.values())
        if all(s.finished for s in states.values()):
            try:
                launcher.wait(timeout=plan.timeout_s)
            except subprocess.TimeoutExpired:
                return "deadline"
            return "finished"
        # An operation may take its timeout, and the ranks' own timeout then needs a moment to say so.
        limit = plan.timeout_s + GRACE_S if joined_all else plan.startup_s + plan.timeout_s
        if time.monotonic() - last_change > limit:
            return "deadline"
        time.sleep(POLL_S)
