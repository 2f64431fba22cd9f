"""`traindoc index` under a careless or hostile load (issue 27): a second run says at once what it waits for and
for how long, then proceeds or stops with one line; many small files are stored a batch at a time and an
interrupted batch is picked up again; a full disk is said as such, never as a damaged index, and nothing is
rebuilt for it (a real tiny tmpfs where this machine lets us mount one, else ENOSPC injected at the store)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from clikit import BIN, ROOT, chunk_total

NOISE = ("Traceback", "panicked", "damaged", "rebuilding", "integrity")
DISK_FULL = "has no space left; free space or set TRAINDOC_DATA_DIR"


def _run(*argv: str, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL, cwd=ROOT, timeout=timeout,
                          env={**os.environ, **(env or {})}, check=False)


def _lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.strip()]


def _big_document(folder: Path, sections: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "field-notes.md"
    path.write_text("# Field notes\n" + "".join(
        f"\n## Case {i}\n\nRank {i} stalls at step {i * 7} on host node-{i % 13}; the watchdog fires after "
        f"{600 + i} s while NCCL waits on socket eth{i % 4}.\n" for i in range(sections)), encoding="utf-8")
    return path


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


# --- the lock ------------------------------------------------------------------------------------------------


def test_a_second_index_run_says_who_holds_the_lock_and_how_long_it_waits(index_copy: Path, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    _big_document(docs, 600)  # a minute of the model: the first run holds the lock all along
    holder = subprocess.Popen([str(BIN / "traindoc"), "index"], env={**os.environ, "TRAINDOC_CORPUS": str(docs)},
                              cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, start_new_session=True, preexec_fn=_default_sigint)
    record = index_copy / "index.lock.json"
    try:
        deadline = time.monotonic() + 120
        while holder.poll() is None and time.monotonic() < deadline:
            if record.exists() and json.loads(record.read_text(encoding="utf-8") or "{}").get("pid") == holder.pid:
                break
            time.sleep(0.05)
        assert holder.poll() is None, holder.communicate()

        refused = _run(str(BIN / "traindoc"), "index", env={"TRAINDOC_LOCK_TIMEOUT": "1.5"})
        assert refused.returncode == 1, refused.stderr
        waiting, error = _lines(refused.stderr)
        assert waiting.startswith("traindoc: ") and f"pid {holder.pid} (`traindoc index`" in waiting, waiting
        assert "waiting up to 1.5 s" in waiting and "TRAINDOC_LOCK_TIMEOUT" in waiting, waiting
        assert error.startswith("traindoc: error: ") and f"pid {holder.pid}" in error and "1.5 s" in error, error
        assert "Traceback" not in refused.stderr

        # A question that would index the changed corpus first says the same, then answers from the index it has.
        asked = _run(str(BIN / "ask"), "--json", "--no-probes", "why does NCCL hang",
                     env={"TRAINDOC_LOCK_TIMEOUT": "1.5", "TRAINDOC_CORPUS": str(docs)})
        assert asked.returncode == 0, asked.stderr
        assert any(f"pid {holder.pid} (`traindoc index`" in line and "waiting up to 1.5 s" in line
                   for line in _lines(asked.stderr)), asked.stderr
        assert f"pid {holder.pid}" in json.loads(asked.stdout)["notice"]

        waiter = subprocess.Popen([str(BIN / "traindoc"), "index"], env={**os.environ, "TRAINDOC_LOCK_TIMEOUT": "120"},
                                  cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True)
        assert waiter.stderr is not None
        said = waiter.stderr.readline()  # at once, while the lock is still held
        assert f"pid {holder.pid}" in said and "waiting up to 120 s" in said, said
        os.killpg(holder.pid, signal.SIGINT)
        holder.communicate(timeout=60)
        out, rest = waiter.communicate(timeout=300)
        assert waiter.returncode == 0, said + rest
        assert "0 added" in out and not _lines(rest), rest  # proceeded once the lock was free: nothing more to say
        assert not record.exists(), "the holder's record goes with its lock"
    finally:
        if holder.poll() is None:
            os.killpg(holder.pid, signal.SIGKILL)
            holder.wait()


# --- batching across files -----------------------------------------------------------------------------------


def _notes(folder: Path, count: int, salt: str = "") -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(count):
        path = folder / f"note-{i:03d}.md"
        path.write_text(f"# Note {i}\n\nRank {i} stops at step {i * 7}{salt}: check host node-{i % 13}.\n",
                        encoding="utf-8")
        paths.append(path)
    return paths


def test_small_files_share_store_writes_and_an_interrupted_batch_is_stored_next_time(
        index_copy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from common.settings import Settings
    from corpus import indexer
    from corpus.embedding import make_embedder
    from corpus.store import VectorStore

    monkeypatch.setattr(indexer, "BATCH", 8)
    docs = tmp_path / "notes"
    notes = _notes(docs, 20)
    monkeypatch.setenv("TRAINDOC_CORPUS", str(docs))
    settings = Settings.from_env()
    model = make_embedder(settings.embed_model, settings.cache_dir)
    writes: list[set[str]] = []
    upsert = VectorStore.upsert

    def counted(self, chunks, embeddings, parts=None):  # type: ignore[no-untyped-def]
        writes.append({c.source for c in chunks})
        return upsert(self, chunks, embeddings, parts)

    monkeypatch.setattr(VectorStore, "upsert", counted)

    class CtrlCInTheSecondBatch:  # the user's Ctrl-C, while the model embeds the second batch
        name = model.name

        def __init__(self) -> None:
            self.calls = 0

        def embed(self, texts):  # type: ignore[no-untyped-def]
            self.calls += 1
            if writes and len(writes) == 1:
                raise KeyboardInterrupt
            return model.embed(texts)

    with pytest.raises(KeyboardInterrupt):
        indexer.build_index(settings, CtrlCInTheSecondBatch, progress=False)
    assert len(writes) == 1 and len(writes[0]) == 8, "the first 8 files went to the store in one write"

    writes.clear()
    report = indexer.build_index(settings, lambda: model, progress=False)
    assert len(report.added) == 12 and not report.updated, report.summary()
    assert len(writes) == 2 and all(len(sources) <= 8 for sources in writes)  # 12 files: two writes, not twelve
    stored = VectorStore(settings, model, create=False).file_hashes()
    names = {n.name for n in notes}
    complete = {Path(source).name for source, (file_hash, ids) in stored.items() if file_hash and len(ids) == 1}
    assert names <= complete, names - complete

    notes[3].write_text("# Note 3\n\nRank 3 stops at step 21: the link flaps.\n\n## More\n\nReseat the cable.\n",
                        encoding="utf-8")
    writes.clear()
    changed = indexer.build_index(settings, lambda: model, progress=False)
    assert len(changed.updated) == 1 and changed.chunks_written == 2 and len(writes) == 1
    stored = VectorStore(settings, model, create=False).file_hashes()
    assert [len(ids) for source, (_, ids) in stored.items() if source.endswith("note-003.md")] == [2]


# --- a full disk ---------------------------------------------------------------------------------------------


def _can_mount_tmpfs(tmp_path: Path) -> bool:
    point = tmp_path / "probe-mount"
    point.mkdir()
    try:
        probe = subprocess.run(["unshare", "-m", "sh", "-c", f"mount -t tmpfs -o size=64k tmpfs '{point}'"],
                               capture_output=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return probe.returncode == 0


_ON_A_SMALL_DISK = textwrap.dedent("""
    set -u
    mount -t tmpfs -o size=256m tmpfs "$MOUNT"
    cp -a "$INDEX" "$MOUNT/data"
    used=$(du -sk "$MOUNT" | cut -f1)
    mount -o remount,size=$((used + 150))k "$MOUNT"   # the index fits, with 150 KiB to spare
    for run in 1 2; do
        "$BIN/traindoc" index > "$OUT/index-$run.out" 2> "$OUT/index-$run.err"; echo $? > "$OUT/index-$run.rc"
    done
    "$BIN/ask" --no-probes --json "why does NCCL hang" > "$OUT/ask.out" 2> "$OUT/ask.err"; echo $? > "$OUT/ask.rc"
    mount -o remount,size=256m "$MOUNT"   # space freed
    "$BIN/traindoc" index > "$OUT/index-3.out" 2> "$OUT/index-3.err"; echo $? > "$OUT/index-3.rc"
