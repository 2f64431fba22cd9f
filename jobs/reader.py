"""Read a job's logs as one stream of ``LogLine``s: files, folders, .gz, standard input.

A folder is walked the way torchrun's ``--log-dir`` lays it out (``<run>/attempt_N/<local_rank>/
stdout.log|stderr.log|error.json``, the latest attempt only) or as per-rank files (``rank3.log``,
``worker-3.out``). A text log with stray bytes (NULs from a crashed writer, colours, ``\\r`` progress
bars) is read; only a file that is mostly binary is refused, and a folder's unreadable files are left
out with one warning naming them. Plain, .gz and standard input go through one reader, in blocks: a
line longer than ``jobs.streams.LINE_BYTES`` keeps its start (and a progress bar's last state) and the lines after it
are read; what a job's .gz logs expand to is capped (TRAINDOC_MAX_LOG_GB, refused in one line above it);
a log bigger than ``PREFILTER_BYTES`` goes through GNU grep, which keeps only the lines the triage can
use, in bounded memory. A log saved as UTF-16 (PowerShell's ``>``, with or without a byte-order mark) is read as
the text it is (``jobs.encoding``), and a file still being written is read up to the size it had when reading
began: a growing log never keeps the reader going.
"""

from __future__ import annotations

import gzip
import io
import json
import logging
import os
import re
import shutil
import struct
import zlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import IO, Any

from common.errors import InputError
from common.settings import max_log_gb
from jobs.encoding import as_utf8, sniff_encoding
from jobs.lines import LogLine, parse_line
from jobs.streams import chain_all, cut_long_lines, grep_stream, numbered_lines

SNIFF_BYTES = 8192
BINARY_SHARE = 0.3  # a file is refused only when this share of its first bytes is not text
PREFILTER_BYTES = 32 * 1024 * 1024  # larger plain files are prefiltered with GNU grep
BLOCK_BYTES = 256 * 1024  # what is read at a time
NAMED_UNREADABLE = 20  # a warning names this many unreadable files, then counts the rest
# A training log compresses 5-50 times; gzip's most is about 1,000 (a bomb). Past BOMB_FLOOR of expanded text, a
# .gz that has grown more than BOMB_RATIO times its size on disk is refused: what a bomb costs stays in
# proportion to its own size (about 200 MB of work for a 1 MB file), whatever TRAINDOC_MAX_LOG_GB allows.
BOMB_RATIO = 200
BOMB_FLOOR = 64 * 1024 * 1024
LOG_SUFFIXES = (".log", ".txt", ".out", ".err", ".gz", ".json")
RANK_IN_NAME = re.compile(r"(?:rank|worker|proc|process|gpu)[-_.]?(\d+)|^(\d+)$", re.IGNORECASE)
ATTEMPT = re.compile(r"attempt_(\d+)$")
log = logging.getLogger(__name__)


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
            if not (files := _readable(files, path)):
                raise InputError(f"no log file in folder {path} can be read (permission denied)")
            for file in files:
                rank, local = _rank_from_path(file, path)
                sources.append(LogSource(file, rank, local))
        else:
            rank, local = _rank_from_path(path.absolute(), Path(path.absolute().anchor))
            sources.append(LogSource(path, rank, local))
    return sources


def _readable(files: list[Path], folder: Path) -> list[Path]:
    """The files of a folder this process may read; the others named in one warning (one unreadable file of
    10,000 does not stop the job)."""
    unreadable = [f for f in files if not os.access(f, os.R_OK)]
    if not unreadable:
        return files
    names = ", ".join(str(f.relative_to(folder)) for f in unreadable[:NAMED_UNREADABLE])
    more = f" and {len(unreadable) - NAMED_UNREADABLE} more" if len(unreadable) > NAMED_UNREADABLE else ""
    log.warning("traindoc: warning: %d unreadable log file%s in %s left out (permission denied): %s%s",
                len(unreadable), "" if len(unreadable) == 1 else "s", folder, names, more)
    skipped = set(unreadable)
    return [f for f in files if f not in skipped]


class ExpansionBudget:
    """What a job's compressed logs may still expand to (TRAINDOC_MAX_LOG_GB, all of them together): a gzip
    bomb is refused in one line once it passes the cap, never read to its end."""

    def __init__(self, limit_bytes: int | None = None) -> None:
        self.limit = limit_bytes if limit_bytes is not None else int(max_log_gb() * 1024**3)
        self.used = 0

    def refused(self, source: LogSource) -> InputError:
        return InputError(f"{source.name} expands to more than {self.limit / 1024**3:g} GB uncompressed: refused",
                          hint="raise TRAINDOC_MAX_LOG_GB to read it")

    def check_declared(self, source: LogSource) -> None:
        """A .gz file states its uncompressed size (modulo 4 GiB) in its last 4 bytes: above the cap, refuse at once."""
        assert source.path is not None
        try:
            with source.path.open("rb") as handle:
                handle.seek(-4, os.SEEK_END)
                (declared,) = struct.unpack("<I", handle.read(4))
        except (OSError, struct.error):
            return  # too short to state it: the stream says what it is
        if self.used + declared > self.limit:
            raise self.refused(source)

    def spend(self, size: int, source: LogSource) -> None:
        self.used += size
        if self.used > self.limit:
            raise self.refused(source)


