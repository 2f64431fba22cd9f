"""Read a job's logs as one stream of ``LogLine``s: files, folders, .gz, standard input.

A folder is walked the way torchrun's ``--log-dir`` lays it out (``<run>/attempt_N/<local_rank>/
stdout.log|stderr.log|error.json``, the latest attempt only) or as per-rank files (``rank3.log``,
``worker-3.out``). A text log with stray bytes (NULs from a crashed writer, colours, ``\\r`` progress
bars) is read; only a file that is mostly binary is refused. Big plain files go through GNU grep
first, which keeps only the lines the triage can use, in bounded memory.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import re
import shutil
import subprocess
import zlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import IO, Any

from common.errors import InputError
from jobs.lines import LogLine, parse_line
from jobs.signatures import prefilter_regex

SNIFF_BYTES = 8192
BINARY_SHARE = 0.3  # a file is refused only when this share of its first bytes is not text
PREFILTER_BYTES = 32 * 1024 * 1024  # larger plain files are prefiltered with GNU grep
EDGE_BYTES = 128 * 1024  # of a prefiltered file, its head and tail are read whole (launch lines, the summary)
LOG_SUFFIXES = (".log", ".txt", ".out", ".err", ".gz", ".json")
RANK_IN_NAME = re.compile(r"(?:rank|worker|proc|process|gpu)[-_.]?(\d+)|^(\d+)$", re.IGNORECASE)
ATTEMPT = re.compile(r"attempt_(\d+)$")


@dataclass(frozen=True)
class LogSource:
    """One file of the job and what its place says about it."""

    path: Path | None  # None: standard input
    rank: int | None = None
    local_rank: int | None = None

    @property
    def name(self) -> str:
        return str(self.path) if self.path is not None else "standard input"


def _non_text_share(sample: bytes) -> float:
    """The share of bytes that are not text. NULs do not count: a crashed writer leaves runs of them in
    a text log (a sparse hole), while a binary file has other tell-tale bytes too; a file of nothing
    but NULs is binary."""
    if not sample:
        return 0.0
    rest = sample.replace(b"\x00", b"")
    if not rest or len(rest) < len(sample) // 10:
        return 1.0
    sample = rest
    odd = sum(1 for b in sample if b < 9 or 13 < b < 27 or 27 < b < 32)
    try:
        sample.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(sample) - 4:  # a cut multi-byte character at the end is fine
            odd += len(sample) // 4
    return odd / len(sample)


def is_mostly_binary(sample: bytes) -> bool:
    return _non_text_share(sample) > BINARY_SHARE


def _rank_from_path(path: Path, root: Path) -> tuple[int | None, int | None]:
    """(global rank, local rank) that the file's name or its folders (below ``root``, at most three
    levels: torchrun's attempt_N/<local_rank>/stderr.log) say."""
    parts = (path.relative_to(root).parts if path != root else (path.name,))[-3:]
    for index, part in enumerate(reversed(parts)):
        stem = part.split(".")[0]
        match = RANK_IN_NAME.search(stem)
        if not match:
            continue
        number = int(match.group(1) or match.group(2))
        parent = parts[-index - 2] if index + 2 <= len(parts) else ""
        if match.group(2) is not None and ATTEMPT.match(parent):
            return None, number  # torchrun: attempt_N/<local_rank>/stdout.log
        if match.group(1) is not None:
            return number, None
    return None, None


def _latest_attempts(files: list[Path]) -> list[Path]:
    """Of torchrun's attempt_N folders under one run folder, keep the last attempt's files."""
    latest: dict[Path, int] = {}
    for file in files:
        for parent in file.parents:
            if match := ATTEMPT.match(parent.name):
                run = parent.parent
                latest[run] = max(latest.get(run, -1), int(match.group(1)))
                break
    kept = []
    for file in files:
        attempt = next(((p.parent, int(m.group(1))) for p in file.parents if (m := ATTEMPT.match(p.name))), None)
        if attempt is None or latest[attempt[0]] == attempt[1]:
            kept.append(file)
    return kept


def job_sources(paths: Sequence[Path]) -> list[LogSource]:
    """Every file to read, with the rank its place implies. A missing path is one clear error."""
    sources: list[LogSource] = []
    for path in paths:
        if str(path) == "-":
            sources.append(LogSource(None))
            continue
        if not path.exists():
            raise InputError(f"log not found: {path}")
        if path.is_dir():
            files = sorted(p for p in path.rglob("*") if p.is_file() and p.name.endswith(LOG_SUFFIXES))
            files = [f for f in _latest_attempts(files) if not f.name.startswith("filtered_")]
            if not files:
                raise InputError(f"no log files (.log, .txt, .out, .err, .gz) in folder {path}")
            for file in files:
                rank, local = _rank_from_path(file, path)
                sources.append(LogSource(file, rank, local))
        else:
            rank, local = _rank_from_path(path.absolute(), Path(path.absolute().anchor))
            sources.append(LogSource(path, rank, local))
    return sources


