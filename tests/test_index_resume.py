"""An interrupted `traindoc index` continues where it stopped: a real build with the real default model, stopped
by kill -9 and then by Ctrl-C (SIGINT) while it embeds, and finished by a third run that embeds only the rest."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

from clikit import BIN, ROOT, builtin_corpus, chunk_total, chunks_embedded, isolated_env

from corpus.chunking import chunk_document
from corpus.indexer import BATCH

SECTIONS = BATCH * 2 + 40  # three batches: two interruptions, then the rest
BOUND_S = 900  # for any one step of a build on a machine busy with other work


def _runbook(path: Path) -> Path:
    sections = "".join(f"\n## Case {i}\n\nRank {i} stops at step {i * 7}: check host node-{i % 13}.\n"
                       for i in range(SECTIONS))
    path.write_text("# Field notes\n" + sections, encoding="utf-8")
    return path


def _shards(data: Path) -> list[Path]:
    return sorted((data / "cache").glob("embeddings-*.part-*.npz"))


def _default_sigint() -> None:
    """A job started in the background (nohup, `&`) inherits SIGINT ignored, and Python then never turns it into
    KeyboardInterrupt: the child gets the default a user's terminal gives."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _interrupt_after_a_new_shard(env: dict[str, str], data: Path, sig: signal.Signals) -> subprocess.CompletedProcess:
    """Start `traindoc index`, wait until it has flushed one more batch, then send ``sig`` to its process group."""
    before = len(_shards(data))
    process = subprocess.Popen([str(BIN / "traindoc"), "index"], env=env, cwd=ROOT, stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                               preexec_fn=_default_sigint)
    try:
        # Waits for the event (a shard flushed), within a bound generous enough for a loaded machine: the test's
        # verdict never depends on how fast the build embeds.
        deadline = time.monotonic() + BOUND_S
        while len(_shards(data)) <= before and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert process.poll() is None, f"the build finished before it could be interrupted: {process.stdout}"
        assert len(_shards(data)) > before, f"no batch was flushed within {BOUND_S} s"
        os.killpg(process.pid, sig)
        stdout, stderr = process.communicate(timeout=BOUND_S)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def test_an_interrupted_build_continues_where_it_stopped(tmp_path: Path) -> None:
    env = isolated_env(tmp_path)
    docs = tmp_path / "runbooks"
    docs.mkdir()
    book = _runbook(docs / "field-notes.md")
    env["TRAINDOC_CORPUS"] = str(docs)
    data = Path(env["TRAINDOC_DATA_DIR"])

    killed = _interrupt_after_a_new_shard(env, data, signal.SIGKILL)
    assert killed.returncode == -signal.SIGKILL

    stopped = _interrupt_after_a_new_shard(env, data, signal.SIGINT)
    assert stopped.returncode == 130, stopped.stderr
    assert stopped.stderr.strip().splitlines()[-1].startswith("traindoc: index interrupted"), stopped.stderr
    assert "run `traindoc index` again" in stopped.stderr and "Traceback" not in stopped.stderr

    finished = subprocess.run([str(BIN / "traindoc"), "index"], env=env, cwd=ROOT, stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=BOUND_S, check=False)
    assert finished.returncode == 0, finished.stderr
    expected = chunk_document(book.read_text(encoding="utf-8"), "x", title=book.stem)
    # The two interrupted runs embedded at least a batch each. The last run reuses that work, either as documents
    # the interrupted runs had already stored (counted unchanged) or as shards in the embedding cache (the summary
    # names those, and says nothing of the cache when every reused batch had become a stored document): what it
    # embeds afresh falls short of the whole index by at least those two batches.
    reused = re.search(r"(\d+) of them from the embedding cache", finished.stdout)
    total = chunk_total(finished.stdout)
    fresh = chunks_embedded(finished.stdout) - (int(reused.group(1)) if reused else 0)
    assert total == len(expected) + builtin_corpus()[1], finished.stdout
    assert 0 < fresh <= total - 2 * BATCH, finished.stdout
    assert not _shards(data), "a completed build folds its shards into the cache"

    # The file the build stopped in the middle of is whole now: every section of it answers.
    again = subprocess.run([str(BIN / "traindoc"), "index"], env=env, cwd=ROOT, stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, timeout=BOUND_S, check=False)
    assert re.search(r"0 added, 0 updated, 0 removed", again.stdout), again.stdout
    answer = subprocess.run([str(BIN / "ask"), "--json", "--no-probes", f"Rank {SECTIONS - 3} stops at step"],
                            env=env, cwd=ROOT, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                            timeout=BOUND_S, check=False)
    assert answer.returncode == 0, answer.stderr
    assert f"Case {SECTIONS - 3}" in answer.stdout
