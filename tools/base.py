"""Result types shared by every probe, and the one bounded way probes run a subprocess.

A probe is a function ``probe(ctx, <injected interfaces>) -> ProbeResult``. It never raises: failures come
back as a result whose status says what happened (error, timed_out, unavailable) and whose evidence holds the
exact call and the raw upstream message.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal

Severity = Literal["problem", "info", "ok"]


class Status(StrEnum):
    OK = "ok"
    PROBLEM = "problem"
    UNAVAILABLE = "unavailable"
    ERROR = "error"
    TIMED_OUT = "timed_out"


@dataclass(frozen=True)
class Finding:
    code: str
    severity: Severity
    summary: str
    evidence: str
    fix: str = ""
    topics: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "severity": self.severity,
            "summary": self.summary,
            "evidence": self.evidence,
            "fix": self.fix,
            "topics": list(self.topics),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Finding:
        return cls(
            code=str(data["code"]),
            severity=data["severity"],
            summary=str(data["summary"]),
            evidence=str(data.get("evidence", "")),
            fix=str(data.get("fix", "")),
            topics=tuple(str(t) for t in data.get("topics", ())),
        )


@dataclass(frozen=True)
class ProbeResult:
    probe: str
    status: Status
    summary: str
    findings: tuple[Finding, ...] = ()
    evidence: dict[str, Any] = field(default_factory=dict)
    duration_ms: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "probe": self.probe,
            "status": self.status.value,
            "summary": self.summary,
            "findings": [f.to_dict() for f in self.findings],
            "evidence": self.evidence,
            "duration_ms": self.duration_ms,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ProbeResult:
        return cls(
            probe=str(data["probe"]),
            status=Status(data["status"]),
            summary=str(data["summary"]),
            findings=tuple(Finding.from_dict(f) for f in data.get("findings", ())),
            evidence=dict(data.get("evidence", {})),
            duration_ms=float(data.get("duration_ms", 0.0)),
        )


@dataclass(frozen=True)
class ProbeContext:
    python: str | None = None
    ports: tuple[int, ...] = ()
    log_paths: tuple[Path, ...] = ()
    allowed_roots: tuple[Path, ...] = ()
    output_dirs: tuple[Path, ...] = ()
    environ: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    timeout_s: float = 10.0


class Clock:
    """Measures a probe's duration and the time left before its deadline."""

    def __init__(self, timeout_s: float) -> None:
        self.start = time.monotonic()
        self.deadline = self.start + timeout_s

    def left(self, floor: float = 0.05) -> float:
        return max(floor, self.deadline - time.monotonic())

    def ms(self) -> float:
        return round((time.monotonic() - self.start) * 1000, 1)


def finish(
    probe: str,
    clock: Clock,
    findings: Iterable[Finding],
    evidence: dict[str, Any],
    ok_summary: str,
) -> ProbeResult:
    """Builds the result: problem when any finding is a problem, and the summary names the problems."""
    found = tuple(findings)
    problems = [f for f in found if f.severity == "problem"]
    if problems:
        summary = "; ".join(f.summary for f in problems[:3])
        if len(problems) > 3:
            summary += f" (+{len(problems) - 3} more)"
        return ProbeResult(probe, Status.PROBLEM, summary, found, evidence, clock.ms())
    return ProbeResult(probe, Status.OK, ok_summary, found, evidence, clock.ms())


def failed(probe: str, clock: Clock, status: Status, summary: str, **evidence: Any) -> ProbeResult:
    return ProbeResult(probe, status, summary, (), dict(evidence), clock.ms())


@dataclass(frozen=True)
class CommandResult:
    args: tuple[str, ...]
    returncode: int | None
    stdout: str
    stderr: str
    timed_out: bool = False
    error: str = ""  # why it could not start (OSError text); returncode is None then

    @property
    def call(self) -> str:
        return " ".join(self.args)


RunCommand = Callable[[Sequence[str], float, Mapping[str, str] | None], CommandResult]


def run_command(args: Sequence[str], timeout_s: float, env: Mapping[str, str] | None = None) -> CommandResult:
    """Runs ``args`` in its own process group; on timeout the whole group is killed, so a hung child's
    children die too and the pipes close."""
    argv = tuple(str(a) for a in args)
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=dict(env) if env is not None else None,
            start_new_session=True,
        )
    except OSError as exc:
        return CommandResult(argv, None, "", "", error=f"{type(exc).__name__}: {exc}")
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        try:
            out, err = proc.communicate(timeout=2)
        except subprocess.TimeoutExpired:  # a grandchild left the group and still holds the pipes
            out, err = b"", b""
        return CommandResult(argv, None, _text(out), _text(err), timed_out=True)
    return CommandResult(argv, proc.returncode, _text(out), _text(err))


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()


def _text(data: bytes | None) -> str:
    return (data or b"").decode("utf-8", errors="replace")


DATA_DIR = Path(__file__).resolve().parent / "data"


def data_path(name: str) -> Path:
    return DATA_DIR / name
