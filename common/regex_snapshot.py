"""Compiled regular expressions kept as bytecode is: the cold ``ask`` compiled about 630 patterns (the failure
families, secret shapes, error codes, claims) in pure Python on every start, about 60 ms of a 0.3 s run.

``re`` parses a pattern and turns it into the SRE engine's code (a list of integers) in Python; ``_sre.compile``
then builds the pattern object from that code in C, in microseconds. The snapshot keeps, for each pattern the
project compiled while answering a few fixed questions of its own (``build``, run by ``make`` after the index is
built, never on a user's question), the code and group names ``re`` made for it, in a file beside the project's
bytecode (``common/__pycache__``). ``install`` (the CLI's first import) hands those to ``re``'s compiler so that a
pattern found in the snapshot skips the Python half; any other pattern compiles as before.

The snapshot is tied to the interpreter that wrote it (its version, ``_sre.MAGIC`` and code size): from another
one it is not read. A missing, unreadable or damaged file is no snapshot. Nothing in it runs: it is JSON and an
array of integers, and the pattern objects made from it equal (``==`` compares the code) those ``re`` makes.
"""

from __future__ import annotations

import json
import os
import sys
from array import array
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

FORMAT = 1
MAX_PATTERN_CHARS = 100_000  # a pattern this long is compiled as it comes
Entry = tuple[int, int, dict[str, int], tuple[str | None, ...], int, int]  # flags, groups, names, by index, code at


def default_path() -> Path:
    return Path(__file__).resolve().parent / "__pycache__" / f"regex-snapshot.{sys.implementation.cache_tag}.bin"


def _stamp() -> dict[str, Any]:
    import _sre

    return {"format": FORMAT, "python": sys.version, "magic": _sre.MAGIC, "codesize": _sre.CODESIZE}


class Snapshot:
    """The compiled patterns of one file: ``code_for(pattern, flags)`` or None."""

    def __init__(self, entries: dict[tuple[str, int], Entry], code: array) -> None:
        self._entries, self._code = entries, code

    def __len__(self) -> int:
        return len(self._entries)

    def compiled(self, pattern: str, flags: int) -> Any | None:
        entry = self._entries.get((pattern, flags))
        if entry is None:
            return None
        import _sre

        final_flags, groups, names, by_index, start, size = entry
        return _sre.compile(pattern, final_flags, self._code[start:start + size].tolist(), groups, names, by_index)


def read(path: Path) -> Snapshot | None:
    """The snapshot at ``path``, or None: missing, from another interpreter, or damaged."""
    try:
        data = path.read_bytes()
        head, _, body = data.partition(b"\n")
        header = json.loads(head)
        if not isinstance(header, dict) or header.get("stamp") != _stamp():
            return None
        code = array("I")
        if code.itemsize != header["stamp"]["codesize"]:
            return None
        code.frombytes(body)
        entries: dict[tuple[str, int], Entry] = {}
        for pattern, flags, final_flags, groups, names, start, size in header["entries"]:
            if start < 0 or size < 0 or start + size > len(code):
                return None
            by_index: list[str | None] = [None] * (groups + 1)
            for name, index in names.items():
                by_index[index] = name
            entries[(pattern, flags)] = (final_flags, groups, dict(names), tuple(by_index), start, size)
        return Snapshot(entries, code)
    except (OSError, ValueError, TypeError, KeyError, IndexError):
        return None


def _code_of(pattern: str, flags: int) -> tuple[int, int, dict[str, int], list[int]]:
    """What ``re._compiler.compile`` computes before it calls ``_sre.compile``."""
    from re import _compiler, _parser  # type: ignore[attr-defined]

    parsed = _parser.parse(pattern, flags)
    code = _compiler._code(parsed, flags)
    return flags | parsed.state.flags, parsed.state.groups - 1, dict(parsed.state.groupdict), list(code)


def write(path: Path, patterns: Iterable[tuple[str, int]]) -> int:
    """Write the snapshot of ``patterns`` to ``path`` (atomically); the number of patterns written."""
    entries: list[list[Any]] = []
    code = array("I")
    for pattern, flags in sorted(set(patterns)):
        if len(pattern) > MAX_PATTERN_CHARS:
            continue
        final_flags, groups, names, words = _code_of(pattern, flags)
        entries.append([pattern, flags, final_flags, groups, names, len(code), len(words)])
        code.extend(words)
    import tempfile

    header = json.dumps({"stamp": _stamp(), "entries": entries}, ensure_ascii=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".regex-snapshot-", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(header.encode("ascii") + b"\n" + code.tobytes())
        os.chmod(tmp, 0o644)  # as the bytecode beside it: the project's own patterns, nothing of a user's
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return len(entries)


_installed: Snapshot | None = None


def install(path: Path | None = None) -> int:
    """``re`` compiles the patterns of the snapshot from their stored code; the number it holds (0: none)."""
    global _installed
    if _installed is not None:
        return len(_installed)
    snapshot = read(path or default_path())
    if snapshot is None or not len(snapshot):
        return 0
    from re import _compiler  # type: ignore[attr-defined]

    python_compile: Callable[..., Any] = _compiler.compile

    def compile_from_snapshot(p: Any, flags: int = 0) -> Any:
        if type(p) is str and not flags & _compiler.SRE_FLAG_DEBUG:
            found = snapshot.compiled(p, flags)
            if found is not None:
                return found
        return python_compile(p, flags)

    _compiler.compile = compile_from_snapshot
    _installed = snapshot
    return len(snapshot)


@contextmanager
def recording() -> Iterator[set[tuple[str, int]]]:
    """The (pattern, flags) pairs ``re`` compiles inside the block."""
    from re import _compiler  # type: ignore[attr-defined]

    seen: set[tuple[str, int]] = set()
    inner = _compiler.compile

    def compile_and_note(p: Any, flags: int = 0) -> Any:
        if type(p) is str:
            seen.add((p, int(flags)))
        return inner(p, flags)

    _compiler.compile = compile_and_note
    try:
        yield seen
    finally:
        _compiler.compile = inner
