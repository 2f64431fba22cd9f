"""Error signatures in training logs (tracebacks, NCCL WARN/timeouts, CUDA errors, OOM), grouped with counts,
line numbers and ranks, in bounded memory.

Two engines give the same answer: GNU grep (-F, the anchors as fixed strings) prefilters plain files when it is
on PATH, because a Python pass per anchor costs ~0.6 s/GB each; otherwise (and for .gz) Python reads 1 MiB
chunks and looks for the anchors with ``bytes.find``. Only candidate lines reach the signature regexes.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import IO, Any

from tools.base import Clock, Finding, ProbeContext, ProbeResult, Status, data_path, failed, finish
from tools.redact import mask_value

NAME = "log_grep"
CHUNK = 1 << 20
MAX_LINE = 64 * 1024
MAX_GROUPS = 200
MAX_FINDINGS = 20
MAX_RANKS = 64
_RANK_PREFIX = re.compile(rb"^\s*\[(?:rank|RANK|default)\s*(\d+)\]\s*:?\s*|^\s*rank(\d+):\s*")
_DIGITS = re.compile(r"0x[0-9a-fA-F]+|\d+")


class LogError(Exception):
    """A log that cannot be scanned; ``code`` is LOG_PATH_REFUSED, LOG_BINARY or LOG_UNREADABLE."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Signature:
    name: str
    code: str
    severity: str
    regex: re.Pattern[str]
    anchors: tuple[str, ...]
    summary: str
    topics: tuple[str, ...]


@dataclass
class Group:
    signature: Signature
    example: str
    count: int = 0
    first_line: int = 0
    last_line: int = 0
    ranks: set[int] = field(default_factory=set)

    def to_dict(self) -> dict[str, Any]:
        return {"signature": self.signature.name, "code": self.signature.code, "count": self.count,
                "first_line": self.first_line, "last_line": self.last_line, "ranks": sorted(self.ranks),
                "example": self.example}


@dataclass
class LogScan:
    path: str
    engine: str
    groups: list[Group]
    candidate_lines: int = 0
    lines: int | None = None  # total lines, when the engine counts them
    dropped_groups: int = 0  # matches not kept because MAX_GROUPS distinct groups already existed
    timed_out: bool = False


@cache
def load_signatures() -> tuple[Signature, ...]:
    with open(data_path("log_signatures.json"), encoding="utf-8") as f:
        rows = json.load(f)["signatures"]
    return tuple(Signature(r["name"], r["code"], r["severity"], re.compile(r["regex"]), tuple(r["anchors"]),
                           r["summary"], tuple(r["topics"])) for r in rows)


def prefilter_anchors(signatures: tuple[Signature, ...]) -> tuple[bytes, ...]:
    """Union of anchors without those that contain another (a line with "CUDA error" also has "rror")."""
    anchors = {a for s in signatures for a in s.anchors}
    return tuple(sorted(a.encode() for a in anchors if not any(o != a and o in a for o in anchors)))


def check_path(path: Path, ctx: ProbeContext) -> Path:
    """The resolved path when listed in ctx.log_paths or under ctx.allowed_roots; LogError otherwise."""
    resolved = Path(path).resolve()
    listed = {Path(p).resolve() for p in ctx.log_paths}
    roots = [Path(r).resolve() for r in ctx.allowed_roots]
    if resolved in listed or any(resolved.is_relative_to(root) for root in roots):
        return resolved
    return _refuse(path, resolved)


def _refuse(path: Path, resolved: Path) -> Path:
    raise LogError("LOG_PATH_REFUSED", f"refusing to read {path} (resolves to {resolved}): not a log file given "
                                       "to traindoc and not under an allowed root")


def grep_log(
    path: str | Path,
    signatures: tuple[Signature, ...] | None = None,
    engine: str = "auto",
    timeout_s: float = 60.0,
    max_groups: int = MAX_GROUPS,
) -> LogScan:
    """Scans one log (plain or .gz). engine: "auto", "grep" or "python". Raises LogError."""
    sigs = signatures if signatures is not None else load_signatures()
    path = Path(path)
    is_gz = _is_gzip(path)
    _check_text(path, is_gz)
    grep = shutil.which("grep")
    use_grep = engine == "grep" or (engine == "auto" and grep is not None and not is_gz)
    scan = LogScan(str(path), "grep" if use_grep else "python", [])
    collector = _Collector(sigs, scan, max_groups)
    deadline = time.monotonic() + timeout_s
    lines = _grep_lines(path, sigs, grep or "grep", deadline, scan) if use_grep else _python_lines(
        path, is_gz, sigs, deadline, scan)
    for number, line in lines:
        collector.add(number, line)
    scan.groups = list(collector.groups.values())
    return scan


