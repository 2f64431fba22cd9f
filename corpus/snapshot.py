"""The local read model of the index: every chunk plus its lexical index, written after each `traindoc index`
run as one file laid out to be memory-mapped (corpus.packed), so a query never re-tokenises the corpus and a cold
one reads only what it touches: the postings of its words, the vectors, the texts of the sections it cites.
Keyed by the store's version: a snapshot that does not match (another machine re-indexed a shared Chroma server),
or of another format, is rebuilt from the store.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import re
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from common.settings import Settings
from corpus.chunking import PATH_SEPARATOR
from corpus.compiled import FRONT_MATTER, offer
from corpus.errorlines import error_lines, normalise
from corpus.families import catalogue, catalogue_version, covered
from corpus.lexical import BM25Index, tokenize
from corpus.packed import PackError, Postings, Strings, prefixed, read_pack, within, write_pack
from corpus.private_files import write_private_text
from corpus.renderings import original_source
from corpus.store import StoredChunk, snapshot_path

FORMAT = "10"  # 9: a memory-mapped pack (corpus.packed), no pickle; 10: an exception class is one word of a message
GENERIC_SHARE = 0.8  # share of a quoted message inside a longer one, for it to be that one's head
GENERIC_LONGER = 2.0  # how much longer the message it heads is
GENERIC_DOCUMENTS = 3  # how many other documents quote messages it heads, for it to be generic
log = logging.getLogger(__name__)


class _TokenLookup(Protocol):  # what SignatureIndex reads of its postings: a dict when built, _TokenPostings mapped
    def get(self, token: str) -> np.ndarray | None: ...

    def items(self) -> Iterable[tuple[str, np.ndarray]]: ...


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
        self.postings: _TokenLookup = {t: np.array(ids, dtype=np.int32) for t, ids in postings.items()}
        self.specific_mask = (self.specific(document_of) if document_of is not None
                              else np.ones(len(self.owner), dtype=np.float32))  # computed once, read by every query

    def packed(self) -> tuple[dict[str, int], dict[str, np.ndarray]]:
        """(parameters, arrays): the index as ``mapped`` reads it back from a pack (corpus.packed)."""
        arrays = {"owner": self.owner, "length": self.length, "specific": self.specific_mask,
                  **Postings.pack({t: (ids,) for t, ids in self.postings.items()}, (np.int32,))}
        return {"chunks": self.chunks}, arrays

    @classmethod
    def mapped(cls, parameters: Mapping[str, int], arrays: Mapping[str, np.ndarray], prefix: str = "") -> SignatureIndex:
        """Raises PackError when a message's chunk or a token's message is out of range (``best_shares`` indexes
        by them)."""
        index = cls.__new__(cls)
        index.chunks = int(parameters["chunks"])
        index.owner, index.length = arrays[f"{prefix}owner"], arrays[f"{prefix}length"]
        index.specific_mask = arrays[f"{prefix}specific"]
        postings = Postings.unpack(arrays, prefix)
        within(index.owner, index.chunks, f"{prefix}owner")
        if index.length.shape != index.owner.shape or index.specific_mask.shape != index.owner.shape:
            raise PackError(f"{prefix}length: not one per message")
        if len(postings.columns) != 1:
            raise PackError(f"{prefix}postings: not one column")
        within(postings.columns[0], len(index.owner), f"{prefix}postings")
        index.postings = _TokenPostings(postings)
        return index

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


class _TokenPostings:
    """A packed signature index's postings: token -> the messages that hold it."""

    def __init__(self, postings: Postings) -> None:
        self._postings = postings

    def get(self, token: str) -> np.ndarray | None:
        found = self._postings.get(token)
        return None if found is None else found[0]

    def items(self) -> Iterator[tuple[str, np.ndarray]]:
        return ((token, ids) for token, (ids,) in self._postings.items())


@dataclass
class KnowledgeSnapshot:
    version: str
    chunks: Sequence[StoredChunk]  # a list when built, a ChunkTable when read from the file
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


# An exception's class, with the modules that qualify it (``torch.distributed.DistBackendError``).
EXCEPTION_CLASS = re.compile(r"\b(?:[A-Za-z_]\w*\.)*([A-Z]\w*?(?:Error|Exception|Warning))\b")


