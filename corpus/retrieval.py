"""Hybrid retrieval: BM25 + dense + error-line matching, fused per section, with a no-match verdict.

Signals per chunk, each scaled to [0, 1]:
- lexical: BM25 over section path + text, the query widened by a bilingual glossary;
- heading: BM25 over the heading path alone (a section's title names its topic);
- dense: cosine similarity of the query (and, for a pasted log, of its error lines) to the chunk;
- error: how much of an error message quoted in a chunk's code block the log's error lines contain.
Fused with fixed weights; parts of one section are one candidate (the best part speaks for it).
Whether the best section answers at all is decided from evidence (corpus.answerability), with a
confidence: the curated failure families are one signal there, not the gate.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Literal, Protocol

import numpy as np

from common.hang_words import expand
from corpus.answerability import AnswerabilityModel, Evidence, evidence, model_for
from corpus.embedding import embed_queries
from corpus.errorlines import error_lines, looks_like_log
from corpus.families import Recognition, recognise
from corpus.lexical import BM25Index, SubsetStatistics, tokenize
from corpus.renderings import RUNBOOK, original_source, rendering_language
from corpus.snapshot import KnowledgeSnapshot, signature
from corpus.store import StoredChunk

Mode = Literal["hybrid", "bm25", "dense"]
# Which chunks a search ranks: traindoc's runbooks and the other documents are searched apart, so the documents'
# sections are ranked and judged as they would be without runbooks beside them (agent.lead picks the runbook).
Among = Literal["all", "documents", "runbooks"]
NEAREST = 60  # chunks the dense index returns, among those a search ranks
MAX_QUERY_CHARS = 6000
CHECKED = 3  # sections whose answerability is checked, best first
QUOTED = 0.5  # share of a section's quoted error message the question must contain, where a quote is required


class DenseIndex(Protocol):
    def nearest(self, vector: np.ndarray, limit: int) -> list[tuple[str, float]]: ...


class QueryEmbedder(Protocol):
    def embed(self, texts: list[str]) -> np.ndarray: ...


@dataclass(frozen=True)
class Weights:
    lexical: float = 0.35
    heading: float = 0.15
    dense: float = 0.25
    error: float = 0.25
    dense_floor: float = 0.15  # plain dense: cosines under it count as nothing
    dense_reference: float = 50.0  # hybrid: the percentile of the question's nearest chunks' cosines that counts 0
    family: float = 0.15
    probe: float = 0.2
    boilerplate: float = 0.5  # multiplier for navigation sections


@dataclass(frozen=True)
class Hit:
    chunk: StoredChunk
    score: float
    signals: Mapping[str, float]


@dataclass(frozen=True)
class Shown:
    """A hit as an answer shows it: cited by ``source`` (the original document) and the chunk's section, with the
    text of ``chunk`` (the original's, or its rendering's in the asker's language: ``lang``)."""

    source: str
    chunk: StoredChunk
    lang: str | None  # the rendering's language; None: the document as written

    @property
    def title(self) -> str:
        """The section's own heading in the text shown (a rendering's translated heading)."""
        first = self.chunk.text.lstrip().split("\n", 1)[0]
        return first.lstrip("#").strip() if first.startswith("#") else ""


@dataclass
class RetrievalResult:
    hits: list[Hit]
    no_match: bool
    error_lines: list[str] = field(default_factory=list)
    expansions: list[str] = field(default_factory=list)
    recognised: list[str] = field(default_factory=list)
    confidence: float | None = None  # probability that the best section answers (hybrid mode)
    evidence: Evidence | None = None  # what the answerability decision was made from
    candidates: list[Evidence] = field(default_factory=list)  # the evidence about each section checked, in rank order
    promoted: int = 0  # the rank the leading section had before the answerability check moved it up
    answering: list[str] = field(default_factory=list)  # chunk ids of the checked sections that answer, best first


@cache
def _glossary() -> list[tuple[re.Pattern[str], str]]:
    data = json.loads(resources.files("corpus").joinpath("data/glossary.json").read_text(encoding="utf-8"))
    return [(re.compile(expand(e["pattern"]), re.IGNORECASE | re.ASCII), e["terms"]) for e in data["expansions"]]


def expansions(text: str) -> list[str]:
    return [terms for pattern, terms in _glossary() if pattern.search(text)]


def _absolute(cosine: np.ndarray, floor: float) -> np.ndarray:
    return np.clip((cosine - floor) / (1 - floor), 0, 1) * (cosine > 0)


def _relative(cosine: np.ndarray, reference: float) -> np.ndarray:
    """The dense signal for fusion, relative to this question's nearest chunks: 1 for the nearest, 0 at the
    ``reference`` percentile of their cosines and below. e5's cosines crowd into 0.75-0.92 for any troubleshooting
    text, so on a fixed scale the dense signal is nearly flat beside the max-scaled lexical one and the words decide
    alone; an English question reaches a Chinese section through the dense signal more than through words. Scaled
    per question as the lexical signal is, it separates near-duplicate sections (cross-validated by thread on dev +
    dev2: R@1 0.86 -> 0.90, English 0.08 behind Chinese -> 0.05, with the dense weight 0.35 -> 0.25)."""
    found = cosine[cosine > 0]
    if not found.size:
        return np.zeros_like(cosine)
    top, zero = float(found.max()), _percentile(found, reference)
    if top <= zero:
        return (cosine > 0).astype(cosine.dtype)
    return np.clip((cosine - zero) / (top - zero), 0, 1) * (cosine > 0)


def _percentile(values: np.ndarray, q: float) -> float:
    """``np.percentile(values, q)`` (its default, linear interpolation, and its arithmetic) by a partial sort: numpy's
    own goes through ``np.unique``, whose first call imports ``numpy.ma`` (20-40 ms of a cold ``ask``)."""
    position = q / 100 * (values.size - 1)
    low = int(position)
    high = min(low + 1, values.size - 1)
    parted = np.partition(values, (low, high))
    a, b, t = parted[low], parted[high], values.dtype.type(position - low)
    return float(b - (b - a) * (1 - t) if t >= 0.5 else a + (b - a) * t)


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
        answerability: AnswerabilityModel | None = None,
    ) -> None:
        self.snapshot = snapshot
        self._dense = dense
        self._embedder = embedder
        self.weights = weights or Weights()
        self.answerability = answerability or model_for(str(getattr(embedder, "name", "")))
        self._position = snapshot.position()
        # Each chunk's section as a number: per-section questions become numpy operations, not Python loops over
        # every chunk (a 20,000-chunk corpus).
        # A rendering's chunks are its original's sections (corpus.renderings): one section, two texts.
        sources = {c.source for c in snapshot.chunks}
        self._logical = {source: original_source(source, sources) or source for source in sources}
        numbers: dict[tuple[str, str], int] = {}
        self._texts: dict[tuple[str, str], list[StoredChunk]] = {}
        for chunk in snapshot.chunks:
            self._texts.setdefault((self._logical[chunk.source], chunk.section), []).append(chunk)
        runbook = np.array([RUNBOOK.search(c.source) is not None for c in snapshot.chunks], dtype=bool)
        self._among = {"all": np.ones(len(runbook), dtype=np.float32), "runbooks": runbook.astype(np.float32),
                       "documents": (~runbook).astype(np.float32)}
        # Whether a section answers weighs the question's words the knowledge searched never uses: the documents
        # (with their renderings) or the runbooks, each its own vocabulary (_vocabulary).
        self._vocabularies: dict[str, SubsetStatistics] = {}
        self._last_query: tuple[str, np.ndarray] | None = None
        self._section_of = np.array([numbers.setdefault((self._logical[c.source], c.section), len(numbers))
                                     for c in snapshot.chunks], dtype=np.int32)

    def search(
        self,
        query: str,
        k: int = 5,
        *,
        mode: Mode = "hybrid",
        boost_text: str = "",
        require_quote: bool = False,
        among: Among = "all",
    ) -> RetrievalResult:
        """``require_quote``: only a section that quotes the question's error answers (an uncatalogued exception
        from a job's logs: sharing its generic words is no answer)."""
        query = query[:MAX_QUERY_CHARS] if len(query) <= MAX_QUERY_CHARS else _head_and_errors(query)
        keep = self._among[among]  # 1.0 for the chunks searched, 0.0 for the others
        size = len(self.snapshot.chunks)
        if size == 0:
            return RetrievalResult([], True)
        plain = mode == "bm25"  # the baseline: no glossary, no error-line emphasis
        is_log = looks_like_log(query)
        errors = error_lines(query.splitlines()) if is_log and not plain else []
        extra = [] if plain else expansions(query)
        query_tokens = tokenize(query) + tokenize(" ".join(errors)) + tokenize(" ".join(extra))

        dense = mode in ("hybrid", "dense") and self._dense is not None and self._embedder is not None
        # The query encoder (C, the GIL released) runs while the lexical signals are counted: the same vector, sooner.
        vector = self._query_vector(query, errors) if dense else None
        signals: dict[str, np.ndarray] = {}
        if mode in ("hybrid", "bm25"):
            signals["lexical"] = _scaled(self.snapshot.bm25.scores(query_tokens) * keep)
        if mode == "hybrid":
            signals["heading"] = _scaled(self.snapshot.heading_bm25.scores(query_tokens) * keep)
            quoted, specific = self._error_match(errors or [query])
            signals["error"], signals["quote"] = quoted * keep, specific * keep
        cosine = None
        if vector is not None:
            cosine = self._cosines(vector(), size, skipped=size - int(keep.sum())) * keep
            signals["dense"] = (_relative(cosine, self.weights.dense_reference) if mode == "hybrid"
                                else _absolute(cosine, self.weights.dense_floor))

        fused = self._fuse(signals, mode, size) * keep
        if mode == "hybrid":
            fused = fused * np.where(self.snapshot.boilerplate, self.weights.boilerplate, 1.0).astype(np.float32)
        recognition = recognise(query, errors)
        coverage = recognition.coverage_matrix(self.snapshot.families)
        answerable = coverage > 0
        if mode == "hybrid" and recognition.ranks:
            fused = fused + self.weights.family * coverage * keep  # only the chunks searched (a runbook is no document)
        if boost_text and mode == "hybrid":
            # Words of what a probe found on the machine: the sections about it move up.
            fused = fused + self.weights.probe * _scaled(self.snapshot.bm25.scores(tokenize(boost_text)) * keep)
        hits = self._best_per_section(fused, signals, k * 2 if recognition.ranks else k)
        if mode == "hybrid" and recognition.ranks:
            # A section about the recognised failure outranks one that only shares words with it.
            hits.sort(key=lambda h: not answerable[self._position[h.chunk.chunk_id]])
            hits = hits[:k]
        result = RetrievalResult(hits, not hits, errors, extra, recognition.names)
        if mode == "hybrid" and hits:
            self._decide(result, query, errors, signals, cosine, recognition, require_quote, among)
        return result

    def _vocabulary(self, among: Among) -> BM25Index | SubsetStatistics:
        """The document statistics of the chunks ``among`` is judged against."""
        mask = self._among[among]
        if bool(mask.all()):
            return self.snapshot.bm25
        if among not in self._vocabularies:
            self._vocabularies[among] = SubsetStatistics(self.snapshot.bm25, mask)
        return self._vocabularies[among]

    def original(self, source: str) -> str:
        """The document a chunk's source stands for: a rendering's original, any other source itself."""
        return self._logical.get(source, source)

    def _judged(self, chunk: StoredChunk) -> int:
        """The chunk whose evidence decides whether a section answers: the original's text, not a rendering's (the
        answerability model was fitted on the documents as written)."""
        source = self._logical.get(chunk.source, chunk.source)
        if source != chunk.source:
            texts = self._texts.get((source, chunk.section), [])
            original = next((c for c in texts if c.source == source and c.part == chunk.part),
                            next((c for c in texts if c.source == source), None))
            if original is not None:
                return self._position[original.chunk_id]
        return self._position[chunk.chunk_id]

    def shown(self, chunk: StoredChunk, lang: str) -> Shown:
        """How a hit is shown to an asker of ``lang``: the original document's name and heading, and the text of
        the same section in ``lang`` (its rendering) where there is one, else as the document wrote it."""
        source = self._logical.get(chunk.source, chunk.source)
        texts = self._texts.get((source, chunk.section), [chunk])
        wanted = [c for c in texts if rendering_language(c.source) == lang] or [c for c in texts if c.source == source]
        if not wanted:
            return Shown(source, chunk, rendering_language(chunk.source))
        best = next((c for c in wanted if c.part == chunk.part), wanted[0])
        return Shown(source, best, rendering_language(best.source))

    def _decide(self, result: RetrievalResult, query: str, errors: list[str], signals: dict[str, np.ndarray],
                cosine: np.ndarray | None, recognition: Recognition, require_quote: bool = False,
                among: Among = "all") -> None:
        """Does the best section answer? When it does not but one of the next ones does, that one leads."""
        for hit in result.hits[:CHECKED]:
            index = self._judged(hit.chunk)
            family, platform = recognition.evidence(self.snapshot.families, index)
            result.candidates.append(self._evidence(query, errors, index, signals, cosine, family, platform, among))
        decisions = [self.answerability.decide(found) for found in result.candidates]
        if require_quote:
            decisions = [(answers, p) if found.quoted_message >= QUOTED else (False, min(p, found.quoted_message))
                         for (answers, p), found in zip(decisions, result.candidates, strict=True)]
        checked = result.hits[:CHECKED]
        result.answering = [hit.chunk.chunk_id for hit, (answers, _) in zip(checked, decisions, strict=False) if answers]
        rank = next((i for i, (answers, _) in enumerate(decisions) if answers), None)
        result.no_match = rank is None
        rank = rank or 0
        result.hits.insert(0, result.hits.pop(rank))
        result.promoted, result.confidence, result.evidence = rank, decisions[rank][1], result.candidates[rank]

    def _evidence(self, query: str, errors: list[str], top: int, signals: dict[str, np.ndarray],
                  cosine: np.ndarray | None, family: float, platform: float, among: Among = "all") -> Evidence:
        chunk = self.snapshot.chunks[top]
        others: list[float] = []
        if cosine is not None:
            best: dict[int, float] = {}  # the other sections among the 60 nearest chunks, each at its best cosine
            nearest = np.argpartition(-cosine, min(59, len(cosine) - 1))[:60]
            for index in nearest[np.argsort(-cosine[nearest])]:
                section = int(self._section_of[index])
                if section != self._section_of[top] and section not in best:
                    best[section] = float(cosine[index])
            others = list(best.values())
        ranks = [self._section_rank(signals[name], top) for name in ("lexical", "heading", "dense") if name in signals]
        return evidence(
            question=query, errors=errors, section_text=f"{chunk.section}\n{chunk.text}", bm25=self._vocabulary(among),
            quoted_error=float(signals["error"][top]) if "error" in signals else 0.0,
            quoted_message=float(signals["quote"][top]) if "quote" in signals else 0.0,
            dense=_at_most_nearest(cosine, top) if cosine is not None else 0.0, dense_others=others, ranks=ranks, family=family,
            platform=platform,
        )

    def _section_rank(self, scores: np.ndarray, index: int) -> int:
        """How many other sections score above the chunk at ``index`` under one signal."""
        seen = np.bincount(self._section_of[scores > scores[index]]) > 0  # not np.unique: it imports numpy.ma
        own = int(self._section_of[index])
        return int(seen.sum()) - int(own < seen.size and bool(seen[own]))

    def _fuse(self, signals: dict[str, np.ndarray], mode: Mode, size: int) -> np.ndarray:
        if mode != "hybrid":
            return next(iter(signals.values())) if signals else np.zeros(size, dtype=np.float32)
        w = self.weights
        fused = np.zeros(size, dtype=np.float32)
        for name, weight in (("lexical", w.lexical), ("heading", w.heading), ("dense", w.dense), ("error", w.error)):
            if name in signals:
                fused += weight * signals[name]
        return fused

    def _query_vector(self, query: str, errors: list[str]) -> Callable[[], np.ndarray]:
        """The question's query vector, being computed: call the result to have it. The encoder runs on a thread of
        its own, so what the search counts meanwhile (BM25, the error lines' match) costs no time of its own."""
        assert self._embedder is not None
        # One text: a pasted log's error lines first (they carry its meaning), then the question. The encoder's
        # cost is per token, and two texts cost twice what this one does for the same cross-validated quality.
        text = "\n".join(errors)[:2000] + "\n" + query[:2000] if errors else query[:2000]
        last = self._last_query
        if last is not None and last[0] == text:  # the same question, searched again
            return lambda: last[1]
        embedder = self._embedder
        made: list[np.ndarray] = []
        failed: list[BaseException] = []

        def encode() -> None:
            try:
                made.append(embed_queries(embedder, [text])[0])  # type: ignore[arg-type]
            except BaseException as exc:  # raised where the vector is asked for
                failed.append(exc)

        worker = threading.Thread(target=encode, name="traindoc-query-encoder", daemon=True)
        worker.start()

        def result() -> np.ndarray:
            worker.join()
            if failed:
                raise failed[0]
            self._last_query = (text, made[0])
            return made[0]

        return result

    def _cosines(self, vector: np.ndarray, size: int, skipped: int = 0) -> np.ndarray:
        """Per chunk: the cosine similarity to the question and its error lines (0 outside the nearest)."""
        assert self._dense is not None
        # The nearest chunks among those searched: as many more as the search skips (runbooks, or documents).
        limit = min(NEAREST + skipped, size)
        if self._dense is self.snapshot and (aligned := self.snapshot.similarities(vector, limit)) is not None:
            return aligned.astype(np.float32, copy=False)  # the snapshot's own vectors: already in chunk order
        scores = np.zeros(size, dtype=np.float32)
        for chunk_id, similarity in self._dense.nearest(vector, limit=limit):
            index = self._position.get(chunk_id)
            if index is not None:
                scores[index] = similarity
        return scores

    def _error_match(self, lines: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """Per chunk: the best share of a quoted error message found in one of the query's lines, and of a message
        that says which failure (not a generic head several documents' messages share: SignatureIndex.specific)."""
        asked = [s for s in (signature(line) for line in lines) if s]
        return self.snapshot.signatures.best_shares(asked)

    def _best_per_section(self, fused: np.ndarray, signals: dict[str, np.ndarray], k: int) -> list[Hit]:
        leading = self._leading(fused, 64 * k)
        hits = self._best_of(fused, signals, k, leading)
        if len(hits) < k and np.count_nonzero(fused > 0) > len(leading):  # a few sections own every leading chunk
            hits = self._best_of(fused, signals, k, np.argsort(-fused, kind="stable"))
        return hits

    @staticmethod
    def _leading(fused: np.ndarray, count: int) -> np.ndarray:
        """At least the ``count`` best scoring chunks (all that score above 0 when fewer do), in the order a stable
        sort of the whole array gives them (ties: lower index first), without sorting all of it."""
        if len(fused) <= count:
            return np.argsort(-fused, kind="stable")
        threshold = float(np.partition(fused, len(fused) - count)[len(fused) - count])
        top = np.flatnonzero(fused >= threshold) if threshold > 0 else np.flatnonzero(fused > 0)
        return top[np.lexsort((top, -fused[top]))]  # every chunk tied with the last one comes too

    def _best_of(self, fused: np.ndarray, signals: dict[str, np.ndarray], k: int, order: np.ndarray) -> list[Hit]:
        hits: list[Hit] = []
        seen: set[tuple[str, str]] = set()
        for index in order:
            if fused[index] <= 0 or len(hits) >= k:
                break
            chunk = self.snapshot.chunks[int(index)]
            key = (self._logical[chunk.source], chunk.section)
            if key in seen:
                continue
            seen.add(key)
            hits.append(
                Hit(chunk, float(fused[index]), {name: float(v[index]) for name, v in signals.items()})
            )
        return hits


def _at_most_nearest(cosine: np.ndarray, index: int) -> float:
    """The chunk's cosine similarity; for a chunk outside the nearest the dense index returned (scored 0 there), the
    lowest of theirs: its own is at most that. A 0 would read as no likeness at all, far below any real cosine."""
    value = float(cosine[index])
    if value > 0:
        return value
    found = cosine[cosine > 0]
    return float(found.min()) if found.size else 0.0


def _head_and_errors(text: str) -> str:
    """A very long paste: keep its opening (the user's words) and its error lines."""
    lines = text.splitlines()
    return (text[:2000] + "\n" + "\n".join(error_lines(lines, limit=60)))[:MAX_QUERY_CHARS]

