"""One line per failure: without --debug no traceback, Rust panic or library warning reaches stderr; every failure
is one line saying what failed and what to do, with a documented exit code. The index heals, or says the one
command that fixes it where traindoc runs; a read-only index answers."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from clikit import BIN, ROOT

NOISE = ("Traceback", "panicked", "RUST_BACKTRACE", "Warning", "warnings.warn", "stack backtrace")


def run(*argv: str, env: dict[str, str] | None = None, stdin: bytes | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, input=stdin.decode() if stdin is not None else None, capture_output=True, text=True,
                          stdin=None if stdin is not None else subprocess.DEVNULL, env={**os.environ, **(env or {})},
                          cwd=ROOT, timeout=180, check=False)


def one_line(result: subprocess.CompletedProcess[str], code: int) -> str:
    assert result.returncode == code, (result.returncode, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert not any(word in result.stderr for word in NOISE), result.stderr
    return lines[0]


@pytest.mark.parametrize(("argv", "code", "says"), [
    (("ask", ""), 2, "no question given"),
    (("ask", "--log", "/nonexistent/train.log", "why"), 1, "/nonexistent/train.log"),
    (("ask", "--no-probes", "--bundle", "/dev/zero", "why"), 1, "TRAINDOC_MAX_BUNDLE_MB"),
    (("ask", "--top-k", "0", "why"), 2, "--top-k"),
    (("traindoc", "probe", "--compare", "one.json"), 2, "at least two bundles"),
    (("traindoc", "index", "/nonexistent/runbooks"), 1, "no such file or folder"),
    (("traindoc", "frobnicate"), 2, "invalid choice"),
])
def test_bad_input_is_one_line_and_a_documented_exit_code(argv: tuple[str, ...], code: int, says: str,
                                                          use_shared_index: Path) -> None:
    line = one_line(run(str(BIN / argv[0]), *argv[1:], env={"RUST_BACKTRACE": "1"}), code)
    assert says in line


@pytest.mark.parametrize("variable", ["TRAINDOC_PROBE_TIMEOUT", "TRAINDOC_MAX_BUNDLE_MB", "TRAINDOC_SLACK_RATE"])
def test_a_setting_that_cannot_work_is_one_line(variable: str, use_shared_index: Path) -> None:
    line = one_line(run(str(BIN / "ask"), "--no-probes", "why", env={variable: "lots"}), 1)
    assert variable in line


def _damage(data: Path) -> None:
    with sqlite3.connect(data / "chroma" / "chroma.sqlite3") as db:
        db.execute("UPDATE collections SET config_json_str = 'garbage'")
    (data / "store-version").unlink(missing_ok=True)  # the snapshot alone no longer answers: the store is opened


def test_a_damaged_index_says_the_command_that_fixes_it_and_that_command_does(index_copy: Path) -> None:
    _damage(index_copy)
    line = one_line(run(str(BIN / "ask"), "--no-probes", "why is NCCL hanging", env={"RUST_BACKTRACE": "1"}), 1)
    assert "run `traindoc index`" in line and "--rebuild" not in line
    healed = run(str(BIN / "traindoc"), "index")
    assert healed.returncode == 0, healed.stderr
    assert "rebuilding it" in healed.stderr
    assert run(str(BIN / "ask"), "--no-probes", "why is NCCL hanging").returncode == 0


def test_plain_index_checks_sqlite_integrity(index_copy: Path) -> None:
    """The manifest agrees and the header is intact, but pages inside are garbage: plain `traindoc index` notices."""
    store = index_copy / "chroma" / "chroma.sqlite3"
    size = store.stat().st_size
    with store.open("r+b") as handle:
        handle.seek(size // 3)
        handle.write(os.urandom(size // 3))
    result = run(str(BIN / "traindoc"), "index")
    assert result.returncode == 0, result.stderr
    assert "failed its integrity check" in result.stderr
    assert json.loads(run(str(BIN / "ask"), "--json", "--no-probes", "NCCL timeout").stdout)["citations"]


_PANIC = textwrap.dedent("""
    import os, sys
    import chromadb
    from corpus import store

    def boom(*args, **kwargs):
        os.write(2, b"thread '<unnamed>' panicked at rust/sqlite/src/db.rs:42:9:\\nstack backtrace:\\n   0: rust_begin_unwind\\n")
        raise RuntimeError("PanicException: index out of bounds")

    chromadb.PersistentClient = boom
    from ui.cli import ask_main
    sys.exit(ask_main(sys.argv[1:]))
