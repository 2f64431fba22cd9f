"""The dense signal is scaled per question, relative to the question's nearest chunks (corpus.retrieval._relative)."""

from __future__ import annotations

import numpy as np

from corpus.retrieval import _absolute, _relative


def test_the_nearest_chunk_counts_one_and_the_median_of_the_nearest_zero() -> None:
    # e5-like cosines: every chunk between 0.78 and 0.90; 0 marks chunks outside the nearest (no cosine)
    cosine = np.array([0.90, 0.88, 0.84, 0.80, 0.79, 0.78, 0.0, 0.0], dtype=np.float32)
    relative = _relative(cosine, 50.0)
    assert relative[0] == 1.0 and relative[6] == 0.0 and relative[7] == 0.0
    assert np.all(relative[3:6] == 0.0)  # at or under the median (0.82) of the six nearest
    assert 0.0 < relative[2] < relative[1] < 1.0
    # The fixed scale leaves these nearly flat: the nearest and the sixth differ by a seventh of the range
    absolute = _absolute(cosine, 0.15)
    assert absolute[0] - absolute[5] < 0.15 < relative[0] - relative[5]


def test_no_nearest_chunk_and_equal_cosines_are_handled() -> None:
    assert not _relative(np.zeros(4, dtype=np.float32), 50.0).any()
    flat = _relative(np.array([0.8, 0.8, 0.0], dtype=np.float32), 50.0)
    assert flat.tolist() == [1.0, 1.0, 0.0]


def test_the_snapshots_aligned_similarities_are_its_nearest_chunks_scattered_in_chunk_order() -> None:
    """Retriever._cosines reads the snapshot's own vectors as one array (no tuple per chunk for a search that skips
    most of a 20k corpus): the same cosines, at the same chunks, as ``nearest`` gives."""
    from corpus.snapshot import KnowledgeSnapshot, StoredChunk

    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(300, 16)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    chunks = [StoredChunk.__new__(StoredChunk) for _ in range(300)]
    for i, chunk in enumerate(chunks):
        object.__setattr__(chunk, "chunk_id", f"c{i}")
    snapshot = KnowledgeSnapshot.__new__(KnowledgeSnapshot)  # only what the dense search reads
    object.__setattr__(snapshot, "chunks", chunks)
    object.__setattr__(snapshot, "vectors", vectors)
    query = vectors[7] + 0.1 * rng.normal(size=16).astype(np.float32)
    for limit in (1, 60, 299, 300, 1000):
        aligned = snapshot.similarities(query, limit)
        assert aligned is not None
        expected = np.zeros(300, dtype=np.float32)
        for chunk_id, similarity in snapshot.nearest(query, limit):
            expected[int(chunk_id[1:])] = similarity
        np.testing.assert_allclose(aligned, expected, rtol=1e-6)
