"""What reaches standard error: one line per failure, traindoc's own, with secrets masked.

Without ``--debug`` a library's warnings (Python ``warnings``, its loggers) never reach the user; with it,
everything does, masked all the same (a traceback can quote a token).
"""

from __future__ import annotations

import logging
import sys
import threading
import warnings
from typing import Any

from common.secrets import mask

OWN = ("traindoc", "agent", "corpus", "tools", "jobs", "traindoc_cli", "traindoc_web", "traindoc_slack", "common")
EXIT_CODES = {0: "success", 1: "a failure (the line says what failed and what to do)", 2: "bad usage",
              130: "interrupted"}


def panicked(exc: BaseException) -> bool:
    """A dependency's Rust code panicked (chromadb's core on a damaged store): pyo3 raises ``PanicException``, a
    ``BaseException``, so an ``except Exception`` lets it through as a traceback."""
    return type(exc).__name__ == "PanicException"


def one_line(message: str, hint: str = "", limit: int = 600) -> str:
    """A failure as the user sees it: one line (an error may quote a multi-line message), secrets masked."""
    text = " ".join(mask(message).split())
    text = text if len(text) <= limit else text[: limit - 1] + "…"
    return f"{text} ({hint})" if hint else text


class _Masked(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return mask(super().format(record))


class _OwnOnly(logging.Filter):
    """Library records stay out of the user's stderr unless --debug."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.name.split(".")[0] in OWN or record.levelno >= logging.CRITICAL


def setup_logging(debug: bool) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Masked("%(name)s: %(levelname)s: %(message)s" if debug else "%(message)s"))
    if not debug:
        handler.addFilter(_OwnOnly())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(logging.DEBUG if debug else logging.WARNING)
    logging.captureWarnings(True)  # warnings.warn from a library is a record of "py.warnings": filtered above
    if not debug:
        warnings.simplefilter("ignore")
        threading.excepthook = _thread_failed  # a worker thread's traceback would otherwise print as it dies
        sys.unraisablehook = _unraisable
        for noisy in ("chromadb", "httpx", "urllib3", "sentence_transformers", "slack_sdk", "slack_bolt"):
            logging.getLogger(noisy).setLevel(logging.CRITICAL)


def _thread_failed(args: Any) -> None:
    logging.getLogger("traindoc").debug("thread %s failed", getattr(args.thread, "name", "?"),
                                        exc_info=(args.exc_type, args.exc_value, args.exc_traceback))


def _unraisable(args: Any) -> None:
    logging.getLogger("traindoc").debug("ignored in %r: %s", args.object, args.exc_value)