""")


def test_a_full_disk_during_index_says_disk_full_and_nothing_is_rebuilt(index_copy: Path, tmp_path: Path) -> None:
    if not _can_mount_tmpfs(tmp_path):
        pytest.skip("no mount namespace here (needs root or user namespaces): the injected ENOSPC test covers it")
    docs = tmp_path / "docs"
    book = _big_document(docs, 120)  # chunks, vectors and their cache: more than the 150 KiB the disk has left
    out = tmp_path / "out"
    out.mkdir()
    mount = tmp_path / "small-disk"
    mount.mkdir()
    base = chunk_total((index_copy / "build-report.txt").read_text(encoding="utf-8"))
    env = {**os.environ, "MOUNT": str(mount), "INDEX": str(index_copy), "OUT": str(out), "BIN": str(BIN),
           "TRAINDOC_DATA_DIR": str(mount / "data"), "TRAINDOC_CORPUS": str(docs)}
    subprocess.run(["unshare", "-m", "sh", "-c", _ON_A_SMALL_DISK], env=env, cwd=ROOT, timeout=900, check=True,
                   stdin=subprocess.DEVNULL)

    def said(name: str) -> tuple[int, str, str]:
        return (int((out / f"{name}.rc").read_text()), (out / f"{name}.out").read_text(),
                (out / f"{name}.err").read_text())

    for run in ("index-1", "index-2"):
        code, _, stderr = said(run)
        assert code == 1, (run, stderr)
        lines = _lines(stderr)
        assert len(lines) == 1 and lines[0].startswith("traindoc: error: disk full: "), (run, stderr)
        assert DISK_FULL in lines[0] and str(mount / "data") in lines[0]
        assert not any(word in stderr for word in NOISE), stderr
    code, stdout, stderr = said("ask")
    if code != 0:  # the index it has answers; a write the answer needs may fail for the disk too, then says so
        assert code == 1 and len(_lines(stderr)) == 1 and DISK_FULL in stderr, stderr
    assert not any(word in stderr + stdout for word in NOISE), stderr
    code, stdout, stderr = said("index-3")
    assert code == 0, stderr
    assert not any(word in stderr for word in NOISE), stderr  # the store was never damaged: nothing rebuilt
    from corpus.chunking import chunk_document

    assert chunk_total(stdout) == base + len(chunk_document(book.read_text(encoding="utf-8"), "x", title=book.stem))


_INJECTED = textwrap.dedent("""
    import sys
    from chromadb.api.models.Collection import Collection
    from chromadb.errors import InternalError

    def full(self, *args, **kwargs):  # the disk: what chromadb's Rust core says when SQLite finds it full
        raise InternalError("Error executing plan: error returned from database: (code: 13) database or disk is full")

    Collection.upsert = full
    from traindoc_cli.main import traindoc_main
    sys.exit(traindoc_main(["index"]))