def available(ctx: ProbeContext) -> tuple[bool, str]:
    if not ctx.log_paths:
        return False, "no log files given"
    return True, ""


def probe(ctx: ProbeContext, paths: tuple[Path, ...] | None = None) -> ProbeResult:
    """Scan the given training log files (plain or .gz) for error signatures: traceback last lines, NCCL WARN/timeouts, CUDA errors, OOM, with counts, line numbers and ranks."""  # noqa: E501 - the LLM-facing description is one line
    clock = Clock(ctx.timeout_s)
    targets = paths if paths is not None else ctx.log_paths
    if not targets:
        return failed(NAME, clock, Status.UNAVAILABLE, "no log files given")
    scans, findings, errors = [], [], []
    for path in targets:
        try:
            scan = grep_log(check_path(path, ctx), timeout_s=clock.left())
        except LogError as exc:
            errors.append({"path": str(path), "code": exc.code, "message": str(exc)})
            continue
        except OSError as exc:
            errors.append({"path": str(path), "code": "LOG_UNREADABLE", "message": f"open({str(path)!r}): {exc}"})
            continue
        scans.append(scan)
        findings.extend(_findings(scan))
    evidence = {"files": [_scan_dict(s) for s in scans], "errors": errors}
    if errors and not scans:
        return ProbeResult(NAME, Status.ERROR, "; ".join(e["message"] for e in errors), (), evidence, clock.ms())
    if any(s.timed_out for s in scans):
        return ProbeResult(NAME, Status.TIMED_OUT, f"scan stopped after {ctx.timeout_s:.0f}s; partial results",
                           tuple(findings), evidence, clock.ms())
    findings.sort(key=lambda f: f.severity != "problem")
    total = sum(g.count for s in scans for g in s.groups)
    return finish(NAME, clock, findings[:MAX_FINDINGS], evidence,
                  f"no error signatures in {len(scans)} file(s)" if not total else f"{total} error line(s)")


def _findings(scan: LogScan) -> list[Finding]:
    ordered = sorted(scan.groups, key=lambda g: (g.signature.severity != "problem", g.first_line))
    return [Finding(
        g.signature.code, "problem" if g.signature.severity == "problem" else "info",
        f"{g.signature.summary}: {g.count}x in {Path(scan.path).name}"
        + (f" (ranks {_ranks(g.ranks)})" if g.ranks else ""),
        f"{Path(scan.path).name}:{g.first_line}" + (f"-{g.last_line}" if g.last_line != g.first_line else "")
        + f": {g.example}", "", g.signature.topics) for g in ordered[:MAX_FINDINGS]]


def _scan_dict(scan: LogScan) -> dict[str, Any]:
    return {"path": scan.path, "engine": scan.engine, "lines": scan.lines, "candidate_lines": scan.candidate_lines,
            "dropped_groups": scan.dropped_groups, "timed_out": scan.timed_out,
            "groups": [g.to_dict() for g in sorted(scan.groups, key=lambda g: -g.count)[:50]]}


def _ranks(ranks: set[int]) -> str:
    shown = sorted(ranks)
    return ",".join(map(str, shown[:16])) + ("..." if len(shown) > 16 else "")


class _Collector:
    def __init__(self, signatures: tuple[Signature, ...], scan: LogScan, max_groups: int) -> None:
        self.signatures, self.scan, self.max_groups = signatures, scan, max_groups
        self.groups: dict[tuple[str, str], Group] = {}

    def add(self, number: int, raw: bytes) -> None:
        self.scan.candidate_lines += 1
        rank = None
        prefix = _RANK_PREFIX.match(raw)
        if prefix:
            rank = int(prefix.group(1) or prefix.group(2))
            raw = raw[prefix.end():]
        line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
        for sig in self.signatures:
            match = sig.regex.search(line)
            if match is None:
                continue
            message = line[match.start():match.start() + 300].strip()
            key = (sig.name, _DIGITS.sub("N", message[:200]))
            group = self.groups.get(key)
            if group is None:
                if len(self.groups) >= self.max_groups:
                    self.scan.dropped_groups += 1
                    return
                group = self.groups[key] = Group(sig, mask_value(line.strip()[:300]), first_line=number)
            group.count += 1
            group.last_line = number
            if rank is not None and len(group.ranks) < MAX_RANKS:
                group.ranks.add(rank)
            return


