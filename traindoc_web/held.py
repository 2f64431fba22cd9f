"""An upload on a full disk. Gradio writes every upload to its folder (``GRADIO_TEMP_DIR``) before any handler sees
it; a write that failed there was an HTTP 500, and an ASGI traceback in the server's log.

``guard_uploads`` wraps Gradio's one upload function (``gradio.routes.upload_fn``: the route's sign-in check still
runs before it):
- an upload that does not fit the space left in that folder (its declared size and ``MARGIN``) is read into memory
  instead, within the upload cap and ``HELD_BYTES`` for all of them: it is held here (``HELD``) under the path Gradio
  would have given it, which Gradio's checks accept as an upload of its own; the turn that names that path takes the
  bytes (``HELD.take``) and reads the log from memory (traindoc_web.upload);
- one that fails for want of space all the same (the disk filled while it was written), or finds no room in memory,
  is answered HTTP 507 with one line (the phrase ``web.upload_not_kept``), and the server logs one line.
Bytes that no turn took are dropped after ``HOLD_S``.
"""

from __future__ import annotations

import errno
import hashlib
import logging
import shutil
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

log = logging.getLogger("traindoc.web")

MARGIN = 8 * 2**20  # free space an upload leaves on Gradio's disk, or it is held in memory
HELD_BYTES = 256 * 2**20  # held uploads in all
HOLD_S = 3600.0  # an upload no turn took within this is dropped
FORM_BYTES = 64 * 2**10  # what a multipart form adds to its file: the boundaries, the headers


class HeldUploads:
    """Uploads kept in memory by the path Gradio was given for each, until a turn takes one."""

    def __init__(self, budget: int = HELD_BYTES, hold_s: float = HOLD_S) -> None:
        self.budget = budget
        self.hold_s = hold_s
        self._held: dict[str, tuple[bytes, float]] = {}
        self._lock = threading.Lock()

    def room(self, size: int) -> bool:
        """Whether ``size`` more bytes may be held now."""
        with self._lock:
            self._expire()
            return sum(len(data) for data, _ in self._held.values()) + size <= self.budget

    def put(self, folder: str, name: str, data: bytes) -> str:
        """Hold ``data``; the path it is known by (as Gradio names an upload: ``folder/<sha256>/<name>``)."""
        path = str(Path(folder).absolute() / hashlib.sha256(data).hexdigest() / _file_name(name))
        with self._lock:
            self._held[path] = (data, time.monotonic())
        return path

    def take(self, path: str | None) -> bytes | None:
        """The bytes held for ``path`` (no longer held), or None: not held, the upload is on disk as usual."""
        if not path:
            return None
        with self._lock:
            self._expire()
            found = self._held.pop(str(Path(path).absolute()), None)
        return found[0] if found else None

    def _expire(self) -> None:
        cutoff = time.monotonic() - self.hold_s
        for path in [p for p, (_, since) in self._held.items() if since < cutoff]:
            del self._held[path]


HELD = HeldUploads()

UploadFn = Callable[..., Awaitable[tuple[list[str], list[str], list[str]]]]


def guard_uploads() -> None:
    """Put ``guarded`` in place of Gradio's upload function (once a process)."""
    import gradio.routes as routes

    original = routes.upload_fn
    if not getattr(original, "_traindoc_guarded", False):
        routes.upload_fn = guarded(original)  # type: ignore[assignment]


