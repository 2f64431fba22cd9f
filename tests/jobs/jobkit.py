"""Run real torchrun jobs on CPU/gloo, each with one fault, and keep what they print.

Every job gets a free port on 127.0.0.1, a session of its own (so one ``killpg`` reaches torchrun, its
workers and their DataLoader workers), a hard wall-clock limit, and that whole group SIGKILLed afterwards,
whatever happened. torchrun runs with ``--tee 3 --log-dir``, so one run leaves both shapes a user has: the
console (``combined.log``, lines prefixed ``[defaultN]:``) and torchrun's per-rank folder (``logdir/``);
a job with ``tee=False`` leaves the console of a plain ``torchrun train.py`` instead.
The environment is built from scratch: loopback only, one OpenMP thread, caches under the job's folder.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal

ROOT = Path(__file__).resolve().parents[2]
FAULTS = Path(__file__).resolve().parent / "faults"
VENV_PYTHON = ROOT / ".venv" / "bin" / "python"
PYTHON = str(VENV_PYTHON) if VENV_PYTHON.exists() else sys.executable
PG_TIMEOUT_S = 10  # every fault script's process-group timeout

Launch = Literal["static", "held_port", "lone_node_static", "lone_node_c10d"]


@dataclass(frozen=True)
class JobSpec:
    name: str
    script: str  # a file in faults/
    nproc: int = 2
    args: tuple[str, ...] = ()  # to the script; "{folder}" is the job's folder
    launch: Launch = "static"
    launcher: tuple[str, ...] = ()  # more torchrun flags
    tee: bool = True  # False: torchrun's default console (no [defaultN]: prefixes, no per-rank files)
    stage1: tuple[str, ...] = ()  # a script (and args) run first, alone, without torchrun
    tmpfs_kb: int | None = None  # mount a tmpfs this small as $CKPT_DIR
    env: tuple[tuple[str, str | None], ...] = ()  # changes to the job's environment (None: unset)
    limit_s: float = 90  # then the whole group is killed and the log is read as it is
    # Lines the console must show for the run to be the fault as designed (every rank's own error). Under load a
    # launcher can stop a rank before it prints: such a run is started again (RUNS in all), never triaged.
    printed: tuple[str, ...] = ()


@dataclass(frozen=True)
class JobResult:
    name: str
    folder: Path
    returncode: int | None  # torchrun's; None when the job was killed at its limit
    wall_s: float
    skipped: str | None = None  # why the job could not run here
    command: list[str] = field(default_factory=list)

    @property
    def combined(self) -> Path:
        return self.folder / "combined.log"

    @property
    def logdir(self) -> Path:
        return self.folder / "logdir"

    def rank_files(self) -> list[Path]:
        """torchrun's per-rank stdout/stderr files (``<run>/attempt_N/<local_rank>/std*.log``)."""
        return sorted(self.logdir.glob("*/attempt_*/*/std*.log"))


EVERY_RANK = ("--monitor-interval", "5")
RUNS = 3


def each_rank_says(what: str, ranks: Sequence[int]) -> tuple[str, ...]:
    return tuple(rf"\[rank{rank}\]: .*{what}" for rank in ranks)

