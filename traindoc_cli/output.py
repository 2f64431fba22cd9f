"""Standard output that cannot take what a command prints is a failure (exit 1, one line), never a silent success.

Python leaves ``sys.stdout`` as None when the command started with it closed (``ask ... >&-``): ``print`` then
drops every line and the command exits 0 having said nothing. A full output (``> /dev/full``, a full disk under
``> answer.md``) raises ``OSError`` from a write or the final flush, which would read as an internal error. While a
command runs, ``guarded_stdout`` puts a stand-in in front of standard output that turns both into one
``TraindocError``; a reader that went away (``ask ... | head -1``) stays what it was: ``BrokenPipeError``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any

from common.errors import TraindocError

CLOSED = "standard output is closed: nothing can be printed"
CLOSED_HINT = "run it without `>&-`, or send it to a file: > answer.txt"


def cannot_write(exc: OSError) -> TraindocError:
    return TraindocError(f"cannot write to standard output: {exc.strerror or exc}",
                         hint="free space where the output goes, or send it elsewhere")


class GuardedOutput:
    """``sys.stdout`` as commands use it (write, flush, isatty, fileno...), whose failures are ``TraindocError``."""

    def __init__(self, stream: IO[str] | None) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        stream = self._open()
        try:
            return stream.write(text)
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise cannot_write(exc) from exc

    def flush(self) -> None:
        if self._stream is None:
            return
        try:
            self._stream.flush()
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise cannot_write(exc) from exc

    def isatty(self) -> bool:
        return self._stream is not None and self._stream.isatty()

    def _open(self) -> IO[str]:
        if self._stream is None:
            raise TraindocError(CLOSED, hint=CLOSED_HINT)
        return self._stream

    def __getattr__(self, name: str) -> Any:
        return getattr(self._open(), name)


def discard_pending(stream: IO[str] | None) -> None:
    """Point standard output at /dev/null, so that what is still buffered for an output that failed is not written
    again at exit (Python would print "Exception ignored" and exit 120)."""
    if stream is None:
        return
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, stream.fileno())
        os.close(null)
    except (OSError, ValueError, AttributeError):
        pass


@contextmanager
def guarded_stdout() -> Iterator[GuardedOutput]:
    """``sys.stdout`` guarded for the block; what it printed is flushed before the block ends."""
    original = sys.stdout
    guard = GuardedOutput(original if not isinstance(original, GuardedOutput) else original._stream)
    sys.stdout = guard  # type: ignore[assignment]
    try:
        yield guard
        guard.flush()
    except TraindocError:
        discard_pending(original)
        raise
    finally:
        sys.stdout = original
