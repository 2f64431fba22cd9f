"""One index writer at a time: `traindoc index` (and a question that indexes changed documents) holds
``index.lock`` in the data folder while it writes.

The lock is an flock(2) on that file (``filelock``): it goes with the process, however the process ends. Beside
it, ``index.lock.json`` says who holds it (pid, program and subcommand, since when: never the rest of the
command line, which may be a question), so that a second run can say at once what it waits for and for how long
(``TRAINDOC_LOCK_TIMEOUT``), then proceeds, or stops with one line when the wait runs out. Taking the lock is what
creates the data folder: 0700 (one found wider is narrowed, as the web history and the feedback store narrow it;
another user's is left to them), the lock and its record 0600 (``corpus.private_files``).
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from common.errors import IndexBusyError, IndexStoreError
from common.private import FILE_MODE, private_dir
from common.settings import Settings
from corpus.private_files import write_private_text

log = logging.getLogger(__name__)
ANNOUNCE_AFTER_S = 1.0  # a wait allowed to last less than this passes without a word
_SUBCOMMAND = re.compile(r"[a-z][a-z-]{0,30}")


def lock_path(settings: Settings) -> Path:
    return settings.data_dir / "index.lock"


def holder_path(settings: Settings) -> Path:
    return settings.data_dir / "index.lock.json"


def _this_process() -> str:
    """'traindoc index', 'ask': the program and its subcommand, never the arguments after them."""
    words = [Path(sys.argv[0]).name if sys.argv and sys.argv[0] else "python"]
    if len(sys.argv) > 1 and _SUBCOMMAND.fullmatch(sys.argv[1]):
        words.append(sys.argv[1])
    return " ".join(words)


def _record_holder(settings: Settings) -> None:
    payload = {"pid": os.getpid(), "command": _this_process(), "since": time.time()}
    try:
        write_private_text(holder_path(settings), json.dumps(payload))
    except OSError as exc:  # a read-only or full folder: the lock still works, the waiter says less
        log.debug("could not record the index lock's holder: %s", exc)


def _forget_holder(settings: Settings) -> None:
    try:
        target = holder_path(settings)
        if json.loads(target.read_text(encoding="utf-8")).get("pid") == os.getpid():
            target.unlink()
    except (OSError, ValueError, AttributeError):
        pass


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # another user's process
    return True


def holder(settings: Settings) -> str:
    """Who holds the lock, as recorded: "pid 1234 (`traindoc index`, for 42 s)"; the lock file when unknown."""
    try:
        record = json.loads(holder_path(settings).read_text(encoding="utf-8"))
        pid, command, since = int(record["pid"]), str(record["command"]), float(record["since"])
    except (OSError, ValueError, KeyError, TypeError):
        return f"another process (the lock file {lock_path(settings)})"
    if pid == os.getpid() or not _alive(pid):  # a record the holder had no time to write yet, or left behind
        return f"another process (the lock file {lock_path(settings)})"
    return f"pid {pid} (`{command[:60]}`, for {max(0, time.time() - since):.0f} s)"


@contextmanager
def hold_index_lock(settings: Settings) -> Iterator[None]:
    """Hold the index lock for the block: at once when it is free; else one line says who holds it and how long
    this run waits (``settings.lock_timeout_s``), then ``IndexBusyError`` when the wait runs out."""
    from filelock import FileLock, Timeout

    wait_s = settings.lock_timeout_s
    try:
        private_dir(settings.data_dir)  # 0700: made so, or narrowed (this user's only), as the stores in it do
        lock = FileLock(str(lock_path(settings)), mode=FILE_MODE)
        try:
            lock.acquire(timeout=0)
        except Timeout:
            held_by = holder(settings)
            if wait_s >= ANNOUNCE_AFTER_S:
                log.warning("traindoc: the index at %s is being written by %s; waiting up to %g s for it "
                            "(TRAINDOC_LOCK_TIMEOUT)", settings.data_dir, held_by, wait_s)
            try:
                lock.acquire(timeout=wait_s)
            except Timeout as exc:
                raise IndexBusyError(
                    f"another `traindoc index` is running on {settings.data_dir}: {holder(settings)} still holds "
                    f"its lock after {wait_s:g} s",
                    hint="try again when it has finished, or set TRAINDOC_LOCK_TIMEOUT to wait longer",
                ) from exc
    except OSError as exc:
        from corpus.store import disk_full, no_space

        if no_space(exc):
            raise disk_full(settings.data_dir) from exc
        raise IndexStoreError(
            f"cannot write to the data directory {settings.data_dir}: {exc.strerror or exc}",
            hint="set TRAINDOC_DATA_DIR to a writable folder",
        ) from exc
    try:
        _record_holder(settings)
        yield
    finally:
        _forget_holder(settings)
        lock.release()
