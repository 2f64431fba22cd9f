"""Which files the index may read, and reading them: the corpus is confined.

A document is a regular ``.md``/``.markdown``/``.txt``/``.rst`` file whose real path lies under the folder it
was configured from. A symlink (to a file or a folder) that leaves that folder, a device, a FIFO, a socket, a
broken link or a file above the size cap is skipped, and the index summary names it with the reason. Symlinks
that stay inside (a runbook checkout that links ``latest.md -> v3.md``, a ``shared/`` folder link) keep working.
Hidden files and folders (``.git``) are not documents. A symlink loop (``a -> b -> a``, ``x.md -> x.md``) is
skipped and named like the rest: one bad entry never stops the others from being indexed.

Reading opens the resolved path with ``O_NOFOLLOW | O_NONBLOCK`` and checks the open file is still a regular
file within the cap, so a file swapped for a link or a FIFO after discovery is refused, never followed or
waited on.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from common.errors import InputError

SUFFIXES = (".md", ".markdown", ".txt", ".rst")


@dataclass
class Found:
    files: list[Path] = field(default_factory=list)  # real paths, sorted, each once
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (path as found, why it was not read)
    stats: dict[Path, list[int]] = field(default_factory=dict)  # real path -> [size, mtime in ns], as found


class Refused(OSError):
    """A document that may not be read (not a regular file any more, above the cap)."""


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISDIR(mode):
        return "a folder"
    return "not a regular file"


def _size_reason(size: int, max_bytes: int) -> str:
    return f"{size / 2**20:.1f} MB, above the {round(max_bytes / 2**20, 1):g} MB cap (TRAINDOC_MAX_DOC_MB)"


def real_path(path: Path) -> Path | None:
    """``path`` with every link resolved; None for a symlink loop (Python 3.11 raises RuntimeError for one, later
    versions OSError)."""
    try:
        return path.resolve()
    except (RuntimeError, OSError):
        return None


LOOP = "a symlink loop"


def discover(paths: Iterable[Path], max_bytes: int) -> Found:
    """The documents under ``paths`` (files or folders). A missing path or a named file that is not a
    document is the user's mistake (``InputError``); what a folder holds that may not be read is skipped."""
    found = Found()
    files: set[Path] = set()
    for path in paths:
        if not path.exists():
            raise InputError(f"no such file or folder: {path}")
        if not path.is_dir():
            if path.suffix.lower() not in SUFFIXES:
                raise InputError(f"{path}: not a .md, .txt or .rst file")
            if (real := real_path(path)) is None:
                found.skipped.append((str(path), LOOP))
                continue
            _consider(path, real, None, max_bytes, files, found)
            continue
        _walk(path, max_bytes, files, found)
    found.files = sorted(files)
    return found


def _walk(root: Path, max_bytes: int, files: set[Path], found: Found) -> None:
    base = real_path(root)
    if base is None:
        found.skipped.append((str(root), LOOP))
        return
    visited = {base}
    stack = [(root, base)]
    while stack:
        shown, real = stack.pop()
        try:
            entries = sorted(os.scandir(real), key=lambda e: e.name)
        except OSError as exc:
            found.skipped.append((str(shown), f"cannot list: {exc.strerror or exc}"))
            continue
        for entry in entries:
            if entry.name.startswith("."):
                continue
            where = shown / entry.name
            document = entry.name.lower().endswith(SUFFIXES)
            if entry.is_symlink():
                target = real_path(Path(entry.path))
                if target is None:
                    found.skipped.append((str(where), LOOP))
                    continue
                if not target.is_relative_to(base):
                    if document or target.is_dir():
                        found.skipped.append((str(where), f"a symlink to {target}, outside {root}"))
                    continue
                if not target.exists():
                    if document:
                        found.skipped.append((str(where), "a broken symlink"))
                    continue
                if target.is_dir():
                    if target not in visited:  # a link back up the tree would loop
                        visited.add(target)
                        stack.append((where, target))
                    continue
            elif entry.is_dir(follow_symlinks=False):
                target = Path(entry.path)
                if target not in visited:
                    visited.add(target)
                    stack.append((where, target))
                continue
            if document:
                # ``real`` has its links resolved, so a document that is no link is ``real / name`` as it is; a
                # link is resolved (and a loop skipped)
                resolved = real_path(Path(entry.path)) if entry.is_symlink() else Path(entry.path)
                if resolved is None:
                    found.skipped.append((str(where), LOOP))
                    continue
                _consider(where, resolved, base, max_bytes, files, found)


def _consider(shown: Path, real: Path, base: Path | None, max_bytes: int, files: set[Path], found: Found) -> None:
    if base is not None and not real.is_relative_to(base):
        found.skipped.append((str(shown), f"resolves to {real}, outside {base}"))
        return
    try:
        info = os.stat(real)
    except OSError as exc:
        found.skipped.append((str(shown), exc.strerror or str(exc)))
        return
    if not stat.S_ISREG(info.st_mode):
        found.skipped.append((str(shown), f"{_kind(info.st_mode)}, not a document"))
    elif info.st_size > max_bytes:
        found.skipped.append((str(shown), _size_reason(info.st_size, max_bytes)))
    else:
        files.add(real)
        found.stats[real] = [info.st_size, info.st_mtime_ns]


def read_document(path: Path, max_bytes: int) -> bytes:
    """The bytes of a discovered document, opened without following a link or waiting on a FIFO."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise Refused(exc.errno, "became a symlink after it was found") from exc
        raise
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise Refused(0, f"{_kind(info.st_mode)}, not a document")
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise Refused(0, _size_reason(len(data), max_bytes))
    return data