# Slowest first, so that a pool of three finishes soonest.
JOBS: tuple[JobSpec, ...] = (
    JobSpec("straggler", "straggler.py", nproc=3),
    JobSpec("collective_mismatch", "collective_mismatch.py", nproc=3),
    # Every rank times out at once: the old monitor interval lets each print where it waited before the launcher
    # stops the rest (under load, the first to exit could otherwise silence the others).
    JobSpec("uneven_inputs", "uneven_inputs.py", nproc=3, launcher=EVERY_RANK,
            printed=each_rank_says("Timed out waiting", (0, 1, 2))),
    JobSpec("rendezvous_static", "train.py", launch="lone_node_static"),
    JobSpec("rendezvous_c10d", "train.py", launch="lone_node_c10d"),
    # Killed at the limit: what a user has of a hung rendezvous is torchrun's banner, or its INFO log.
    JobSpec("rendezvous_hang", "train.py", launch="lone_node_c10d", limit_s=12, env=(("OMP_NUM_THREADS", None),)),
    JobSpec("rendezvous_hang_info", "train.py", launch="lone_node_c10d", limit_s=12, env=(("LOGLEVEL", "INFO"),)),
    JobSpec("exception", "exception.py", nproc=3),
    JobSpec("oom", "oom.py", nproc=3),
    # The peers of the crashed rank print their lost connection before the launcher stops them.
    JobSpec("segfault", "segfault.py", nproc=3, launcher=EVERY_RANK,
            printed=(*each_rank_says("RuntimeError", (0, 1)), r"SIGSEGV")),
    JobSpec("nan", "nan.py"),
    JobSpec("exception_plain", "exception.py", nproc=3, tee=False),
    JobSpec("nan_plain", "nan.py", tee=False),
    JobSpec("dataloader_worker", "dataloader_worker.py"),
    JobSpec("disk_full", "disk_full.py", tmpfs_kb=1024),
    JobSpec("disk_full_fileobj", "disk_full.py", args=("--file-object",), tmpfs_kb=1024),
    # Every rank fails alike: torchrun's old 5 s monitor interval (0.1 s now) lets each print its error before
    # the launcher stops the rest, so the log shows every rank's failure, whatever the machine's load.
    JobSpec("checkpoint", "checkpoint.py", args=("--resume", "{folder}/stage1.pt"), stage1=("pretrain.py", "{folder}/stage1.pt"),
            launcher=EVERY_RANK),
    JobSpec("bad_arguments", "bad_arguments.py", args=("--learning-rate", "0.1", "--epochs", "2"), launcher=EVERY_RANK),
    JobSpec("port_in_use", "train.py", launch="held_port"),
    JobSpec("healthy", "train.py"),
)
SPECS: dict[str, JobSpec] = {spec.name: spec for spec in JOBS}

_LIVE: set[int] = set()  # process groups still running, killed at exit whatever happens


def kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def kill_all() -> None:
    for pgid in list(_LIVE):
        kill_group(pgid)


