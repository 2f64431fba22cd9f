"""The local read model of the index: every chunk plus its lexical index, pickled after each
`traindoc index` run, so a query never re-tokenises the corpus. Keyed by the store's version: a
snapshot that does not match (another machine re-indexed a shared Chroma server) is rebuilt from
the store.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import pickle
import re
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from common.settings import Settings
from corpus.chunking import PATH_SEPARATOR
from corpus.errorlines import error_lines, normalise
from corpus.families import catalogue, catalogue_version, covered
from corpus.lexical import BM25Index, tokenize
from corpus.renderings import original_source
from corpus.store import StoredChunk, snapshot_path

FORMAT = "8"
GENERIC_SHARE = 0.8  # share of a quoted message inside a longer one, for it to be that one's head
GENERIC_LONGER = 2.0  # how much longer the message it heads is
GENERIC_DOCUMENTS = 3  # how many other documents quote messages it heads, for it to be generic
log = logging.getLogger(__name__)


class SignatureIndex:
    """The error messages quoted in the documents, as token sets, with an inverted index so a log's
    error lines are matched against all of them in a few numpy operations."""

    def __init__(self, per_chunk: Sequence[Sequence[frozenset[str]]], document_of: np.ndarray | None = None) -> None:
        """``document_of``: chunk -> document number, to tell the messages that only head other documents' ones
        (``specific``); without it every message counts as specific."""
        owners: list[int] = []
        lengths: list[int] = []
        postings: dict[str, list[int]] = {}
        for chunk_index, signatures in enumerate(per_chunk):
            for tokens in signatures:
                signature_id = len(owners)
                owners.append(chunk_index)
                lengths.append(len(tokens))
                for token in tokens:
                    postings.setdefault(token, []).append(signature_id)
        self.chunks = len(per_chunk)
        self.owner = np.array(owners, dtype=np.int32)
        self.length = np.maximum(np.array(lengths, dtype=np.float32), 1)
        self.postings = {t: np.array(ids, dtype=np.int32) for t, ids in postings.items()}
        self.specific_mask = (self.specific(document_of) if document_of is not None
                              else np.ones(len(self.owner), dtype=np.float32))  # computed once, read by every query

    def best_shares(self, asked: Sequence[frozenset[str]], min_shared: int = 3) -> tuple[np.ndarray, np.ndarray]:
        """Per chunk, from one pass over the asked lines: the largest share of one quoted message found in one asked
        line, and the same over the specific messages only (``specific_mask``)."""
        every = np.zeros(self.chunks, dtype=np.float32)
        only = np.zeros(self.chunks, dtype=np.float32)
        if not len(self.owner):
            return every, only
        for tokens in asked:
            shared = self._shared(tokens)
            share = np.where(shared >= min_shared, shared / self.length, 0).astype(np.float32)
            np.maximum.at(every, self.owner, share)
            np.maximum.at(only, self.owner, share * self.specific_mask)
        return every, only

    def _shared(self, tokens: frozenset[str] | set[str]) -> np.ndarray:
        shared = np.zeros(len(self.owner), dtype=np.float32)
        for token in tokens:
            ids = self.postings.get(token)
            if ids is not None:
                shared[ids] += 1
        return shared

    def messages(self) -> list[set[str]]:
        """Each quoted message's tokens, by message number."""
        tokens: list[set[str]] = [set() for _ in range(len(self.owner))]
        for token, ids in self.postings.items():
            for index in ids:
                tokens[int(index)].add(token)
        return tokens

    def specific(self, document_of: np.ndarray, share: float = GENERIC_SHARE, longer: float = GENERIC_LONGER,
                 documents: int = GENERIC_DOCUMENTS) -> np.ndarray:
        """Per message: 1.0 unless it is the common head of other messages (``document_of``: chunk -> document
        number). A message most of which (``share``) is inside longer messages (``longer`` times its length)
        quoted by ``documents`` other documents is the generic part those failures share, as
        ``torch.distributed.DistBackendError: NCCL error`` heads a duplicate GPU, an interface error and a lost
        peer alike: a question showing it quotes none of them."""
        mask = np.ones(len(self.owner), dtype=np.float32)
        owners = document_of[self.owner] if len(self.owner) else self.owner
        for index, tokens in enumerate(self.messages()):
            inside = (self._shared(tokens) >= share * self.length[index]) & (self.length >= longer * self.length[index])
            others = set(owners[inside].tolist()) - {int(owners[index])}
            if len(others) >= documents:
                mask[index] = 0.0
        return mask


@dataclass
class KnowledgeSnapshot:
    version: str
    chunks: list[StoredChunk]
    bm25: BM25Index
    heading_bm25: BM25Index
    signatures: SignatureIndex
    families: np.ndarray  # chunks x catalogue families: does the chunk cover the family?
    boilerplate: np.ndarray  # navigation sections (related files, contacts, see also): not answers
    format: str = ""
    vectors: np.ndarray | None = None  # chunks x dims, unit length: dense search without opening the store
    embed_model: str = ""  # the model the vectors come from

    def nearest(self, vector: np.ndarray, limit: int) -> list[tuple[str, float]]:
        """(chunk id, cosine similarity) of the nearest chunks, from the snapshot's own vectors."""
        if self.vectors is None or not len(self.chunks):
            return []
        similarity = self.vectors @ np.asarray(vector, dtype=np.float32)
        limit = min(limit, len(similarity))
        top = np.argpartition(-similarity, limit - 1)[:limit]
        top = top[np.argsort(-similarity[top])]
        return [(self.chunks[i].chunk_id, float(similarity[i])) for i in top]

    def similarities(self, vector: np.ndarray, limit: int) -> np.ndarray | None:
        """Per chunk, in the snapshot's order: the cosine similarity for the ``limit`` nearest, 0 for the rest (what
        ``nearest`` gives, as an array: no tuple or id lookup per chunk when ``limit`` is most of a 20k corpus)."""
        if self.vectors is None or not len(self.chunks):
            return None
        similarity = self.vectors @ np.asarray(vector, dtype=np.float32)
        limit = min(limit, len(similarity))
        if limit >= len(similarity):
            return similarity
        scores = np.zeros_like(similarity)
        top = np.argpartition(-similarity, limit - 1)[:limit]
        scores[top] = similarity[top]
        return scores

    def position(self) -> dict[str, int]:
        return {c.chunk_id: i for i, c in enumerate(self.chunks)}


