"""Python stacks of live processes through py-spy, read-only and bounded in time.

``py-spy dump --nonblocking`` reads the target's memory without stopping it (no ptrace stop, no signal);
``--native`` needs the thread paused, so only a native dump pauses it, for the few milliseconds py-spy
takes. Nothing here writes anything or signals the target; a py-spy that overruns its time is killed
(py-spy itself, never the target). Both of py-spy's output forms are read: the JSON of our own dumps and
the human form (``py-spy dump`` as the debug server runs it, or pasted by a user); faulthandler's
``dump_traceback`` form, which torch's debug server also serves, is read too.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from tools.base import run_command

FrameKind = Literal["user", "library", "stdlib", "native"]
Reason = Literal["ok", "ptrace_denied", "missing", "timeout", "gone", "not_python", "failed"]

# Top-level packages that are never the user's own code, for py-spy's shortened file names
# ("torch/distributed/distributed_c10d.py"), where no site-packages prefix is left to tell.
LIBRARY_PACKAGES = frozenset({
    "torch", "torchvision", "torchaudio", "deepspeed", "transformers", "accelerate", "megatron", "apex", "triton",
    "numpy", "lightning", "pytorch_lightning", "lightning_fabric", "datasets", "vllm", "flash_attn", "safetensors",
    "tqdm", "fairscale", "colossalai", "ray", "xformers", "bitsandbytes", "peft", "trl", "huggingface_hub",
    "tokenizers", "pandas", "scipy", "wandb", "tensorboard", "jax", "tensorflow", "torchtitan", "torchdata", "_pytest",
})
# Packages often installed from a source checkout (pip install -e), so without site-packages in their paths.
_SOURCE_INSTALLS = frozenset({"torch", "deepspeed", "transformers", "accelerate", "megatron", "apex", "triton", "vllm",
                              "torchtitan"})
_STDLIB = frozenset(sys.stdlib_module_names) | {"runpy", "threading", "<frozen runpy>"}

_PTRACE = re.compile(r"Permission Denied|Permission denied|Operation not permitted|os error (?:1|13)\b|EPERM|SYS_PTRACE")
_GONE = re.compile(r"Failed to get process executable name|No such process|os error 3\b|check if it is running", re.I)
_NOT_PYTHON = re.compile(r"Failed to find python version|Failed to get python version|not a python", re.I)


@dataclass(frozen=True)
class Frame:
    function: str
    file: str  # as py-spy or faulthandler gave it: a full path, or py-spy's shortened one
    line: int  # 0 for native frames
    kind: FrameKind

    @property
    def where(self) -> str:
        """``train.py:58``: the file's base name and the line."""
        return f"{os.path.basename(self.file)}:{self.line}" if self.line else os.path.basename(self.file)

    @property
    def short_file(self) -> str:
        """A library file from its package on (``torch/cuda/__init__.py``), any other by its base name."""
        for marker in ("/site-packages/", "/dist-packages/"):
            if marker in self.file:
                return self.file.rsplit(marker, 1)[1]
        return self.file if self.kind == "library" and not self.file.startswith("/") else os.path.basename(self.file)

    def text(self) -> str:
        shown = self.short_file if self.kind in ("library", "native") else os.path.basename(self.file)
        name = self.function if len(self.function) <= 100 else self.function[:97] + "..."  # C++ templates
        return f"{name} ({shown}:{self.line})" if self.line else f"{name} ({shown})"


@dataclass(frozen=True)
class ThreadStack:
    thread_id: str
    name: str
    frames: tuple[Frame, ...]  # innermost first
    active: bool | None = None
    is_main: bool = False


@dataclass(frozen=True)
class Dump:
    pid: int
    threads: tuple[ThreadStack, ...] = ()
    reason: Reason = "ok"
    error: str = ""  # one line for a person, when reason is not ok
    call: str = ""
    duration_ms: float = 0.0

    @property
    def ok(self) -> bool:
        return self.reason == "ok"

    @property
    def main(self) -> ThreadStack | None:
        return main_thread(self.threads)


def classify(path: str, *, native: bool = False) -> FrameKind:
    """user, library (site-packages or a known package), stdlib or native, from a frame's file name."""
    if native:
        return "native"
    norm = path.replace("\\", "/")
    if "/site-packages/" in norm or "/dist-packages/" in norm:
        return "library"
    if norm.startswith("<frozen"):
        return "stdlib"
    if norm.startswith("/"):
        stdlib_dir = f"/lib/python{sys.version_info.major}."
        if re.search(r"/lib/python3\.\d+/", norm) or stdlib_dir in norm:
            return "stdlib"
        if "/bin/" in norm and not norm.endswith(".py"):
            return "library"  # a console script: .venv/bin/torchrun, /usr/local/bin/deepspeed
        parts = norm.split("/")[1:-1]  # an editable or source install: /src/pytorch/torch/distributed/...
        return "library" if any(part in _SOURCE_INSTALLS for part in parts) else "user"
    head = norm.split("/", 1)[0]
    stem = head.removesuffix(".py")
    if "/" in norm and head in LIBRARY_PACKAGES:
        return "library"
    if stem in _STDLIB:
        return "stdlib"
    return "user"