""")


def test_an_injected_enospc_in_the_store_says_disk_full_and_the_next_run_finishes(index_copy: Path,
                                                                                  tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "page.md").write_text("# Page\n\n## Disk\n\nENOSPC on checkpoint save.\n", encoding="utf-8")
    env = {"TRAINDOC_CORPUS": str(docs)}
    full = _run(sys.executable, "-c", _INJECTED, env=env)
    assert full.returncode == 1, full.stderr
    lines = _lines(full.stderr)
    assert len(lines) == 1 and lines[0] == f"traindoc: error: disk full: {index_copy / 'chroma'} {DISK_FULL}", lines
    again = _run(str(BIN / "traindoc"), "index", env=env)
    assert again.returncode == 0 and "1 added" in again.stdout, again.stderr
    assert not any(word in again.stderr for word in NOISE), again.stderr


def test_enospc_is_recognised_in_every_form_it_reaches_the_boundary_in() -> None:
    import errno
    import sqlite3

    from corpus.store import no_space

    wrapped = RuntimeError("cannot write")
    wrapped.__cause__ = OSError(errno.ENOSPC, "No space left on device")
    assert no_space(OSError(errno.ENOSPC, "No space left on device"))
    assert no_space(OSError(errno.EDQUOT, "Disk quota exceeded"))
    assert no_space(sqlite3.OperationalError("database or disk is full"))
    assert no_space(wrapped)
    assert no_space(RuntimeError("hnsw: failed to persist: No space left on device (os error 28)"))
    assert not no_space(OSError(errno.EACCES, "Permission denied"))
    assert not no_space(sqlite3.DatabaseError("database disk image is malformed"))
