"""A log or probe bundle uploaded to the web chat: told apart, read as a job within a size limit and a reader slot,
and named by its file name, never by the server's temporary path."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from common.errors import InputError

if TYPE_CHECKING:
    from agent.logs import LogReading


def uploaded_bundle(path: str | None) -> Path | None:
    """The upload when it is a `traindoc probe --json` bundle (the machine it describes is then diagnosed)."""
    from tools.bundle import looks_like_bundle

    if not path:
        return None
    try:
        with open(path, "rb") as handle:
            return Path(path) if looks_like_bundle(handle.read(4096)) else None
    except OSError:
        return None


def read_upload(path: str | None, max_mb: float, question: str = "", held: bytes | None = None
                ) -> tuple[LogReading, tuple[Path, ...]]:
    """The uploaded log, read as a job (triaged); ``held``: its bytes, where a full disk kept it in memory
    (traindoc_web.held), read the same way (no file to name in the conversation, then)."""
    from agent.logs import LogReading, read_log

    if not path:
        return LogReading("", [], None), ()

    file = Path(path)
    if held is not None:
        return _read_held(file.name, held, max_mb, question), ()
    size = file.stat().st_size
    if size > max_mb * 1024 * 1024:
        raise InputError(f"the log is {size / 1e6:.0f} MB; the limit is {max_mb:g} MB", hint="upload the last part of it")
    try:
        reading = read_log(file, question)
    except InputError as exc:  # the user knows the file by its name, not by Gradio's cache path
        raise InputError(exc.message.replace(str(file), f"'{file.name}'"), hint=exc.hint) from exc
    return reading, (file,)


def _read_held(name: str, data: bytes, max_mb: float, question: str) -> LogReading:
    """An upload held in memory, read as a log; a compressed log or a probe bundle needs the disk it did not get."""
    import io

    from agent.logs import read_stream
    from common.language import language_of, say
    from tools.bundle import looks_like_bundle

    if len(data) > max_mb * 1024 * 1024:
        raise InputError(f"the log is {len(data) / 1e6:.0f} MB; the limit is {max_mb:g} MB", hint="upload the last part of it")
    if data[:2] == b"\x1f\x8b" or looks_like_bundle(data[:4096]):
        raise InputError(f"'{name}': " + say("web.upload_not_kept", language_of(question[:4000])))
    try:
        return read_stream(io.BytesIO(data), question)
    except InputError as exc:  # the user knows the file by its name
        raise InputError(exc.message.replace("standard input", f"'{name}'"), hint=exc.hint) from exc


@contextmanager
def upload_slot(needed: bool, readers: threading.BoundedSemaphore, wait_s: float,
                busy: str = "the server is reading other uploaded logs right now") -> Iterator[None]:
    """A slot among ``readers`` (traindoc_web.chat's ``UPLOAD_READERS``) for reading an uploaded log; a question without one
    never waits. Past ``wait_s`` the upload is refused in one line (the server's other users keep their answers)."""
    if not needed:
        yield
        return
    if not readers.acquire(timeout=wait_s):
        raise InputError(busy, hint="try again in a minute")
    try:
        yield
    finally:
        readers.release()


def without_upload_path(message: str, upload: str | None) -> str:
    """``message`` with the server's temporary path of the upload replaced by the file's name."""
    if not upload:
        return message
    name = f"'{Path(upload).name}'"
    for form in sorted({upload, str(Path(upload).resolve()), str(Path(upload).parent)}, key=len, reverse=True):
        message = message.replace(form, name)
    return message
