"""Vectors by content: a chunk whose text was embedded before (by this model) is not embedded again.

Two layers: vectors shipped for the built-in documents (corpus/data/embeddings-<model>.npz, so a fresh
install indexes the seeds without loading a model) and a cache in the data directory that grows with
every run (so `--rebuild` and edits to one section of a runbook re-embed only what changed).

A build flushes what it embedded to a small shard file beside the cache after every batch (``flush``), so an
interrupted build (Ctrl-C, kill -9, a full disk) loses at most one batch: the next run reads the shards and
embeds only the rest. ``save`` folds the shards into the cache file when a build completes. The cache holds what
the team's documents say, as vectors: its files are 0600 in a 0700 folder (``corpus.private_files``); the shipped
files are the repository's, 0644.
Regenerate the shipped files with `python -m corpus.ship_vectors` after editing the built-in documents.
"""

from __future__ import annotations

import errno
import hashlib
import logging
import os
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

from common.private import FILE_MODE, FOLDER_MODE
from corpus import BUILTIN_DIR
from corpus.embedding import Embedder, in_calls

log = logging.getLogger(__name__)


def text_key(model: str, text: str) -> str:
    return hashlib.sha1(f"{model}\x00{text}".encode()).hexdigest()


def shipped_path(model: str) -> Path:
    return BUILTIN_DIR / "data" / f"embeddings-{model.replace('/', '_')}.npz"


# What one call to the model embeds at most, unless the model says otherwise (``call_chars``; a longer text goes
# alone). A model that runs in C sees Ctrl-C only when a call returns: calls this small (about half a second on two
# cores) let `traindoc index` stop within a second. The e5 embedder takes bigger calls (its batch engine runs in
# torch, where Ctrl-C is seen between two operations). What was embedded before the interruption is kept (``flush``).
CALL_CHARS = 2_000


def _calls(items: list[tuple[str, str]], limit: int = CALL_CHARS) -> Iterator[list[tuple[str, str]]]:
    """``items`` (key, text) sorted by length (a batch of like lengths pads little), in groups of at most ``limit``
    characters, at least one item each."""
    return in_calls(sorted(items, key=lambda item: len(item[1])), lambda item: len(item[1]), limit)


class EmbeddingCache:
    def __init__(self, model: str, path: Path | None) -> None:
        self.model = model
        self.path = path
        self._vectors: dict[str, np.ndarray] = {}
        self._dirty = False
        self._unflushed: dict[str, np.ndarray] = {}
        self.embedded = 0  # texts this cache sent to the model (the rest were known)
        self.reused = 0  # texts answered from the cache
        for source in (shipped_path(model), path, *self._shards()):
            if source is not None and source.exists():
                self._load(source)

    def _shards(self) -> list[Path]:
        if self.path is None or not self.path.parent.exists():
            return []
        return sorted(self.path.parent.glob(f"{self.path.stem}.part-*.npz"))

    def missing(self, texts: Sequence[str]) -> int:
        """How many distinct ``texts`` would go to the model."""
        return len({k for k in (text_key(self.model, t) for t in texts) if k not in self._vectors})

    def _load(self, source: Path) -> None:
        try:
            with np.load(source, allow_pickle=False) as data:
                for key, vector in zip(data["keys"], data["vectors"].astype(np.float16), strict=True):
                    self._vectors[str(key)] = vector
        except (OSError, ValueError, KeyError) as exc:
            log.warning("ignored an unreadable embedding cache %s: %s", source, exc)

    def embed(self, embedder: Embedder, texts: Sequence[str]) -> np.ndarray:
        keys = [text_key(self.model, t) for t in texts]
        first: dict[str, int] = {}  # a text repeated in the batch goes to the model once
        for i, key in enumerate(keys):
            if key not in self._vectors:
                first.setdefault(key, i)
        self.reused += len(keys) - len(first)
        limit = (getattr(embedder, "call_chars", None) or CALL_CHARS) if first else CALL_CHARS
        for call in _calls([(key, texts[i]) for key, i in first.items()], limit):
            fresh = embedder.embed([text for _, text in call])
            for (key, _), vector in zip(call, fresh, strict=True):
                # float16, as the cache file keeps them: half the memory of a big build, the same vectors again
                self._vectors[key] = self._unflushed[key] = np.asarray(vector, dtype=np.float16)
            self.embedded += len(call)
            self._dirty = True
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack([self._vectors[k] for k in keys]).astype(np.float32)

    def flush(self) -> None:
        """Write what was embedded since the last flush to a new shard (cheap: only the new vectors)."""
        if self.path is None or not self._unflushed:
            return
        number = len(self._shards())
        write_vectors(self.path.with_name(f"{self.path.stem}.part-{number:05d}-{os.getpid()}.npz"), self._unflushed,
               compress=False)
        self._unflushed = {}

    def save(self, keep: set[str] | None = None) -> None:
        """Write the cache (only the keys still in use when ``keep`` is given) and fold the shards into it."""
        if self.path is None:
            return
        shards = self._shards()
        if self._dirty or shards:
            if not write_vectors(self.path, {k: v for k, v in self._vectors.items() if keep is None or k in keep}):
                return
        for shard in shards:
            shard.unlink(missing_ok=True)
        self._unflushed = {}


def write_vectors(path: Path, vectors: dict[str, np.ndarray], compress: bool = True, mode: int = FILE_MODE) -> bool:
    """Replace ``path`` with ``vectors`` at once, as a file of ``mode`` (a cache's: 0600; the shipped files pass
    0644); False when it could not be written."""
    tmp: str | None = None
    try:
        path.parent.mkdir(mode=FOLDER_MODE, parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".emb-", suffix=".npz")
        os.close(fd)
        keys = np.array(sorted(vectors), dtype="U40")
        matrix = np.zeros((len(keys), len(next(iter(vectors.values()))) if vectors else 1), dtype=np.float16)
        for row, key in enumerate(keys):  # row by row: no float32 copy of the whole cache
            matrix[row] = vectors[key]
        (np.savez_compressed if compress else np.savez)(tmp, keys=keys, vectors=matrix)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
        return True
    except OSError as exc:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)  # half a file: on a full disk, the space the index needs
        # A full disk: the store's write says so, in the one line `traindoc index` ends with (DiskFullError).
        (log.info if exc.errno in (errno.ENOSPC, errno.EDQUOT) else log.warning)(
            "could not write the embedding cache %s: %s", path, exc)
        return False