def signature(line: str) -> frozenset[str]:
    return frozenset(t for t in tokenize(normalise(line)) if t != "#")


def _code_error_lines(text: str) -> list[str]:
    lines: list[str] = []
    in_fence = False
    for line in text.splitlines():
        if line.strip().startswith("```"):
            in_fence = not in_fence
            continue
        if in_fence or "`" in line:
            lines.append(line.replace("`", " "))
    return error_lines(lines, limit=20)


VectorsFor = Callable[[Sequence[str]], "np.ndarray | None"]  # chunk ids -> their vectors, row by row (or None)


def build_snapshot(chunks: Sequence[StoredChunk], version: str, vectors_for: VectorsFor | None = None,
                   embed_model: str = "") -> KnowledgeSnapshot:
    """``vectors_for`` is asked once, for every chunk in the snapshot's order (the store fills one matrix)."""
    ordered = sorted(chunks, key=lambda c: (c.source, c.section, c.part))
    documents = (tokenize(f"{c.section}\n{c.text}") for c in ordered)  # one at a time: BM25Index reads them once
    headings = (tokenize(c.section.split(PATH_SEPARATOR, 1)[-1]) for c in ordered)
    signatures = [
        [s for s in (signature(line) for line in _code_error_lines(c.text)) if len(s) >= 3] for c in ordered
    ]
    names = [f.name for f in catalogue()]
    families = np.zeros((len(ordered), len(names)), dtype=bool)
    for row, chunk in enumerate(ordered):
        for name in covered(f"{chunk.section}\n{chunk.text}"):
            families[row, names.index(name)] = True
    navigation = re.compile(_glossary_data()["boilerplate_headings"], re.IGNORECASE)
    boilerplate = np.array([bool(navigation.match(c.section.split(PATH_SEPARATOR)[-1].strip())) for c in ordered])
    sources = {c.source for c in ordered}  # a document is one whatever its languages (a rendering is its original)
    numbers: dict[str, int] = {}
    document_of = np.array([numbers.setdefault(original_source(c.source, sources) or c.source, len(numbers))
                            for c in ordered], dtype=np.int32)
    index = SignatureIndex(signatures, document_of)
    matrix = vectors_for([c.chunk_id for c in ordered]) if vectors_for is not None and ordered else None
    if matrix is not None:
        matrix /= np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12)
    return KnowledgeSnapshot(
        version, list(ordered), BM25Index(documents), BM25Index(headings), index, families,
        boilerplate, snapshot_format(), matrix, embed_model if matrix is not None else "",
    )


def _glossary_data() -> dict:  # type: ignore[type-arg]
    from importlib import resources

    return json.loads(resources.files("corpus").joinpath("data/glossary.json").read_text(encoding="utf-8"))


def snapshot_format() -> str:
    import hashlib

    glossary = hashlib.sha256(json.dumps(_glossary_data(), sort_keys=True).encode()).hexdigest()[:8]
    return f"{FORMAT}-{catalogue_version()}-{glossary}"


def write_snapshot(settings: Settings, chunks: Sequence[StoredChunk], version: str,
                   vectors_for: VectorsFor | None = None, embed_model: str = "") -> KnowledgeSnapshot:
    snapshot = build_snapshot(chunks, version, vectors_for, embed_model)
    target = snapshot_path(settings)
    try:
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".chunks-")
        with os.fdopen(fd, "wb") as handle:
            pickle.dump(snapshot, handle, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, target)
    except OSError as exc:
        # a read-only data folder (a shared install) is expected: the snapshot is rebuilt in memory each run
        (log.debug if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM) else log.warning)(
            "could not cache the lexical index at %s: %s", target, exc)
    return snapshot


def _version_path(settings: Settings) -> Path:
    return settings.data_dir / "store-version"


def record_store_version(settings: Settings, version: str) -> None:
    """What the local store holds, written by the indexer: a cold query compares it with the snapshot's
    and, when they agree, never opens the store."""
    try:
        _version_path(settings).write_text(version, encoding="utf-8")
    except OSError as exc:
        (log.debug if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM) else log.warning)(
            "could not record the index version: %s", exc)


def current_without_store(settings: Settings, snapshot: KnowledgeSnapshot | None, embed_model: str) -> bool:
    """The snapshot answers alone: a local store at the snapshot's version, vectors of this model."""
    if snapshot is None or snapshot.vectors is None or settings.chroma_url is not None:
        return False
    try:
        recorded = _version_path(settings).read_text(encoding="utf-8").strip()
    except OSError:
        return False
    return recorded == snapshot.version and snapshot.embed_model == embed_model


def read_snapshot(settings: Settings) -> KnowledgeSnapshot | None:
    try:
        with snapshot_path(settings).open("rb") as handle:
            snapshot = pickle.load(handle)
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError, TypeError, ValueError):
        return None
    if not isinstance(snapshot, KnowledgeSnapshot) or getattr(snapshot, "format", None) != snapshot_format():
        return None
    return snapshot