def main_thread(threads: Sequence[ThreadStack]) -> ThreadStack | None:
    for thread in threads:
        if thread.is_main:
            return thread
    for thread in threads:  # faulthandler names no thread: the main one runs the script's <module> or runpy
        if thread.frames and (thread.frames[-1].function == "<module>" or "runpy" in thread.frames[-1].file):
            return thread
    return next((t for t in threads if t.frames), None)


def find_pyspy() -> str | None:
    """py-spy next to this interpreter (the venv's own wheel), else on PATH."""
    beside = Path(sys.executable).parent / "py-spy"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("py-spy")


def dump(pid: int, *, native: bool = False, timeout_s: float = 10.0, binary: str | None = None) -> Dump:
    """One process's Python stacks (``py-spy dump --json``); failures come back as a typed Dump, never raised."""
    exe = binary or find_pyspy()
    if exe is None:
        return Dump(pid, reason="missing", error="py-spy is not installed (pip install py-spy; traindoc's own venv has it)")
    args = [exe, "dump", "--pid", str(pid), "--json"] + (["--native"] if native else ["--nonblocking"])
    started = time.monotonic()
    attempts = 3
    for attempt in range(attempts):  # a non-blocking read can catch a frame mid-change (more often under load)
        if attempt:
            time.sleep(0.05 * attempt)
        result = run_command(args, max(0.5, timeout_s - (time.monotonic() - started)))
        ms = round((time.monotonic() - started) * 1000, 1)
        if result.timed_out:
            return Dump(pid, reason="timeout", error=f"py-spy did not answer within {timeout_s:g} s for pid {pid}",
                        call=result.call, duration_ms=ms)
        if result.returncode is None:
            return Dump(pid, reason="missing", error=f"cannot run py-spy: {result.error}", call=result.call, duration_ms=ms)
        if result.returncode == 0:
            try:
                return Dump(pid, parse_json(result.stdout, pid), call=result.call, duration_ms=ms)
            except ValueError as exc:
                message = f"unreadable py-spy output: {exc}"
        else:
            message = result.stderr or result.stdout
        reason = _reason(message, pid)
        if reason != "failed" or attempt == attempts - 1:
            return Dump(pid, reason=reason, error=_explain(reason, pid, message), call=result.call, duration_ms=ms)
    raise AssertionError("unreachable")


def dump_many(pids: Iterable[int], *, native: bool = False, timeout_s: float = 10.0,
              binary: str | None = None) -> dict[int, Dump]:
    """Every pid at once (one thread each), so N ranks take about one dump's time."""
    wanted = list(dict.fromkeys(pids))
    if not wanted:
        return {}
    with ThreadPoolExecutor(max_workers=min(32, len(wanted)), thread_name_prefix="py-spy") as pool:
        futures = {pid: pool.submit(dump, pid, native=native, timeout_s=timeout_s, binary=binary) for pid in wanted}
        return {pid: future.result() for pid, future in futures.items()}


def parse_json(text: str, pid: int) -> tuple[ThreadStack, ...]:
    data = json.loads(text)
    if not isinstance(data, list):
        raise ValueError("expected a list of threads")
    threads = []
    for item in data:
        frames = tuple(_json_frame(f) for f in item.get("frames") or ())
        tid = item.get("os_thread_id") or item.get("thread_id")
        threads.append(ThreadStack(
            thread_id=str(tid), name=str(item.get("thread_name") or ""), frames=frames,
            active=item.get("active"),
            is_main=item.get("thread_name") == "MainThread" or item.get("os_thread_id") == pid,
        ))
    return tuple(threads)


def _json_frame(item: dict[str, Any]) -> Frame:
    path = str(item.get("filename") or item.get("short_filename") or "?")
    native = bool(item.get("module")) or (not item.get("line") and not path.endswith(".py"))
    return Frame(str(item.get("name") or "?"), path, int(item.get("line") or 0), classify(path, native=native))


_TEXT_THREAD = re.compile(r'^Thread (0x[0-9a-fA-F]+|\d+) \(([^)]*)\)(?::\s*"(.*)")?\s*$')
_TEXT_FRAME = re.compile(r"^\s+(\S.*?) \(([^()]+?)(?::(\d+))?\)\s*$")
_FAULT_THREAD = re.compile(r"^(Current thread|Thread) (0x[0-9a-fA-F]+)(?: \[[^\]]*\])? \(most recent call first\):")
_FAULT_FRAME = re.compile(r'^\s+File "(.+)", line (\d+) in (.+?)\s*$')


