"""TRAINDOC_CHROMA_URL: a real `chroma run` server on 127.0.0.1, and a URL where nothing listens."""

from __future__ import annotations

import json
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from clikit import BIN, builtin_corpus, chunk_total, chunks_embedded, documents, runbook_of

FILES = builtin_corpus()[0]  # seeds, their renderings and the runbooks


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _heartbeat(url: str) -> bool:
    for path in ("/api/v2/heartbeat", "/api/v1/heartbeat"):
        try:
            with urllib.request.urlopen(url + path, timeout=1) as response:
                if response.status == 200:
                    return True
        except OSError:
            continue
    return False


@pytest.fixture
def chroma_server(tmp_path: Path) -> Iterator[str]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = (tmp_path / "chroma.log").open("wb")
    proc = subprocess.Popen([str(BIN / "chroma"), "run", "--path", str(tmp_path / "server-data"), "--host",
                             "127.0.0.1", "--port", str(port)], stdout=log, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not _heartbeat(url):
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"chroma server did not come up: {(tmp_path / 'chroma.log').read_text()[-2000:]}")
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=15)
        log.close()


@pytest.mark.slow
def test_index_and_ask_through_a_chroma_server(chroma_server, cli, monkeypatch, tmp_path):
    monkeypatch.setenv("TRAINDOC_CHROMA_URL", chroma_server)
    built = cli("traindoc", "index")
    assert built.returncode == 0, built.stderr
    assert f"{FILES} added" in built.stdout
    total = chunk_total(built.stdout)
    assert chunks_embedded(built.stdout) == total > 0
    assert not (tmp_path / "data" / "chroma").exists(), "nothing went to a local chroma store"

    again = cli("traindoc", "index")
    assert again.returncode == 0, again.stderr
    assert f"{FILES} unchanged" in again.stdout and chunks_embedded(again.stdout) == 0

    # A second machine with an empty data directory reads the same server.
    monkeypatch.setenv("TRAINDOC_DATA_DIR", str(tmp_path / "other-machine"))
    result = cli("ask", "--json", "--no-probes", "torchrun: Address already in use on port 29500")
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    assert answer["no_match"] is False
    assert runbook_of(answer["citations"]) == "port_in_use"
    top = documents(answer["citations"])[0]
    assert top["source"].endswith("002_8a84ca4f82c44780.txt") and "端口" in top["section"]


def test_unreachable_chroma_url_is_one_line_error(cli, monkeypatch):
    monkeypatch.setenv("TRAINDOC_CHROMA_URL", f"http://127.0.0.1:{free_port()}")
    for prog, args in (("ask", ("--no-probes", "nccl hang")), ("traindoc", ("index",))):
        result = cli(prog, *args)
        assert result.returncode == 1
        assert result.stdout == ""
        assert "Traceback" not in result.stderr
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert len(lines) == 1, result.stderr
        assert lines[0].startswith(f"{prog}: error: ") and "127.0.0.1" in lines[0]
        assert "--rebuild" not in lines[0], "rebuilding cannot fix a server that is not there"


def test_chroma_url_that_is_not_http_is_a_config_error(cli, monkeypatch):
    monkeypatch.setenv("TRAINDOC_CHROMA_URL", "ftp://example.invalid/chroma")
    result = cli("ask", "--no-probes", "nccl hang")
    assert result.returncode == 1
    assert "TRAINDOC_CHROMA_URL is not an http(s) URL" in result.stderr
    assert "Traceback" not in result.stderr
