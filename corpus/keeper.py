"""Keeping the index up with the corpus while traindoc answers: documents a team adds are used at once.

Before a question is answered, ``IndexKeeper.check()`` runs the cheap check (``corpus.freshness``). When the
corpus changed, the one-shot front ends (`ask`, `traindoc eval`) index the changes first, with a line and the
indexer's bars on a terminal and nothing otherwise; the servers (the web chat, the Slack bot) index them on a
thread of their own, answering from the index they have meanwhile. Whatever an answer's index lacks is an
``IndexLag``, which the answer carries as a notice: documents being indexed, not indexable here (a read-only
data folder, a shared Chroma server) or that failed to index, and configured folders that do not exist.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cache
from importlib import resources
from typing import Any

from common.errors import TraindocError
from common.settings import Settings
from corpus.embedding import Embedder
from corpus.freshness import CorpusChange, corpus_change, record_touched

log = logging.getLogger(__name__)
CHECK_EVERY_S = 2.0  # a command answering many questions (--batch, eval) checks at most this often; a server, each time
RETRY_AFTER_S = 60.0  # after a failed background run, before the next try
LOCK_WAIT_S = 15.0  # for a `traindoc index` already running; then the answer says the documents are not in yet


@cache
def _phrases() -> dict[str, dict[str, Any]]:
    data: dict[str, dict[str, Any]] = json.loads(
        resources.files("corpus").joinpath("data/freshness.json").read_text(encoding="utf-8"))
    return data


def _say(key: str, lang: str, count: int | None = None, **values: Any) -> str:
    phrase = _phrases().get(lang, _phrases()["en"])[key]
    if isinstance(phrase, list):
        phrase = phrase[0 if count == 1 else 1]
    return str(phrase).format(n=count, **values)


def describe(change: CorpusChange, lang: str = "en", *, removed: bool = False) -> str:
    """"2 new documents and 1 changed document" (or the deleted ones, with ``removed``)."""
    groups = [("removed", change.removed)] if removed else [("added", change.added), ("changed", change.changed)]
    return _say("and", lang).join(_say(key, lang, len(items)) for key, items in groups if items)


@dataclass(frozen=True)
class IndexLag:
    """What the index an answer came from lacks, and why."""

    status: str  # indexing | read_only | failed | shared | missing (only configured folders that do not exist)
    change: CorpusChange
    why: str = ""  # the read-only data folder, or why indexing failed

    def notice(self, lang: str = "en") -> str:
        """One line for the answer, in the question's language."""
        parts: list[str] = []
        if self.status != "missing":
            if self.change.documents:
                parts.append(_say(self.status, lang, self.change.documents, what=describe(self.change, lang)))
            if self.change.removed:
                parts.append(_say("removed_still", lang, len(self.change.removed),
                                  what=describe(self.change, lang, removed=True)))
            if self.change.unknown and not parts:
                parts.append(_say(self.status, lang, 2, what=_say("unknown_what", lang)))
            if self.status == "read_only":
                parts.append(_say("read_only_why", lang, data_dir=self.why))
            elif self.status == "shared":
                parts.append(_say("shared_why", lang))
            elif self.status == "failed" and self.why:
                parts.append(self.why)
        parts += [_say("missing_root", lang, path=path) for path in self.change.missing_roots]
        return "; ".join(parts)


def read_only(settings: Settings) -> bool:
    from corpus.store import writable

    return not writable(settings.data_dir) or (settings.chroma_dir.exists() and not writable(settings.chroma_dir))