def _is_gzip(path: Path) -> bool:
    with open(path, "rb") as f:
        return f.read(2) == b"\x1f\x8b"


def _open(path: Path, is_gz: bool) -> IO[bytes]:
    return gzip.open(path, "rb") if is_gz else open(path, "rb")  # type: ignore[return-value]


def _check_text(path: Path, is_gz: bool) -> None:
    try:
        with _open(path, is_gz) as f:
            head = f.read(8192)
    except (OSError, EOFError) as exc:  # gzip.BadGzipFile is an OSError
        raise LogError("LOG_UNREADABLE", f"reading {path}: {exc}") from exc
    if b"\0" in head:
        raise LogError("LOG_BINARY", f"{path} is a binary file (NUL bytes in the first 8 KiB); not scanned")


def _python_lines(
    path: Path, is_gz: bool, sigs: tuple[Signature, ...], deadline: float, scan: LogScan
) -> Iterator[tuple[int, bytes]]:
    anchors = prefilter_anchors(sigs)
    line_no = 0  # lines before the current block
    carry, skipping = b"", False
    with _open(path, is_gz) as f:
        while True:
            data = f.read(CHUNK)
            if not data:
                break
            if time.monotonic() > deadline:
                scan.timed_out = True
                break
            if skipping:  # rest of an over-long line whose head was already scanned
                newline = data.find(b"\n")
                if newline < 0:
                    continue
                data, skipping = data[newline + 1 :], False
            block = carry + data
            end = block.rfind(b"\n") + 1
            carry = block[end:]
            yield from _candidates(block, end, anchors, line_no)
            line_no += block.count(b"\n", 0, end)
            if len(carry) > MAX_LINE:
                yield from _candidates(carry[:MAX_LINE] + b"\n", MAX_LINE + 1, anchors, line_no)
                carry, skipping, line_no = b"", True, line_no + 1
        if carry and not scan.timed_out:
            yield from _candidates(carry + b"\n", len(carry) + 1, anchors, line_no)
            line_no += 1
    scan.lines = line_no


def _candidates(block: bytes, end: int, anchors: tuple[bytes, ...], base: int) -> Iterator[tuple[int, bytes]]:
    """Lines of block[:end] containing an anchor, with 1-based line numbers (``base`` lines precede block)."""
    starts = set()
    for anchor in anchors:
        pos = block.find(anchor, 0, end)
        while pos >= 0:
            start = block.rfind(b"\n", 0, pos) + 1
            starts.add(start)
            stop = block.find(b"\n", pos, end)
            pos = block.find(anchor, stop, end)
    counted, number = 0, base + 1
    for start in sorted(starts):
        number += block.count(b"\n", counted, start)
        counted = start
        stop = block.find(b"\n", start, end)
        yield number, block[start:min(stop, start + MAX_LINE)]


def _grep_lines(
    path: Path, sigs: tuple[Signature, ...], grep: str, deadline: float, scan: LogScan
) -> Iterator[tuple[int, bytes]]:
    args = [grep, "-a", "-n", "-F"]
    for anchor in prefilter_anchors(sigs):
        args += ["-e", anchor.decode()]
    env = {"LC_ALL": "C", "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    proc = subprocess.Popen([*args, "--", os.fspath(path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, env=env, start_new_session=True)
    assert proc.stdout is not None and proc.stderr is not None
    try:
        while True:
            line = proc.stdout.readline(MAX_LINE + 32)
            if not line:
                break
            if not line.endswith(b"\n"):
                rest = line
                while rest and not rest.endswith(b"\n"):
                    rest = proc.stdout.readline(MAX_LINE)
            number, _, text = line.partition(b":")
            yield int(number), text[:MAX_LINE].rstrip(b"\n")
            if scan.candidate_lines % 1024 == 0 and time.monotonic() > deadline:
                scan.timed_out = True
                break
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
        proc.stdout.close()
        stderr = proc.stderr.read().decode("utf-8", "replace")
        proc.stderr.close()
        code = proc.wait()
    if code not in (0, 1, -9):
        raise LogError("LOG_UNREADABLE", f"{' '.join(args[:4])} ... {path}: exit {code}: {stderr.strip()}")