""")


@pytest.mark.parametrize("debug", [False, True], ids=["plain", "debug"])
def test_a_rust_panic_in_the_store_never_reaches_the_terminal(index_copy: Path, debug: bool) -> None:
    (index_copy / "store-version").unlink(missing_ok=True)
    argv = [sys.executable, "-c", _PANIC, *(["--debug"] if debug else []), "--no-probes", "why is NCCL hanging"]
    result = run(*argv, env={"RUST_BACKTRACE": "1"})
    if not debug:
        assert "cannot open the index" in one_line(result, 1)
    else:  # relayed to the debug log, not lost
        assert result.returncode == 1 and "chromadb wrote to stderr" in result.stderr and "panicked" in result.stderr


_WARNING = textwrap.dedent("""
    import sys
    from corpus import store
    store._register_function = lambda: None  # as before: chroma cannot rebuild our embedding function, and warns
    from ui.cli import traindoc_main
    sys.exit(traindoc_main(["index", sys.argv[1]]))
""")


def test_a_dependency_warning_never_reaches_the_user(index_copy: Path, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "page.md").write_text("# Page\n\n## Disk\n\nENOSPC on checkpoint save.\n", encoding="utf-8")
    result = run(sys.executable, "-W", "always", "-c", _WARNING, str(docs))
    assert result.returncode == 0 and "1 added" in result.stdout
    assert result.stderr == "", result.stderr


def test_no_warning_about_our_embedding_function(index_copy: Path, tmp_path: Path) -> None:
    import warnings

    from common.settings import Settings
    from corpus.embedding import make_embedder
    from corpus.store import StoredChunk, VectorStore

    settings = Settings.from_env()
    embedder = make_embedder(settings.embed_model)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        store = VectorStore(settings, embedder, create=True)
        store.upsert([StoredChunk("w1", "w.md", "W", "hello", "h", 0)], embedder.embed(["hello"]))
    assert not [w for w in caught if "reconstruct" in str(w.message)]


READ_ONLY = shutil.which("unshare") is not None and os.geteuid() == 0


@pytest.mark.skipif(not READ_ONLY, reason="needs unshare (user and mount namespaces) to mount the index read-only")
def test_a_read_only_index_answers_and_suggests_only_what_can_work_there(index_copy: Path, tmp_path: Path) -> None:
    (index_copy / "store-version").unlink(missing_ok=True)  # stale snapshot: the store itself is opened, read-only
    home = tmp_path / "home"
    home.mkdir()

    def read_only(command: str) -> subprocess.CompletedProcess[str]:
        script = (f"mount --bind {index_copy} {index_copy} && mount -o remount,bind,ro {index_copy} && "
                  f"HOME={home} TRAINDOC_DATA_DIR={index_copy} {command}")
        return run("unshare", "-Urm", "sh", "-c", script)

    probe = read_only("touch " + str(index_copy / "x"))
    if probe.returncode == 0 or "Read-only" not in probe.stderr:
        pytest.skip(f"cannot mount read-only here: {probe.stderr.strip()}")
    answer = read_only(f"{BIN / 'ask'} --json --no-probes 'why is NCCL hanging' < /dev/null")
    assert answer.returncode == 0, answer.stderr
    assert json.loads(answer.stdout)["citations"] and answer.stderr == ""
    _damage(index_copy)
    broken = read_only(f"{BIN / 'ask'} --no-probes 'why is NCCL hanging' < /dev/null")
    line = one_line(broken, 1)
    assert "read-only here" in line and "TRAINDOC_DATA_DIR" in line and "--rebuild" not in line