def signature(line: str) -> frozenset[str]:
    """The words of an error line, as a set. An exception's class is one word (``runtimeerror``), not the three the
    tokenizer makes of it (``runtimeerror``, ``runtime``, ``error``): a message shares its class with every other
    message of that class, and three shared words from one name made ``RuntimeError: NCCL timeout`` look quoted in
    any ``RuntimeError``."""
    classes = {m.group(1).lower() for m in EXCEPTION_CLASS.finditer(line)}
    rest = EXCEPTION_CLASS.sub(" ", line) if classes else line
    return frozenset({t for t in tokenize(normalise(rest)) if t != "#"} | classes)


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
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".knowledge-")
        try:
            with os.fdopen(fd, "wb") as handle:
                write_pack(handle, *_packed(snapshot))
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        (target.parent / LEGACY_NAME).unlink(missing_ok=True)  # the pickled snapshot of format 8 and before
    except OSError as exc:
        # A read-only data folder (a shared install) is expected: the snapshot is rebuilt in memory each run. Any
        # other failure is said once a process: a question that indexes first writes it twice (the run's, its own).
        said = exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM) or target in _UNCACHED_SAID
        _UNCACHED_SAID.add(target)
        (log.debug if said else log.warning)("could not cache the lexical index at %s: %s", target, exc)
    return snapshot


LEGACY_NAME = "chunks.pkl"
_UNCACHED_SAID: set[Path] = set()  # snapshots this process could not write and said so


def _packed(snapshot: KnowledgeSnapshot) -> tuple[dict[str, object], dict[str, np.ndarray]]:
    """(header, arrays) of the pack: the chunks as columns (their repeated sources, sections and file hashes as
    tables of distinct values), the two BM25 indexes, the signature index, the per-chunk masks, the vectors."""
    chunks = snapshot.chunks
    arrays: dict[str, np.ndarray] = {}
    for column in ("source", "section", "file_hash"):
        values = [getattr(c, column) for c in chunks]
        distinct = list(dict.fromkeys(values))
        number = {value: i for i, value in enumerate(distinct)}
        arrays[f"{column}_of"] = np.array([number[v] for v in values], dtype=np.int32)
        arrays[f"{column}s"], arrays[f"{column}_offsets"] = Strings.pack(distinct)
    arrays["ids"], arrays["id_offsets"] = Strings.pack(c.chunk_id for c in chunks)
    arrays["texts"], arrays["text_offsets"] = Strings.pack(c.text for c in chunks)
    arrays["part"] = np.array([c.part for c in chunks], dtype=np.int32)
    bm25, bm25_arrays = snapshot.bm25.packed()
    heading, heading_arrays = snapshot.heading_bm25.packed()
    signatures, signature_arrays = snapshot.signatures.packed()
    arrays |= prefixed("bm25.", bm25_arrays) | prefixed("heading.", heading_arrays)
    arrays |= prefixed("signatures.", signature_arrays)
    arrays["families"] = np.asarray(snapshot.families, dtype=bool)
    arrays["boilerplate"] = np.asarray(snapshot.boilerplate, dtype=bool)
    if snapshot.vectors is not None:
        arrays["vectors"] = np.asarray(snapshot.vectors, dtype=np.float32)
    header = {"format": snapshot.format, "version": snapshot.version, "embed_model": snapshot.embed_model,
              "chunks": len(chunks), "bm25": bm25, "heading_bm25": heading, "signatures": signatures,
              "tables": _tables()}
    return header, arrays


def _tables() -> dict[str, object]:
    """What the answering code would otherwise parse at start, compiled (corpus.compiled): the runbooks' front matter."""
    from runbooks.catalog import compiled_front_matter

    try:
        return {FRONT_MATTER: compiled_front_matter()}
    except (OSError, UnicodeDecodeError) as exc:  # a runbook that cannot be read is parsed (and fails) where it is used
        log.debug("runbook front matter not compiled: %s", exc)
        return {}


class _MappedChunk(StoredChunk):
    """A chunk of a mapped snapshot: its text is decoded from the file the first time it is read."""

    def __getattr__(self, name: str) -> str:
        if name != "text" or "_texts" not in self.__dict__:
            raise AttributeError(name)
        text = self.__dict__["_texts"][self.__dict__["_row"]]
        object.__setattr__(self, "text", text)
        return text


