"""Reading the user's log (`ask --log FILE` or stdin): streamed, bounded, binary-safe."""

from __future__ import annotations

import gzip
import io
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from common.errors import InputError
from corpus.errorlines import ErrorLineCollector

SNIFF_BYTES = 8192
HEAD_CHARS = 4000


def _is_binary(sample: bytes) -> bool:
    if b"\x00" in sample:
        return True
    control = sum(1 for b in sample if b < 9 or 13 < b < 32)
    return bool(sample) and control / len(sample) > 0.1


def _text_lines(handle: IO[bytes]) -> Iterator[str]:
    stream = io.TextIOWrapper(handle, encoding="utf-8", errors="replace", newline=None)
    while True:
        line = stream.readline(65536)  # a line with no newline for 2 GB is read in slices
        if not line:
            return
        yield line


def summarise_lines(lines: Iterable[str]) -> tuple[str, list[str]]:
    """(the opening of the text, its error lines), reading each line once."""
    collector = ErrorLineCollector()
    head: list[str] = []
    size = 0
    for line in lines:
        if size < HEAD_CHARS:
            head.append(line[: HEAD_CHARS - size])
            size += len(head[-1])
        collector.feed(line)
    return "".join(head), collector.result()


def read_log(path: Path) -> tuple[str, list[str]]:
    """Stream a log file (plain or .gz). Returns its opening and its error lines."""
    try:
        raw: Any = gzip.open(path, "rb") if path.suffix == ".gz" else path.open("rb")
    except FileNotFoundError as exc:
        raise InputError(f"log file not found: {path}") from exc
    except IsADirectoryError as exc:
        raise InputError(f"log path is a folder, not a file: {path}") from exc
    except PermissionError as exc:
        raise InputError(f"cannot read log file {path}: permission denied") from exc
    except OSError as exc:
        raise InputError(f"cannot read log file {path}: {exc.strerror or exc}") from exc
    with raw:
        try:
            sample = raw.peek(SNIFF_BYTES)[:SNIFF_BYTES] if hasattr(raw, "peek") else b""
            if _is_binary(sample):
                raise InputError(f"{path} looks like a binary file, not a text log", hint="pass the training log")
            return summarise_lines(_text_lines(raw))
        except (OSError, EOFError, gzip.BadGzipFile) as exc:
            raise InputError(f"cannot read log file {path}: {exc}") from exc


def read_stream(stream: IO[bytes]) -> tuple[str, list[str]]:
    buffered: Any = stream if hasattr(stream, "peek") else io.BufferedReader(stream)  # type: ignore[type-var]
    sample = buffered.peek(SNIFF_BYTES)[:SNIFF_BYTES]
    if _is_binary(sample):
        raise InputError("standard input looks binary, not a text log")
    return summarise_lines(_text_lines(buffered))
