"""Bad input and broken environments: one clear line on stderr, the right exit code, never a traceback."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from clikit import BIN, ROOT, chunk_total

PEAK_RSS = """
import resource, subprocess, sys
with open(sys.argv[1], "w") as out:
    code = subprocess.run(sys.argv[2:], stdout=out, stdin=subprocess.DEVNULL).returncode
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024)
sys.exit(code)
"""
AS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
QUESTION = "torchrun fails with Address already in use on port 29500"


def one_error_line(result, prog: str = "ask") -> str:
    stderr = result.stderr.decode() if isinstance(result.stderr, bytes) else result.stderr
    assert "Traceback" not in stderr and "Traceback" not in str(result.stdout)
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    assert lines[0].startswith(f"{prog}: error: "), lines[0]
    return lines[0]


def answered(result) -> dict:
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    answer = json.loads(result.stdout)
    assert answer["citations"] and answer["no_match"] is False
    return answer


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([""], "no question given"),
        (["   "], "no question given"),
        ([], "no question given"),
        (["--top-k", "0", "why"], "--top-k must be at least 1"),
        (["--bogus-flag", "why"], "unrecognized arguments: --bogus-flag"),
    ],
    ids=["empty", "blank", "no-args", "top-k-0", "unknown-flag"],
)
def test_usage_errors_exit_2(cli, args, message):
    result = cli("ask", *args)
    assert result.returncode == 2
    assert result.stdout == ""
    assert message in one_error_line(result)


def _unreadable(tmp_path: Path) -> Path:
    path = tmp_path / "secret.log"
    path.write_text("RuntimeError: boom\n", encoding="utf-8")
    path.chmod(0)
    return path


def _binary(tmp_path: Path) -> Path:
    path = tmp_path / "core.dump"
    path.write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 64)
    return path


def _folder(tmp_path: Path) -> Path:
    path = tmp_path / "logs"
    path.mkdir()
    return path


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda tmp: tmp / "missing.log", "log not found"),
        (_folder, "no log files (.log, .txt, .out, .err, .gz) in folder"),  # a folder is read as torchrun's --log-dir
        (_binary, "is mostly binary, not a text log"),
        pytest.param(_unreadable, "permission denied",
                     marks=pytest.mark.skipif(AS_ROOT, reason="root can read a chmod 000 file")),
    ],
    ids=["missing", "folder", "binary", "unreadable"],
)
def test_unusable_log_file_is_one_clear_error(cli, tmp_path, make, message):
    path = make(tmp_path)
    result = cli("ask", "--log", str(path), "why did it crash")
    assert result.returncode == 1
    assert result.stdout == ""
    line = one_error_line(result)
    assert message in line and str(path) in line


def test_binary_on_stdin_is_refused(cli):
    result = cli("ask", "why", input=b"\x00\x01\x02" * 1000)
    assert result.returncode == 1
    assert "standard input is mostly binary" in one_error_line(result)


def test_latin1_log_is_still_answered(cli, tmp_path, use_shared_index):
    log = tmp_path / "latin1.log"
    log.write_bytes("Démarrage de l'entraînement sur le serveur gpu-03 à 10h\n".encode("latin-1")
                    + b"RuntimeError: The server socket has failed to listen on any local network address. "
                      b"port: 29500, message: Address already in use\n")
    answer = answered(cli("ask", "--json", "--no-probes", "--log", str(log), "pourquoi ça plante"))
    assert any("端口" in c["section"] for c in answer["citations"][:2]), answer["citations"]


@pytest.mark.slow
def test_two_gigabyte_log_streams_in_bounded_memory(tmp_path, use_shared_index, request):
    if shutil.disk_usage(tmp_path).free < 10 * 1024**3:
        pytest.skip("needs 10 GB free under the temporary directory")
    log = tmp_path / "huge.log"
    request.addfinalizer(lambda: log.unlink(missing_ok=True))  # do not leave 2 GB in pytest's kept tmp dirs
    noise = "".join(
        f'[2025-03-01 10:{i % 60:02d}:00] step {i} metrics {{"loss": 2.3456, "lr": 0.0003, "grad_norm": 0.98, '
        f'"tokens_per_s": 51234, "shard": "{"ab" * 800}"}}\n'
        for i in range(256)
    ).encode()
    target = 2 * 1024**3
    with log.open("wb") as handle:
        written = 0
        handle.write(b"x" * (64 * 1024**2))  # a 64 MB line without a newline: the worst case for readline
        written += 64 * 1024**2
        handle.write(b"\n")
        while written < target:
            handle.write(noise)
            written += len(noise)
        handle.write(b"Traceback (most recent call last):\n  File \"train.py\", line 9, in <module>\n"
                     b"    dist.init_process_group('nccl')\n"
                     b"torch.distributed.DistNetworkError: The server socket has failed to listen on any local "
                     b"network address. port: 29500, useIPv6: 0, code: -98, name: EADDRINUSE, "
                     b"message: Address already in use\n")
    assert log.stat().st_size > target

    # Measured from a small wrapper process: a child forked straight from this (large) pytest process
    # would start with pytest's resident pages counted in its peak RSS.
    out = tmp_path / "answer.json"
    started = time.monotonic()
    wrapper = subprocess.run(
        [sys.executable, "-c", PEAK_RSS, str(out), str(BIN / "ask"), "--json", "--no-probes", "--log", str(log),
         "why did it crash"],
        capture_output=True, text=True, stdin=subprocess.DEVNULL, cwd=ROOT, timeout=600, check=False,
    )
    elapsed = time.monotonic() - started
    assert wrapper.returncode == 0, wrapper.stderr
    peak_mb = float(wrapper.stdout.strip())
    assert peak_mb < 600, f"peak RSS {peak_mb:.0f} MB"
    answer = json.loads(out.read_text(encoding="utf-8"))
    assert "EADDRINUSE" in answer["answer"], "the error line at the very end was found"
    assert any("端口" in c["section"] for c in answer["citations"][:2]), answer["citations"]
    assert elapsed < 300, f"took {elapsed:.0f} s"


def test_data_dir_that_is_a_file_is_a_clear_error(cli, tmp_path, monkeypatch):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("oops", encoding="utf-8")
    monkeypatch.setenv("TRAINDOC_DATA_DIR", str(blocker))
    result = cli("ask", "--no-probes", QUESTION)
    assert result.returncode == 1
    line = one_error_line(result)
    assert "data directory" in line and str(blocker) in line and "TRAINDOC_DATA_DIR" in line


@pytest.mark.skipif(AS_ROOT, reason="root writes through read-only permissions")
def test_read_only_index_still_answers_or_says_why(cli, index_copy):
    for path in [index_copy, *index_copy.rglob("*")]:
        path.chmod(path.stat().st_mode & ~0o222)
    try:
        result = cli("ask", "--json", "--no-probes", QUESTION)
        if result.returncode == 0:
            answered(result)
        else:
            assert result.returncode == 1
            assert "index" in one_error_line(result)
    finally:
        for path in [index_copy, *index_copy.rglob("*")]:
            path.chmod(path.stat().st_mode | 0o200)


def test_missing_index_is_built_on_first_ask(cli, tmp_path, monkeypatch):
    data = tmp_path / "fresh" / "nested"
    monkeypatch.setenv("TRAINDOC_DATA_DIR", str(data))
    answer = answered(cli("ask", "--json", "--no-probes", QUESTION))
    assert answer["citations"][0]["source"].startswith("corpus/")
    assert (data / "chroma" / "chroma.sqlite3").is_file()


def test_corrupted_index_is_reported_then_rebuilt(cli, index_copy):
    total = chunk_total((index_copy / "build-report.txt").read_text(encoding="utf-8"))
    (index_copy / "chroma" / "chroma.sqlite3").write_bytes(b"this is not a database " * 4096)

    first = cli("ask", "--json", "--no-probes", QUESTION)
    if first.returncode == 0:
        answered(first)  # rebuilding on the fly is acceptable too
    else:
        assert first.returncode == 1
        line = one_error_line(first)
        assert "index" in line and "traindoc index" in line

    rebuilt = cli("traindoc", "index")
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert "Traceback" not in rebuilt.stderr
    assert chunk_total(rebuilt.stdout) == total
    answered(cli("ask", "--json", "--no-probes", QUESTION))


def test_concurrent_index_runs_serialise(tmp_path, shared_index, monkeypatch):
    data = tmp_path / "concurrent"
    monkeypatch.setenv("TRAINDOC_DATA_DIR", str(data))
    # the second run waits for the first however long a loaded machine takes to build (the lock's wait is not tested
    # here: test_index_refuses_while_another_run_holds_the_lock does that)
    monkeypatch.setenv("TRAINDOC_LOCK_TIMEOUT", "900")
    procs = [
        subprocess.Popen([str(BIN / "traindoc"), "index"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         stdin=subprocess.DEVNULL, text=True, cwd=ROOT)
        for _ in range(2)
    ]
    results = [(p.wait(timeout=900), *p.communicate()) for p in procs]
    for code, _, stderr in results:
        assert code == 0, stderr
        assert "Traceback" not in stderr
    totals = sorted(chunk_total(stdout) for _, stdout, _ in results)
    expected = chunk_total((shared_index / "build-report.txt").read_text(encoding="utf-8"))
    assert totals == [expected, expected]
    embedded = sorted(int(stdout.split(" chunks embedded")[0].rsplit(" ", 1)[-1]) for _, stdout, _ in results)
    assert embedded == [0, expected], "the second run waited and found everything indexed"


def test_index_refuses_while_another_run_holds_the_lock(cli, index_copy, monkeypatch):
    from filelock import FileLock

    monkeypatch.setenv("TRAINDOC_LOCK_TIMEOUT", "0.5")
    total = chunk_total((index_copy / "build-report.txt").read_text(encoding="utf-8"))
    with FileLock(str(index_copy / "index.lock")):
        refused = cli("traindoc", "index")
    assert refused.returncode == 1
    line = one_error_line(refused, "traindoc")
    assert "another `traindoc index` is running" in line

    after = cli("traindoc", "index")
    assert after.returncode == 0, after.stderr
    assert chunk_total(after.stdout) == total
    answered(cli("ask", "--json", "--no-probes", QUESTION))