atexit.register(kill_all)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def held_port() -> Iterator[int]:
    """A port some other program listens on (a previous job's leftover, another user's server)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield int(sock.getsockname()[1])


class Skip(Exception):
    """The job cannot run on this machine (the reason is the message)."""


@contextlib.contextmanager
def small_tmpfs(path: Path, size_kb: int) -> Iterator[Path]:
    path.mkdir(parents=True, exist_ok=True)
    mount = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_kb}k", "tmpfs", str(path)],
                           capture_output=True, text=True, check=False, timeout=30)
    if mount.returncode != 0:
        raise Skip(f"cannot mount a {size_kb} KiB tmpfs here: {(mount.stderr or mount.stdout).strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True, check=False, timeout=30)


def job_env(folder: Path, changes: Mapping[str, str | None]) -> dict[str, str]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "LANG": "C.UTF-8",
        "HOME": str(folder / "home"),
        "TMPDIR": str(folder / "tmp"),
        "TORCH_HOME": str(folder / "torch"),
        "XDG_CACHE_HOME": str(folder / "cache"),
        "MASTER_ADDR": "127.0.0.1",
        "GLOO_SOCKET_IFNAME": "lo",
        "OMP_NUM_THREADS": "1",
        "PYTHONUNBUFFERED": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PG_TIMEOUT_S": str(PG_TIMEOUT_S),
    }
    for name in ("HOME", "TMPDIR", "TORCH_HOME", "XDG_CACHE_HOME"):
        Path(env[name]).mkdir(parents=True, exist_ok=True)
    for name, value in changes.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


def launcher_args(spec: JobSpec, port: int) -> list[str]:
    if spec.launch in ("static", "held_port"):
        return ["--nnodes", "1", "--node-rank", "0", "--master-addr", "127.0.0.1", "--master-port", str(port)]
    if spec.launch == "lone_node_static":  # node 0 of 2, the other node never comes
        return ["--nnodes", "2", "--node-rank", "0", "--master-addr", "127.0.0.1", "--master-port", str(port),
                "--rdzv-conf", f"timeout={PG_TIMEOUT_S}"]
    join = [] if spec.limit_s < 60 else ["--rdzv-conf", f"join_timeout={PG_TIMEOUT_S}"]  # a short limit: a hang
    return ["--nnodes", "2", "--node-rank", "0", "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}",
            "--rdzv-id", spec.name, *join]


def _fill(args: Sequence[str], folder: Path) -> list[str]:
    return [a.replace("{folder}", str(folder)) for a in args]


def _run_group(command: list[str], env: Mapping[str, str], cwd: Path, log: Path, limit_s: float) -> int | None:
    """Run in a new session; the whole group is SIGKILLed at the end, even after a clean exit."""
    with log.open("ab") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   env=dict(env), cwd=cwd, start_new_session=True)
        _LIVE.add(process.pid)
        try:
            return process.wait(timeout=limit_s)
        except subprocess.TimeoutExpired:
            return None
        finally:
            kill_group(process.pid)  # its pgid: start_new_session made it the group leader
            process.wait()
            _LIVE.discard(process.pid)


def run_job(spec: JobSpec, out: Path) -> JobResult:
    """Run one fault job into ``out/<name>/`` until its console shows what the fault prints (``RUNS`` at most)."""
    for _ in range(RUNS):
        result = run_once(spec, out)
        if result.skipped or as_designed(spec, result):
            break
    return result


def as_designed(spec: JobSpec, result: JobResult) -> bool:
    text = result.combined.read_text(encoding="utf-8", errors="replace") if result.combined.exists() else ""
    return all(re.search(pattern, text) for pattern in spec.printed)


def run_once(spec: JobSpec, out: Path) -> JobResult:
    """Run one fault job into ``out/<name>/`` (emptied first)."""
    folder = (out / spec.name).resolve()
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    start = time.monotonic()
    with contextlib.ExitStack() as stack:
        extra: dict[str, str | None] = dict(spec.env)
        try:
            if spec.tmpfs_kb:
                extra["CKPT_DIR"] = str(stack.enter_context(small_tmpfs(folder / "ckpt", spec.tmpfs_kb)))
        except Skip as exc:
            return JobResult(spec.name, folder, None, 0.0, skipped=str(exc))
        port = stack.enter_context(held_port()) if spec.launch == "held_port" else free_port()
        env = job_env(folder, extra)
        if spec.stage1:
            stage1 = [PYTHON, str(FAULTS / spec.stage1[0]), *_fill(spec.stage1[1:], folder)]
            code = _run_group(stage1, env, folder, folder / "stage1.log", 60)
            if code != 0:
                raise RuntimeError(f"{spec.name}: stage 1 {stage1} failed ({code}): {(folder / 'stage1.log').read_text()}")
        command = [PYTHON, "-m", "torch.distributed.run", "--nproc-per-node", str(spec.nproc),
                   *launcher_args(spec, port), *spec.launcher, *(["--tee", "3"] if spec.tee else []),
                   "--log-dir", str(folder / "logdir"),
                   str(FAULTS / spec.script), *_fill(spec.args, folder)]
        code = _run_group(command, env, folder, folder / "combined.log", spec.limit_s)
    return JobResult(spec.name, folder, code, round(time.monotonic() - start, 1), command=command)


class JobPool:
    """Every job started at once on a few threads; ``result(name)`` waits for that one only."""

    def __init__(self, out: Path, specs: Sequence[JobSpec] = JOBS, workers: int = 3) -> None:
        self.out = out
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="faultjob")
        self._futures: dict[str, Future[JobResult]] = {s.name: self._executor.submit(run_job, s, out) for s in specs}

    def result(self, name: str) -> JobResult:
        return self._futures[name].result()

    def results(self) -> dict[str, JobResult]:
        return {name: future.result() for name, future in self._futures.items()}

    def close(self) -> None:
        """Cancel what has not started and kill what runs (a job may be between its stage 1 and torchrun)."""
        for future in self._futures.values():
            future.cancel()
        while not all(f.done() for f in self._futures.values()):
            kill_all()
            time.sleep(0.2)
        self._executor.shutdown(wait=True)


def write_summary(results: Mapping[str, JobResult], path: Path) -> None:
    rows = [{**asdict(r), "folder": str(r.folder)} for r in results.values()]
    path.write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
