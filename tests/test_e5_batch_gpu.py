"""The e5 batch engine on a real GPU (issue 39 point 3: the first build uses the GPU when torch sees one), skipped where
there is none (here: torch is a CPU build). Run on a lent GPU machine: `pytest -m gpu tests/test_e5_batch_gpu.py`."""

from __future__ import annotations

import numpy as np
import pytest


def _cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not _cuda(), reason="no CUDA GPU here")]


def test_the_gpu_gives_the_c_engine_s_vectors_in_the_texts_order() -> None:
    from corpus.e5_batch import E5Batch
    from corpus.embedding import E5Embedder

    texts = [f"rank {i} waits in all_reduce after the NCCL watchdog fired ({'x' * (i * 37 % 400)})" for i in range(200)]
    texts += ["显存不足怎么办？CUDA out of memory", " ".join(f"word{i} rank {i} stalls" for i in range(300))]
    gpu = E5Batch(device="cuda")
    assert gpu.device.type == "cuda"
    vectors = gpu.embed(texts)
    engine = E5Embedder()._model
    reference = np.stack([engine.passage(t) for t in texts[::20]])
    assert vectors.shape == (len(texts), 384)
    assert np.all(np.sum(vectors[::20] * reference, axis=1) > 0.999)


def test_an_embedder_on_a_gpu_machine_uses_it_for_a_big_call() -> None:
    from corpus.embedding import BATCH_MIN_TEXTS, E5Embedder

    embedder = E5Embedder()
    embedder.embed([f"chunk {i}: NCCL timeout on rank {i}" for i in range(BATCH_MIN_TEXTS)])
    assert embedder._batch is not None and embedder._batch.device.type == "cuda"
