"""What traindoc keeps of what users typed (the web chat's history, the feedback store, a Slack attachment, caches)
is its owner's alone: files 0600 in a 0700 folder. They are created with those modes (never readable by others,
not even for a moment), and a file found with wider ones is narrowed when it is opened. A folder is narrowed only
when traindoc made it or it is the data folder (``TRAINDOC_DATA_DIR``): never a folder the user named for a file
(``TRAINDOC_FEEDBACK_DB=/srv/shared/feedback.sqlite3`` leaves ``/srv/shared`` as it is)."""

from __future__ import annotations

import atexit
import os
import shutil
import stat
import tempfile
import threading
from pathlib import Path

FILE_MODE = 0o600
FOLDER_MODE = 0o700
SQLITE_SIDES = ("-journal", "-wal", "-shm")  # SQLite's files beside a database, which hold its rows too


def private_dir(folder: Path, *, narrow: bool = True) -> Path:
    """``folder`` made 0700 when missing; when it was there, narrowed to 0700 if ``narrow`` (traindoc's own folders)
    and it belongs to this user."""
    existed = folder.is_dir()
    folder.mkdir(mode=FOLDER_MODE, parents=True, exist_ok=True)
    if not existed or narrow:
        restrict(folder, FOLDER_MODE)
    return folder


def private_file(path: Path) -> Path:
    """``path`` created 0600 when missing (its folder 0700 when missing; the data folder narrowed), and narrowed to
    0600 with SQLite's side files when it was there."""
    private_dir(path.parent, narrow=is_data_dir(path.parent))
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT, FILE_MODE))  # no O_TRUNC: an existing file is kept whole
    for candidate in (path, *(path.with_name(path.name + side) for side in SQLITE_SIDES)):
        restrict(candidate, FILE_MODE)
    return path


def is_data_dir(folder: Path) -> bool:
    from common.settings import Settings

    try:
        return folder.resolve() == Settings.from_env().data_dir.resolve()
    except (OSError, RuntimeError, ValueError):
        return False


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def restrict(path: Path, mode: int) -> None:
    """Take away every permission bit beyond ``mode`` from a file or folder of this user's (another user's, on a
    shared install, is left to its owner)."""
    try:
        info = path.stat()
        if info.st_uid == os.getuid() and stat.S_IMODE(info.st_mode) & ~mode:
            path.chmod(stat.S_IMODE(info.st_mode) & mode)
    except OSError:
        pass


_TEMPORARY: list[Path] = []  # the folders ``private_temp_dir`` made in this process
_REMOVING = threading.Lock()  # a second remover (the web worker's exit and its lifeline) waits for the first


def private_temp_dir(prefix: str) -> Path:
    """A new folder under the system's temporary folder that only this user can enter (0700), removed when the
    process ends: at exit, on SIGTERM where ``exit_handlers_on_sigterm`` was called (the web server and its worker),
    when the web worker's server goes away (traindoc_web.worker): ``remove_private_temps``."""
    _TEMPORARY.append(Path(tempfile.mkdtemp(prefix=prefix)))
    return _TEMPORARY[-1]


def remove_private_temps() -> None:
    """Remove every folder ``private_temp_dir`` made in this process, and what is in it; returns once they are gone,
    whichever thread removes them."""
    with _REMOVING:
        while _TEMPORARY:
            shutil.rmtree(_TEMPORARY[-1], ignore_errors=True)
            _TEMPORARY.pop()


atexit.register(remove_private_temps)


def exit_handlers_on_sigterm() -> None:
    """A SIGTERM (a service manager, `kill`) runs the exit handlers first (``remove_private_temps`` among them), then
    ends the process as SIGTERM ends it; a second SIGTERM ends it at once. Only from the main thread, and only where
    SIGTERM still has its default action (a handler of someone else's is kept)."""
    import signal

    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return

    def ended(signum: int, _frame: object) -> None:
        signal.signal(signum, signal.SIG_DFL)
        try:
            atexit._run_exitfuncs()
        finally:
            os.kill(os.getpid(), signum)

    signal.signal(signal.SIGTERM, ended)