class ChunkTable(Sequence[StoredChunk]):
    """The chunks of a mapped snapshot, in its order, each made when first asked for."""

    def __init__(self, arrays: Mapping[str, np.ndarray]) -> None:
        """Raises PackError when the columns are not one row per chunk or name a value the tables lack."""
        self._ids = Strings(arrays["ids"], arrays["id_offsets"])
        self._texts = Strings(arrays["texts"], arrays["text_offsets"])
        rows = len(self._ids)
        if len(self._texts) != rows or arrays["part"].shape != (rows,):
            raise PackError("chunks: not one text and part per chunk")
        self._part = arrays["part"].tolist()
        self._columns = {}
        for column in ("source", "section", "file_hash"):  # each distinct value made once: one string, many chunks
            distinct = Strings(arrays[f"{column}s"], arrays[f"{column}_offsets"])
            numbers = arrays[f"{column}_of"]
            if numbers.shape != (rows,):
                raise PackError(f"chunks: not one {column} per chunk")
            within(numbers, len(distinct), f"{column}_of")
            values = [distinct[i] for i in range(len(distinct))]
            self._columns[column] = [values[i] for i in numbers.tolist()]
        self._made: list[StoredChunk | None] = [None] * len(self._ids)

    def __len__(self) -> int:
        return len(self._made)

    def __getitem__(self, index):  # type: ignore[no-untyped-def, override]
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        chunk = self._made[index]
        if chunk is None:
            chunk = object.__new__(_MappedChunk)
            row = index + len(self) if index < 0 else index
            for name, value in (("chunk_id", self._ids[row]), ("source", self._columns["source"][row]),
                                ("section", self._columns["section"][row]),
                                ("file_hash", self._columns["file_hash"][row]), ("part", self._part[row]),
                                ("_texts", self._texts), ("_row", row)):
                object.__setattr__(chunk, name, value)
            self._made[index] = chunk
        return chunk

    def __iter__(self) -> Iterator[StoredChunk]:
        return (self[i] for i in range(len(self)))


def _mapped(header: Mapping[str, object], arrays: Mapping[str, np.ndarray]) -> KnowledgeSnapshot:
    """The snapshot of a pack; PackError when its parts do not agree on how many chunks there are (each indexes
    the others by chunk number). The families' columns are the catalogue's, whose version is in the format (and
    compiling the catalogue to count them would cost a cold question 20 ms)."""
    chunks = ChunkTable(arrays)
    rows = len(chunks)
    bm25 = BM25Index.mapped(header["bm25"], arrays, "bm25.")  # type: ignore[arg-type]
    heading = BM25Index.mapped(header["heading_bm25"], arrays, "heading.")  # type: ignore[arg-type]
    signatures = SignatureIndex.mapped(header["signatures"], arrays, "signatures.")  # type: ignore[arg-type]
    families, boilerplate, vectors = arrays["families"], arrays["boilerplate"], arrays.get("vectors")
    if (int(header["chunks"]) != rows or bm25.size != rows or heading.size != rows or signatures.chunks != rows  # type: ignore[call-overload]
            or families.ndim != 2 or len(families) != rows or boilerplate.shape != (rows,)
            or (vectors is not None and (vectors.ndim != 2 or len(vectors) != rows))):
        raise PackError(f"the snapshot's parts do not agree on its {rows} chunks")
    return KnowledgeSnapshot(
        str(header["version"]), chunks, bm25, heading, signatures, families, boilerplate, str(header["format"]),
        vectors, str(header.get("embed_model") or ""),
    )


def store_version_path(settings: Settings) -> Path:
    return settings.data_dir / "store-version"


def record_store_version(settings: Settings, version: str) -> None:
    """What the local store holds, written by the indexer: a cold query compares it with the snapshot's
    and, when they agree, never opens the store."""
    try:
        write_private_text(store_version_path(settings), version)
    except OSError as exc:
        (log.debug if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM) else log.warning)(
            "could not record the index version: %s", exc)


def current_without_store(settings: Settings, snapshot: KnowledgeSnapshot | None, embed_model: str) -> bool:
    """The snapshot answers alone: a local store at the snapshot's version, vectors of this model."""
    if snapshot is None or snapshot.vectors is None or settings.chroma_url is not None:
        return False
    try:
        recorded = store_version_path(settings).read_text(encoding="utf-8").strip()
    except OSError:
        return False
    return recorded == snapshot.version and snapshot.embed_model == embed_model


def read_snapshot(settings: Settings) -> KnowledgeSnapshot | None:
    """The snapshot of the last index run, mapped from its file; None when there is none, it is of another format
    (older code wrote it, or the glossary or the failure catalogue changed since) or it does not read whole: cut
    short, its checksum not matching (a byte changed anywhere: corpus.packed), or its arrays out of range of one
    another. None is what a missing snapshot is: the question rebuilds it from the store, and so does `traindoc
    index`."""
    try:
        header, arrays = read_pack(snapshot_path(settings))
        if header.get("format") != snapshot_format():
            return None
        snapshot = _mapped(header, arrays)
    except (OSError, PackError, KeyError, TypeError, ValueError) as exc:
        log.debug("no usable snapshot at %s: %s", snapshot_path(settings), exc)
        return None
    offer(header.get("tables") or {})
    return snapshot