def _size_now(source: LogSource) -> int | None:
    """The size of a plain file as reading starts: a log still being written is read up to there."""
    assert source.path is not None
    try:
        info = source.path.stat()
    except OSError:
        return None
    return info.st_size if info.st_mode & 0o170000 == 0o100000 else None  # a FIFO or a device: read to its end


def _peek(handle: Any) -> bytes:
    return handle.peek(SNIFF_BYTES)[:SNIFF_BYTES] if hasattr(handle, "peek") else b""


def _blocks(handle: IO[bytes], source: LogSource, budget: ExpansionBudget | None,
            limit: int | None = None) -> Iterator[bytes]:
    """``handle`` in blocks, up to ``limit`` bytes when given; of a .gz (``budget`` given), what it expands to
    counted against the cap and its size."""
    packed = source.path.stat().st_size if budget is not None and source.path is not None else 0
    expanded = 0
    left = limit
    while (left is None or left > 0) and (block := handle.read(BLOCK_BYTES if left is None else min(BLOCK_BYTES, left))):
        if left is not None:
            left -= len(block)
        if budget is not None:
            budget.spend(len(block), source)
            expanded += len(block)
            if expanded > BOMB_FLOOR and expanded > BOMB_RATIO * packed:
                raise InputError(f"{source.name} expands more than {BOMB_RATIO} times its size ({packed:,} bytes to "
                                 f"over {expanded // 1024**2:,} MB): refused as a gzip bomb",
                                 hint="a real log that repeats that much can be read uncompressed")
        yield block


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


def read_source(source: LogSource, stdin: IO[bytes] | None = None,
                budget: ExpansionBudget | None = None) -> Iterator[LogLine]:
    """The lines of one file, parsed. Refuses a mostly-binary file, or a .gz that expands past the cap, with one
    clear error."""
    if source.path is not None and source.path.name == "error.json":
        yield from _error_json(source)
        return
    year = _year(source)
    compressed = source.path is not None and source.path.suffix == ".gz"
    if compressed:
        budget = budget or ExpansionBudget()
        budget.check_declared(source)
    handle = _open(source, stdin)
    try:
        encoding = sniff_encoding(_peek(handle))
        if encoding is None:
            _check_text(source, handle)
        limit = _size_now(source) if source.path is not None and not compressed else None
        bounded = cut_long_lines(as_utf8(_blocks(handle, source, budget if compressed else None, limit), encoding))
        grep = shutil.which("grep")
        if source.path is not None and not compressed:
            big = source.path.stat().st_size > PREFILTER_BYTES
        else:  # a stream says how big it is only by ending: up to PREFILTER_BYTES of its (cut) lines are held to see
            first: list[bytes] = []
            size = 0
            for block in bounded:
                first.append(block)
                size += len(block)
                if size > PREFILTER_BYTES:
                    break
            big = size > PREFILTER_BYTES
            bounded = chain_all(first, bounded)
        numbered = grep_stream(bounded, grep) if big and grep else numbered_lines(bounded)
        yield from _parse_all(numbered, source, year)
    except (EOFError, gzip.BadGzipFile, zlib.error, OSError) as exc:  # a damaged .gz, an unreadable file
        raise InputError(f"cannot read log {source.name}: {exc or type(exc).__name__}") from exc
    finally:
        if source.path is not None:
            handle.close()


def _check_text(source: LogSource, handle: Any) -> None:
    if is_mostly_binary(_peek(handle)):
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


def read_job(paths: Sequence[Path], stdin: IO[bytes] | None = None, *,
             max_log_bytes: int | None = None) -> Iterator[LogLine]:
    """Every line of every source, file after file. ``max_log_bytes``: what the job's .gz files may expand to,
    in all (default: TRAINDOC_MAX_LOG_GB)."""
    budget = ExpansionBudget(max_log_bytes) if max_log_bytes is not None else None
    for source in job_sources(paths):
        if budget is None and source.path is not None and source.path.suffix == ".gz":
            budget = ExpansionBudget()
        yield from read_source(source, stdin, budget)


def read_text(text: str) -> Iterator[LogLine]:
    """A pasted log (a question past corpus.errorlines.QUESTION_CAP) read as standard input: every line bounded."""
    yield from read_job([Path("-")], io.BytesIO(text.encode("utf-8", errors="replace")))