class IndexKeeper:
    """Checks the corpus before questions and brings the index up to date, in the foreground or the background.

    ``generation`` counts the index runs that finished: a retriever loaded before the latest one is stale."""

    def __init__(self, settings: Settings, embedder: Callable[[], Embedder], *, background: bool,
                 fresh_embedder: Callable[[], Embedder] | None = None) -> None:
        self.settings = settings
        self.background = background
        self.generation = 0
        self._embedder = embedder  # the foreground run's: the question's embedding reuses the loaded model
        self._fresh_embedder = fresh_embedder or embedder  # a background run's own (the model is not shared)
        self._lock = threading.Lock()
        self._lag: IndexLag | None = None
        self._checked_at = float("-inf")
        self._worker: threading.Thread | None = None
        self._failed: tuple[CorpusChange, float] | None = None
        self._warned: IndexLag | None = None

    @property
    def lag(self) -> IndexLag | None:
        """What the index lacked at the latest check."""
        return self._lag

    def wait(self, timeout_s: float | None = None) -> bool:
        """Wait for a background run to finish; False when it is still running after ``timeout_s``."""
        worker = self._worker
        if worker is not None:
            worker.join(timeout_s)
            return not worker.is_alive()
        return True

    def recheck(self) -> None:
        """Check again before the next question (after an explicit `traindoc index`)."""
        with self._lock:
            self._checked_at = float("-inf")
            self._lag = None

    def check(self) -> IndexLag | None:
        """What the index lacks now; in the foreground, after indexing what changed."""
        from corpus.store import local_index_exists

        with self._lock:
            recent = not self.background and time.monotonic() - self._checked_at < CHECK_EVERY_S
            if self._worker is not None or recent:
                return self._lag
            self._checked_at = time.monotonic()
            if not local_index_exists(self.settings):
                self._lag = None  # no index yet: the retriever builds it whole
                return None
            self._lag = self._act(corpus_change(self.settings))
            return self._lag

    def _act(self, change: CorpusChange) -> IndexLag | None:
        writable = self.settings.chroma_url is None and not read_only(self.settings)
        if writable:
            record_touched(self.settings, change)
        if not change:
            return None
        if not change.to_index:
            return IndexLag("missing", change)
        if self.settings.chroma_url is not None:  # a question does not write to a shared server
            return self._warn(IndexLag("shared", change))
        if not writable:
            return self._warn(IndexLag("read_only", change, str(self.settings.data_dir)))
        if self._failed is not None and self._failed[0] == change and time.monotonic() - self._failed[1] < RETRY_AFTER_S:
            return self._lag if self._lag is not None and self._lag.status == "failed" else None
        if not self.background:
            lag = self._run(change, self._embedder, progress=sys.stderr.isatty())
            if lag is None or lag.status == "missing":
                self.generation += 1
            return lag
        log.info("indexing %s in the background", describe(change) or "the corpus")
        self._worker = threading.Thread(target=self._work, args=(change,), name="traindoc-index", daemon=True)
        self._worker.start()
        return IndexLag("indexing", change)

    def _warn(self, lag: IndexLag) -> IndexLag:
        """A server says it once in its log (a one-shot command's answer says it)."""
        if self.background and lag != self._warned:
            log.warning("traindoc: %s", lag.notice())
            self._warned = lag
        return lag

    def _work(self, change: CorpusChange) -> None:
        lag = self._run(change, self._fresh_embedder, progress=False)
        with self._lock:
            self._worker = None
            self._checked_at = float("-inf")  # the next question checks again (more may have changed meanwhile)
            self._lag = lag
            if lag is None or lag.status == "missing":
                self.generation += 1
                log.info("indexed %s", describe(change) or "the corpus")

    def _run(self, change: CorpusChange, embedder: Callable[[], Embedder], *, progress: bool) -> IndexLag | None:
        from corpus.indexer import build_index

        if progress:
            line = _say("progress", "en", what=describe(change)) if change.documents else _say("checking", "en")
            print(line, file=sys.stderr, flush=True)
        settings = replace(self.settings, lock_timeout_s=min(self.settings.lock_timeout_s, LOCK_WAIT_S))
        try:
            report = build_index(settings, embedder, progress=progress)
        except TraindocError as exc:
            why = exc.message
        except Exception as exc:  # an index that cannot be updated must not cost the user the answer
            log.debug("indexing the changed corpus failed", exc_info=exc)
            why = f"{type(exc).__name__}: {exc}"
        else:
            wanted = set(change.added) | set(change.changed)
            for source, reason in report.skipped:
                if source in wanted:
                    log.warning("traindoc: warning: skipped %s: %s", source, reason)
            self._failed = None
            return IndexLag("missing", change) if change.missing_roots else None  # indexed: only those are left to say
        self._failed = (change, time.monotonic())
        lag = IndexLag("failed", change, why)
        log.warning("traindoc: %s", lag.notice()) if self.background else log.debug("%s", lag.notice())
        return lag
