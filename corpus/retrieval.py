"""Hybrid retrieval: BM25 + dense + error-line matching, fused per section, with a no-match verdict.

Signals per chunk, each scaled to [0, 1]:
- lexical: BM25 over section path + text, the query widened by a bilingual glossary;
- heading: BM25 over the heading path alone (a section's title names its topic);
- dense: cosine similarity of the query (and, for a pasted log, of its error lines) to the chunk;
- error: how much of an error message quoted in a chunk's code block the log's error lines contain.
Fused with fixed weights; parts of one section are one candidate (the best part speaks for it).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Literal, Protocol

import numpy as np

from corpus.errorlines import error_lines, looks_like_log
from corpus.families import Recognition, recognise
from corpus.lexical import tokenize
from corpus.snapshot import KnowledgeSnapshot, signature
from corpus.store import StoredChunk

Mode = Literal["hybrid", "bm25", "dense"]
MAX_QUERY_CHARS = 6000


class DenseIndex(Protocol):
    def nearest(self, vector: np.ndarray, limit: int) -> list[tuple[str, float]]: ...


class QueryEmbedder(Protocol):
    def embed(self, texts: list[str]) -> np.ndarray: ...


@dataclass(frozen=True)
class Weights:
    lexical: float = 0.35
    heading: float = 0.15
    dense: float = 0.35
    error: float = 0.25
    dense_floor: float = 0.15
    family: float = 0.15
    probe: float = 0.2
    boilerplate: float = 0.5  # multiplier for navigation sections
    # no_match: the best candidate needs this fused score, or a strong single signal.
    min_score: float = 0.42
    min_dense: float = 0.42
    min_error: float = 0.6


@dataclass(frozen=True)
class Hit:
    chunk: StoredChunk
    score: float
    signals: Mapping[str, float]


@dataclass
class RetrievalResult:
    hits: list[Hit]
    no_match: bool
    error_lines: list[str] = field(default_factory=list)
    expansions: list[str] = field(default_factory=list)
    recognised: list[str] = field(default_factory=list)


@cache
def _glossary() -> list[tuple[re.Pattern[str], str]]:
    data = json.loads(resources.files("corpus").joinpath("data/glossary.json").read_text(encoding="utf-8"))
    return [(re.compile(e["pattern"], re.IGNORECASE), e["terms"]) for e in data["expansions"]]


def expansions(text: str) -> list[str]:
    return [terms for pattern, terms in _glossary() if pattern.search(text)]


def _scaled(values: np.ndarray) -> np.ndarray:
    top = float(values.max()) if values.size else 0.0
    return values / top if top > 0 else values


class Retriever:
    def __init__(
        self,
        snapshot: KnowledgeSnapshot,
        dense: DenseIndex | None,
        embedder: QueryEmbedder | None,
        weights: Weights | None = None,
    ) -> None:
        self.snapshot = snapshot
        self._dense = dense
        self._embedder = embedder
        self.weights = weights or Weights()
        self._position = snapshot.position()

    def search(
        self,
        query: str,
        k: int = 5,
        *,
        mode: Mode = "hybrid",
        boost_text: str = "",
    ) -> RetrievalResult:
        query = query[:MAX_QUERY_CHARS] if len(query) <= MAX_QUERY_CHARS else _head_and_errors(query)
        size = len(self.snapshot.chunks)
        if size == 0:
            return RetrievalResult([], True)
        plain = mode == "bm25"  # the baseline: no glossary, no error-line emphasis
        is_log = looks_like_log(query)
        errors = error_lines(query.splitlines()) if is_log and not plain else []
        extra = [] if plain else expansions(query)
        query_tokens = tokenize(query) + tokenize(" ".join(errors)) + tokenize(" ".join(extra))

        signals: dict[str, np.ndarray] = {}
        if mode in ("hybrid", "bm25"):
            signals["lexical"] = _scaled(self.snapshot.bm25.scores(query_tokens))
        if mode == "hybrid":
            signals["heading"] = _scaled(self.snapshot.heading_bm25.scores(query_tokens))
            signals["error"] = self._error_match(errors or [query])
        if mode in ("hybrid", "dense") and self._dense is not None and self._embedder is not None:
            signals["dense"] = self._dense_scores(query, errors, size)

        fused = self._fuse(signals, mode, size)
        if mode == "hybrid":
            fused = fused * np.where(self.snapshot.boilerplate, self.weights.boilerplate, 1.0).astype(np.float32)
        recognition = recognise(query, errors)
        coverage = recognition.coverage_matrix(self.snapshot.families)
        answerable = coverage > 0
        if mode == "hybrid" and recognition.names:
            fused = fused + self.weights.family * coverage
        if boost_text and mode == "hybrid":
            # Words of what a probe found on the machine: the sections about it move up.
            fused = fused + self.weights.probe * _scaled(self.snapshot.bm25.scores(tokenize(boost_text)))
        hits = self._best_per_section(fused, signals, k * 2 if recognition.names else k)
        if mode == "hybrid" and recognition.names:
            # A section about the recognised failure outranks one that only shares words with it.
            hits.sort(key=lambda h: not answerable[self._position[h.chunk.chunk_id]])
            hits = hits[:k]
        no_match = self._no_match(hits, mode, recognition, answerable)
        return RetrievalResult(hits, no_match, errors, extra, recognition.names)

    def _fuse(self, signals: dict[str, np.ndarray], mode: Mode, size: int) -> np.ndarray:
        if mode != "hybrid":
            return next(iter(signals.values())) if signals else np.zeros(size, dtype=np.float32)
        w = self.weights
        fused = np.zeros(size, dtype=np.float32)
        for name, weight in (("lexical", w.lexical), ("heading", w.heading), ("dense", w.dense), ("error", w.error)):
            if name in signals:
                fused += weight * signals[name]
        return fused

    def _dense_scores(self, query: str, errors: list[str], size: int) -> np.ndarray:
        assert self._dense is not None and self._embedder is not None
        texts = [query[:2000]]
        if errors:
            texts.append("\n".join(errors)[:2000])
        vectors = self._embedder.embed(texts)
        scores = np.zeros(size, dtype=np.float32)
        for vector in vectors:
            for chunk_id, similarity in self._dense.nearest(vector, limit=min(50, size)):
                index = self._position.get(chunk_id)
                if index is not None:
                    scores[index] = max(scores[index], similarity)
        floor = self.weights.dense_floor
        return np.clip((scores - floor) / (1 - floor), 0, 1) * (scores > 0)

    def _error_match(self, lines: list[str]) -> np.ndarray:
        """Per chunk: the best share of a quoted error message found in one of the query's lines."""
        asked = [s for s in (signature(line) for line in lines) if s]
        return self.snapshot.signatures.best_share(asked)

    def _best_per_section(self, fused: np.ndarray, signals: dict[str, np.ndarray], k: int) -> list[Hit]:
        order = np.argsort(-fused, kind="stable")
        hits: list[Hit] = []
        seen: set[tuple[str, str]] = set()
        for index in order:
            if fused[index] <= 0 or len(hits) >= k:
                break
            chunk = self.snapshot.chunks[int(index)]
            key = (chunk.source, chunk.section)
            if key in seen:
                continue
            seen.add(key)
            hits.append(
                Hit(chunk, float(fused[index]), {name: float(v[index]) for name, v in signals.items()})
            )
        return hits

    def _no_match(self, hits: list[Hit], mode: Mode, recognition: Recognition, answerable: np.ndarray) -> bool:
        if not hits:
            return True
        if mode != "hybrid":
            return False
        top = hits[0]
        if recognition.names:
            return not answerable[self._position[top.chunk.chunk_id]]
        w = self.weights
        return not (
            top.score >= w.min_score
            or top.signals.get("dense", 0.0) >= w.min_dense
            or top.signals.get("error", 0.0) >= w.min_error
        )


def _head_and_errors(text: str) -> str:
    """A very long paste: keep its opening (the user's words) and its error lines."""
    lines = text.splitlines()
    return (text[:2000] + "\n" + "\n".join(error_lines(lines, limit=60)))[:MAX_QUERY_CHARS]