def guarded(upload_fn: UploadFn, held: HeldUploads = HELD) -> UploadFn:
    """``upload_fn`` that holds an upload its disk has no room for, and answers 507 where nothing can be done."""
    from starlette.exceptions import HTTPException

    from common.language import say
    from corpus.store import no_space

    async def upload(request: Any, upload_dir: str, max_file_size: float, upload_id: str | None, *args: Any,
                     **kwargs: Any) -> tuple[list[str], list[str], list[str]]:
        declared = _declared_size(request)
        ours = False  # the upload is read here, not by Gradio: the page's progress bar is ended here too
        try:
            if declared is None or declared + MARGIN <= _free_bytes(Path(upload_dir)):
                return await upload_fn(request, upload_dir, max_file_size, upload_id, *args, **kwargs)
            ours = True
            return await _hold(request, upload_dir, max_file_size, declared, held)
        except OSError as exc:
            if not no_space(exc):
                raise
            ours = True
            log.warning("traindoc web: an upload was refused: %s has no space left (%s)", upload_dir, exc.strerror or exc)
            raise HTTPException(507, say("web.upload_not_kept", "en")) from None
        finally:
            if ours and upload_id and kwargs.get("upload_progress") is not None:
                kwargs["upload_progress"].set_done(upload_id)

    upload._traindoc_guarded = True  # type: ignore[attr-defined]
    return upload


async def _hold(request: Any, upload_dir: str, max_file_size: float, declared: int, held: HeldUploads
                ) -> tuple[list[str], list[str], list[str]]:
    """The upload read into memory and held: Gradio's answer (its paths; nothing to copy)."""
    from starlette.exceptions import HTTPException

    if declared > max_file_size + FORM_BYTES:
        raise HTTPException(413, f"File size exceeded maximum allowed size of {max_file_size:.0f} bytes.")
    if not held.room(declared):
        raise OSError(errno.ENOSPC, "no room to hold the upload in memory either")
    files = await _read_form(request, int(max_file_size + FORM_BYTES))
    log.warning("traindoc web: %s has no space left: an upload of %.1f MB is held in memory", upload_dir, declared / 1e6)
    return [held.put(upload_dir, name, data) for name, data in files], [], []


def _declared_size(request: Any) -> int | None:
    try:
        return int(request.headers["content-length"])
    except (KeyError, ValueError):
        return None


def _free_bytes(folder: Path) -> int:
    """Free space on the disk that holds ``folder`` (or would: its nearest folder that exists)."""
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    try:
        return shutil.disk_usage(folder).free
    except OSError:  # not known: Gradio writes it as usual
        return 2**62


async def _read_form(request: Any, limit: int) -> list[tuple[str, bytes]]:
    """The files of a multipart form (field ``files``, as Gradio's client sends them), read whole into memory."""
    from python_multipart.multipart import MultipartParser, parse_options_header
    from starlette.exceptions import HTTPException

    _, options = parse_options_header(request.headers.get("content-type", ""))
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise HTTPException(413, f"File size exceeded maximum allowed size of {limit - FORM_BYTES} bytes.")
    parts: list[dict[str, Any]] = []
    header: list[bytes] = [b"", b""]

    def begin() -> None:
        parts.append({"headers": {}, "data": bytearray()})

    def field(data: bytes, start: int, end: int) -> None:
        header[0] += data[start:end]

    def value(data: bytes, start: int, end: int) -> None:
        header[1] += data[start:end]

    def header_end() -> None:
        parts[-1]["headers"][header[0].lower()] = header[1]
        header[:] = [b"", b""]

    def data(chunk: bytes, start: int, end: int) -> None:
        parts[-1]["data"] += chunk[start:end]

    try:
        parser = MultipartParser(options[b"boundary"], {"on_part_begin": begin, "on_header_field": field,
                                                        "on_header_value": value, "on_header_end": header_end,
                                                        "on_part_data": data})
        parser.write(bytes(body))
        parser.finalize()
    except Exception as exc:  # python_multipart's errors, a missing boundary: the form does not parse
        raise HTTPException(400, f"Could not parse multipart request: {exc}") from None
    files = []
    for part in parts:
        _, disposition = parse_options_header(part["headers"].get(b"content-disposition", b""))
        if disposition.get(b"name") == b"files" and b"filename" in disposition:
            files.append((disposition[b"filename"].decode("utf-8", "replace"), bytes(part["data"])))
    return files


def _file_name(name: str) -> str:
    """The upload's name as Gradio keeps it (no folders, no characters a file name cannot have)."""
    from gradio_client.utils import strip_invalid_filename_characters

    kept = strip_invalid_filename_characters(Path(name).name)
    return kept if kept not in ("", ".", "..") else "upload"
