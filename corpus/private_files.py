"""The index's files are its owner's alone, as the web history and the feedback store are (``common.private``): the
store, the snapshot and the embedding cache hold what the team's documents say. Files 0600, folders 0700.

Three ways in, one per kind of writer:
- ``write_private_text``: a small file traindoc writes itself (the store's version, the roots, the lock's holder),
  replaced at once and created 0600;
- ``private_umask``: what a library creates with no mode to pass (chromadb's SQLite file, its segment folders);
- ``narrow_index``: what an older traindoc left wider, narrowed after a run (another user's files are left alone).
"""

from __future__ import annotations

import os
import tempfile
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from common.private import FILE_MODE, FOLDER_MODE, SQLITE_SIDES, restrict

WRITTEN_PREFIX = ".written-"  # a temporary file of ``write_private_text``: a killed run's is removed by the next index


def write_private_text(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` at once (a reader never sees half of it), as a file of mode 0600. Raises
    OSError (a read-only or full folder); no temporary file is left behind then."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=WRITTEN_PREFIX)  # mkstemp: 0600 from its creation
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


_UMASK_LOCK = threading.Lock()
_UMASK_DEPTH = [0, 0]  # [callers inside private_umask, the umask to restore when the last one leaves]


@contextmanager
def private_umask() -> Iterator[None]:
    """While inside, files the process creates are 0600 at most and folders 0700 (umask 077). The umask belongs to
    the process: callers on several threads share one change, undone when the last of them leaves."""
    with _UMASK_LOCK:
        if _UMASK_DEPTH[0] == 0:
            _UMASK_DEPTH[1] = os.umask(0o077)
        _UMASK_DEPTH[0] += 1
    try:
        yield
    finally:
        with _UMASK_LOCK:
            _UMASK_DEPTH[0] -= 1
            if _UMASK_DEPTH[0] == 0:
                os.umask(_UMASK_DEPTH[1])


def narrow_index(files: Iterable[Path], trees: Iterable[Path], folders: Iterable[Path] = ()) -> None:
    """``files`` (with SQLite's side files) narrowed to 0600, ``folders`` to 0700; each of ``trees`` and every
    folder under it to 0700, every file in them to 0600. Links are not followed; what is missing is skipped."""
    for place in folders:
        if not place.is_symlink():
            restrict(place, FOLDER_MODE)
    for path in files:
        for candidate in (path, *(path.with_name(path.name + side) for side in SQLITE_SIDES)):
            restrict(candidate, FILE_MODE)
    for tree in trees:
        if not tree.is_dir() or tree.is_symlink():
            continue
        restrict(tree, FOLDER_MODE)
        for folder, subfolders, names in os.walk(tree):  # os.walk does not follow links to folders
            for names_of, mode in ((subfolders, FOLDER_MODE), (names, FILE_MODE)):
                for name in names_of:
                    if not os.path.islink(os.path.join(folder, name)):
                        restrict(Path(folder, name), mode)