def _open(source: LogSource, stdin: IO[bytes] | None) -> Any:
    if source.path is None:
        if stdin is None:
            raise InputError("no standard input to read")
        return stdin if hasattr(stdin, "peek") else io.BufferedReader(stdin)  # type: ignore[arg-type]
    try:
        return gzip.open(source.path, "rb") if source.path.suffix == ".gz" else source.path.open("rb")
    except PermissionError as exc:
        raise InputError(f"cannot read log {source.path}: permission denied") from exc
    except OSError as exc:
        raise InputError(f"cannot read log {source.path}: {exc.strerror or exc}") from exc


def _year(source: LogSource) -> int:
    try:
        if source.path is not None:
            return datetime.fromtimestamp(source.path.stat().st_mtime).year
    except OSError:
        pass
    return datetime.now().year


def _text_lines(handle: IO[bytes]) -> Iterator[tuple[int, str]]:
    stream = io.TextIOWrapper(handle, encoding="utf-8", errors="replace", newline="\n")
    number = 0
    while line := stream.readline(65536):  # a 2 GB line without a newline is read in slices
        number += 1
        yield number, line


def _grep_lines(path: Path) -> Iterator[tuple[int, str]] | None:
    """Lines numbered by their byte offset: the whole head and tail, and between them what GNU grep
    keeps (``grep -b``: offsets cost grep nothing, line numbers would). None without grep."""
    grep = shutil.which("grep")
    if grep is None:
        return None
    size = path.stat().st_size
    tail_start = max(EDGE_BYTES, size - EDGE_BYTES)

    def edge(handle: IO[bytes], start: int, length: int, skip_first: bool) -> Iterator[tuple[int, str]]:
        handle.seek(start)
        data = handle.read(length)
        lines = data.split(b"\n")
        offset = start
        for index, raw in enumerate(lines[:-1] if length < size else lines):
            if not (skip_first and index == 0):
                yield offset, raw.decode("utf-8", "replace")
            offset += len(raw) + 1

    def lines() -> Iterator[tuple[int, str]]:
        with path.open("rb") as handle:
            yield from edge(handle, 0, EDGE_BYTES, False)
        command = [grep, "-a", "-b", "-E", prefilter_regex(), str(path)]
        with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              env={**os.environ, "LC_ALL": "C"}) as process:
            assert process.stdout is not None
            for raw in io.TextIOWrapper(process.stdout, encoding="utf-8", errors="replace", newline="\n"):
                offset, _, text = raw.partition(":")
                if offset.isdigit() and EDGE_BYTES <= int(offset) < tail_start:
                    yield int(offset), text
        with path.open("rb") as handle:
            yield from edge(handle, tail_start, size - tail_start, True)

    return lines()


def read_source(source: LogSource, stdin: IO[bytes] | None = None) -> Iterator[LogLine]:
    """The lines of one file, parsed. Refuses a mostly-binary file with one clear error."""
    if source.path is not None and source.path.name == "error.json":
        yield from _error_json(source)
        return
    year = _year(source)
    if (source.path is not None and source.path.suffix != ".gz"
            and source.path.stat().st_size > PREFILTER_BYTES and (numbered := _grep_lines(source.path))):
        with source.path.open("rb") as handle:
            _check_text(source, handle)
        yield from _parse_all(numbered, source, year)
        return
    handle = _open(source, stdin)
    try:
        _check_text(source, handle)
        yield from _parse_all(_text_lines(handle), source, year)
    except (EOFError, gzip.BadGzipFile, zlib.error, OSError) as exc:  # a damaged .gz, an unreadable file
        raise InputError(f"cannot read log {source.name}: {exc or type(exc).__name__}") from exc
    finally:
        if source.path is not None:
            handle.close()


def _check_text(source: LogSource, handle: Any) -> None:
    sample = handle.peek(SNIFF_BYTES)[:SNIFF_BYTES] if hasattr(handle, "peek") else b""
    if is_mostly_binary(sample):
        raise InputError(f"{source.name} is mostly binary, not a text log", hint="pass the training log")


def _parse_all(numbered: Iterable[tuple[int, str]], source: LogSource, year: int) -> Iterator[LogLine]:
    for number, raw in numbered:
        yield parse_line(raw, source.name, number, rank=source.rank, local_rank=source.local_rank, year=year)


def _error_json(source: LogSource) -> Iterator[LogLine]:
    """torchrun's error.json (written by @record): the exception, its stack and when it happened."""
    assert source.path is not None
    try:
        data = json.loads(source.path.read_text(encoding="utf-8", errors="replace")[:4_000_000])
        message = data.get("message", {})
        info = message.get("extraInfo", {}) if isinstance(message, dict) else {}
        text = message.get("message", "") if isinstance(message, dict) else str(message)
        stack = str(info.get("py_callstack", ""))
        when = datetime.fromtimestamp(int(info["timestamp"])) if str(info.get("timestamp", "")).isdigit() else None
    except (OSError, ValueError, AttributeError, TypeError):
        return
    for number, line in enumerate((stack or text).splitlines(), 1):
        parsed = parse_line(line, source.name, number, rank=source.rank, local_rank=source.local_rank)
        yield LogLine(parsed.source, parsed.number, parsed.text, parsed.rank, parsed.local_rank,
                      parsed.host, parsed.pid, when)


def read_job(paths: Sequence[Path], stdin: IO[bytes] | None = None) -> Iterator[LogLine]:
    """Every line of every source, file after file."""
    for source in job_sources(paths):
        yield from read_source(source, stdin)