def parse_text(text: str) -> dict[int | None, tuple[ThreadStack, ...]]:
    """py-spy's human output (``Process N: ...`` then ``Thread ...`` blocks), by process id; several
    processes may follow each other (``--subprocesses``). Faulthandler's form goes to ``parse_traceback``."""
    if _FAULT_THREAD.search(text.lstrip()) or "(most recent call first)" in text:
        return {None: parse_traceback(text)}
    found: dict[int | None, list[ThreadStack]] = {}
    pid: int | None = None
    current: dict[str, Any] | None = None

    def close() -> None:
        if current is not None:
            found.setdefault(pid, []).append(ThreadStack(
                current["id"], current["name"], tuple(current["frames"]), current["active"],
                is_main=current["name"] == "MainThread" or (pid is not None and current["id"] == str(pid))))

    for line in text.splitlines():
        if line.startswith("Process "):
            close()
            current = None
            head = line.split(":", 1)[0].split()
            pid = int(head[1]) if len(head) > 1 and head[1].isdigit() else None
            continue
        thread = _TEXT_THREAD.match(line)
        if thread:
            close()
            state = thread.group(2)
            current = {"id": thread.group(1), "name": thread.group(3) or "", "frames": [],
                       "active": True if state.startswith("active") else False if state.startswith("idle") else None}
            continue
        frame = _TEXT_FRAME.match(line)
        if frame and current is not None:
            name, path, lineno = frame.group(1), frame.group(2), frame.group(3)
            native = lineno is None
            current["frames"].append(Frame(name, path, int(lineno or 0), classify(path, native=native)))
    close()
    return {key: tuple(value) for key, value in found.items()}


def parse_traceback(text: str) -> tuple[ThreadStack, ...]:
    """faulthandler's ``dump_traceback`` form: ``Thread 0x... (most recent call first):`` then ``File ...`` lines."""
    threads: list[ThreadStack] = []
    tid: str | None = None
    frames: list[Frame] = []
    for line in text.splitlines():
        head = _FAULT_THREAD.match(line.strip())
        if head:
            if tid is not None:
                threads.append(ThreadStack(tid, "", tuple(frames)))
            tid, frames = head.group(2), []
            continue
        frame = _FAULT_FRAME.match(line)
        if frame and tid is not None:
            path = frame.group(1)
            frames.append(Frame(frame.group(3), path, int(frame.group(2)), classify(path)))
    if tid is not None:
        threads.append(ThreadStack(tid, "", tuple(frames)))
    return tuple(threads)


def _reason(message: str, pid: int) -> Reason:
    if _PTRACE.search(message):
        return "ptrace_denied"
    if _GONE.search(message) or not Path(f"/proc/{pid}").exists():
        return "gone"
    if _NOT_PYTHON.search(message):
        return "not_python"
    return "failed"


def _explain(reason: Reason, pid: int, message: str) -> str:
    if reason == "ptrace_denied":
        return ptrace_hint(pid)
    if reason == "gone":
        return f"process {pid} exited before its stack could be read"
    if reason == "not_python":
        return f"process {pid} is not a Python process py-spy can read"
    first = next((line.strip() for line in message.splitlines() if line.strip()), "no output")
    return f"py-spy failed on pid {pid}: {first.removeprefix('Error: ')[:200]}"


def ptrace_hint(pid: int) -> str:
    """One line: why this machine forbids reading another process's memory, and how to allow it."""
    causes = []
    scope = _read("/proc/sys/kernel/yama/ptrace_scope")
    if scope and scope != "0":
        causes.append(f"kernel.yama.ptrace_scope={scope}")
    if not _has_cap_sys_ptrace() and (Path("/.dockerenv").exists() or Path("/run/.containerenv").exists()
                                      or os.environ.get("KUBERNETES_SERVICE_HOST")):
        causes.append("this container lacks SYS_PTRACE")
    cause = " and ".join(causes) or "a container without SYS_PTRACE, or kernel.yama.ptrace_scope above 0"
    return (f"cannot read process {pid}'s stack: ptrace is not permitted ({cause}); start the container with "
            "--cap-add SYS_PTRACE (Kubernetes: securityContext.capabilities.add: [SYS_PTRACE]), or run "
            "`sudo sysctl kernel.yama.ptrace_scope=0`, or run traindoc as root")


def _has_cap_sys_ptrace() -> bool:
    status = _read("/proc/self/status") or ""
    match = re.search(r"^CapEff:\s*([0-9a-fA-F]+)", status, re.M)
    return bool(match and int(match.group(1), 16) & (1 << 19))


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None
