"""A real hung torchrun job for the hang tests: 3 ranks on CPU/gloo on 127.0.0.1, always killed afterwards.

``HungJob.start()`` launches tests/jobs/data/hang/train.py under torchrun in its own session and waits until
every rank reached the point where it hangs; ``stop()`` kills the whole session (SIGKILL to the process group).
The script also exits by itself after HANG_LIFETIME_S, so a test run that dies leaves nothing for long.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tests" / "jobs" / "data" / "hang" / "train.py"
BIN = Path(sys.executable).parent
NPROC = 3


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def line_of(text: str, path: Path = SCRIPT) -> int:
    """The line number of the first line of ``path`` that contains ``text``."""
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if text in line:
            return number
    raise AssertionError(f"{text!r} not in {path}")


@dataclass
class HungJob:
    workdir: Path
    mode: str = "straggler"
    debug_port: int | None = None
    nproc: int = NPROC
    nnodes: int = 1
    lifetime_s: float = 240.0
    extra_env: Mapping[str, str] = field(default_factory=dict)
    proc: subprocess.Popen[bytes] | None = None
    master_port: int = 0

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    @property
    def log(self) -> Path:
        return self.workdir / "torchrun.log"

    def start(self, wait_s: float = 120.0) -> HungJob:
        ready = self.workdir / "ready"
        ready.mkdir(parents=True, exist_ok=True)
        self.master_port = free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith(("TRAINDOC_", "RANK", "LOCAL_RANK", "WORLD_SIZE"))}
        env.update(HANG_MODE=self.mode, HANG_READY_DIR=str(ready), HANG_LIFETIME_S=str(self.lifetime_s),
                   PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}", OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
        if self.debug_port:
            env["HANG_DEBUG_PORT"] = str(self.debug_port)
        env.update(self.extra_env)
        cmd = [str(BIN / "torchrun"), f"--nnodes={self.nnodes}", f"--nproc-per-node={self.nproc}", "--node-rank=0",
               "--master-addr=127.0.0.1", f"--master-port={self.master_port}", str(SCRIPT)]
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         env=env, cwd=self.workdir, start_new_session=True)
        if self.nnodes > 1:  # the launcher waits for the other node: no rank ever starts
            self._wait(lambda: _launcher_listening(self.master_port), wait_s, "torchrun's rendezvous store")
            return self
        self._wait(lambda: len(self.worker_pids()) >= self.nproc, wait_s, f"{self.nproc} ranks to hang")
        time.sleep(0.5)  # from the ready mark into the collective itself
        return self

    def _wait(self, done: object, wait_s: float, what: str) -> None:
        deadline = time.monotonic() + wait_s
        while not done():  # type: ignore[operator]
            if self.proc is not None and self.proc.poll() is not None:
                raise AssertionError(f"the job exited ({self.proc.returncode}) before {what}:\n{self.tail()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}:\n{self.tail()}")
            time.sleep(0.1)

    def worker_pids(self) -> dict[int, int]:
        """rank -> pid, from the ready marks the ranks wrote."""
        ready = self.workdir / "ready"
        if not ready.is_dir():
            return {}
        return {int(p.name.removeprefix("rank")): int(p.read_text()) for p in ready.iterdir() if p.read_text().strip()}

    def alive(self) -> bool:
        if self.proc is None or self.proc.poll() is not None:
            return False
        return all(_running(pid) for pid in self.worker_pids().values())

    def tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self) -> None:
        """SIGKILL to the launcher's process group and to every rank's: torchrun starts each rank in a session
        of its own, so killing the launcher alone would orphan them (and the debug server's frontend)."""
        if self.proc is None:
            return
        ranks = set(self.worker_pids().values()) | _descendants(self.proc.pid)
        groups = {self.proc.pid}
        for pid in ranks:
            try:
                groups.add(os.getpgid(pid))
            except ProcessLookupError:
                pass
        groups.discard(os.getpgid(0))  # never our own group
        for group in groups:
            try:
                os.killpg(group, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        for pid in ranks:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass


def _descendants(root: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found: set[int] = set()
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _launcher_listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


# -- a /proc tree built from a table, for the process-selection rules -------------------------------------------

@dataclass(frozen=True)
class FakeProc:
    pid: int
    ppid: int
    argv: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    exe: str = "/usr/bin/python3.11"
    state: str = "S"


def fake_proc_root(base: Path, procs: list[FakeProc]) -> Path:
    """A directory shaped like /proc (cmdline, stat, environ, exe) holding only ``procs``."""
    root = base / "proc"
    root.mkdir(parents=True, exist_ok=True)
    for proc in procs:
        folder = root / str(proc.pid)
        folder.mkdir()
        (folder / "cmdline").write_bytes(b"\0".join(a.encode() for a in proc.argv) + b"\0")
        name = os.path.basename(proc.argv[0])[:15] if proc.argv else "?"
        (folder / "stat").write_text(f"{proc.pid} ({name}) {proc.state} {proc.ppid} {proc.pid} {proc.pid} 0 -1 0\n")
        (folder / "environ").write_bytes(b"".join(f"{k}={v}".encode() + b"\0" for k, v in {"PATH": "/usr/bin", **proc.env}.items()))
        os.symlink(proc.exe, folder / "exe")
    return root
