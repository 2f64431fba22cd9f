"""The composition root and the one ``ask()`` every front end calls.

``build_troubleshooter(settings)`` wires the store, the retriever and (later) probes and a model
backend; nothing is loaded until first needed, so `ask --help` stays instant.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from agent.answer import Answer, Citation
from agent.compose import compose
from agent.errors import IndexMissingError, IndexStoreError
from agent.settings import Settings, contain_caches

log = logging.getLogger(__name__)


@dataclass
class Question:
    text: str
    log_head: str = ""
    log_errors: list[str] = field(default_factory=list)
    id: str | None = None
    probes: bool = True

    def search_text(self) -> str:
        """What retrieval sees: the question, then the log's error lines (they carry the signal)."""
        parts = [self.text]
        if self.log_errors:
            parts.append("\n".join(self.log_errors))
        elif self.log_head:
            parts.append(self.log_head)
        return "\n".join(p for p in parts if p.strip())


class Troubleshooter:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        contain_caches(settings)
        self._embedder = None
        self._retriever = None

    # -- wiring --------------------------------------------------------------
    def embedder(self):  # type: ignore[no-untyped-def]
        if self._embedder is None:
            from corpus.embedding import make_embedder

            self._embedder = make_embedder(self.settings.embed_model, cache_dir=self.settings.cache_dir / "models")
        return self._embedder

    def index(self, paths=None, *, rebuild: bool = False, progress: bool = True):  # type: ignore[no-untyped-def]
        from corpus.indexer import build_index

        report = build_index(self.settings, self.embedder, paths, rebuild=rebuild, progress=progress)
        self._retriever = None
        return report

    def retriever(self):  # type: ignore[no-untyped-def]
        if self._retriever is not None:
            return self._retriever
        from corpus.retrieval import Retriever
        from corpus.snapshot import read_snapshot, write_snapshot
        from corpus.store import VectorStore, local_index_exists

        if not local_index_exists(self.settings):
            log.info("no index yet: building it from %s", ", ".join(map(str, self.settings.corpus_paths)))
            self.index(progress=False)
        embedder = self.embedder()
        store = VectorStore(self.settings, embedder, create=False)
        snapshot = read_snapshot(self.settings)
        if snapshot is None or snapshot.version != store.version:
            snapshot = write_snapshot(self.settings, store.all_chunks(), store.version)
        if not snapshot.chunks:
            raise IndexMissingError("the index is empty", hint="run `traindoc index`")
        self._retriever = Retriever(snapshot, store, embedder)
        return self._retriever

    # -- the core ------------------------------------------------------------
    def ask(self, question: Question, *, mode: str = "hybrid", on_stage: Callable[[str], None] | None = None) -> Answer:
        timings: dict[str, float] = {}
        started = time.perf_counter()
        retriever = self.retriever()
        timings["load"] = (time.perf_counter() - started) * 1000
        text = question.search_text()
        t0 = time.perf_counter()
        result = retriever.search(text, k=self.settings.top_k, mode=mode)  # type: ignore[arg-type]
        timings["retrieve"] = (time.perf_counter() - t0) * 1000
        no_match = result.no_match
        citations = [
            Citation(n=i, source=h.chunk.source, section=h.chunk.section, chunk_id=h.chunk.chunk_id,
                     score=h.score, text=h.chunk.text)
            for i, h in enumerate(result.hits, 1)
        ]
        t0 = time.perf_counter()
        errors = question.log_errors or result.error_lines
        body = compose(question.text, citations, [], no_match, result.recognised, errors)
        timings["compose"] = (time.perf_counter() - t0) * 1000
        timings["total"] = (time.perf_counter() - started) * 1000
        return Answer(
            question=question.text, answer=body, citations=[] if no_match else citations, findings=[],
            no_match=no_match, timings_ms=timings, error_lines=errors, recognised=result.recognised, id=question.id,
        )


def build_troubleshooter(settings: Settings | None = None) -> Troubleshooter:
    return Troubleshooter(settings or Settings.from_env())


__all__ = ["Question", "Troubleshooter", "build_troubleshooter", "IndexStoreError"]
