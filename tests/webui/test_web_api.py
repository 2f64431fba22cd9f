"""The web app's API through gradio_client, access control, and the start-up warning."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from web_kit import free_port, start_web, stop_web, web_env

from ui.web import is_loopback, parse_auth

Client = pytest.importorskip("gradio_client").Client


def test_api_ask_returns_the_answer_json(web) -> None:
    client = Client(web.url, verbose=False)
    answer = client.predict("why is NCCL hanging", api_name="/ask")
    assert answer["backend"] == "offline" and answer["citations"]
    assert all(c["source"].endswith(".txt") for c in answer["citations"])
    assert client.predict("   ", api_name="/ask") == {"error": "empty question"}


def test_api_probes_returns_the_report(web) -> None:
    html = Client(web.url, verbose=False).predict(api_name="/probes")
    for probe in ("gpu_inventory", "port_check", "env_vars", "processes", "disk_and_memory"):
        assert probe in html


@pytest.mark.parametrize(("host", "loopback"), [("127.0.0.1", True), ("localhost", True), ("::1", True),
                                                ("0.0.0.0", False), ("10.1.2.3", False), ("gpu-head", False)])
def test_is_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_parse_auth() -> None:
    assert parse_auth("alice:s3cret:x") == ("alice", "s3cret:x")
    assert parse_auth(None) is None
    with pytest.raises(Exception, match="user:password"):
        parse_auth("nopassword")


def test_auth_is_required_when_configured(shared_index: Path, tmp_path: Path) -> None:
    server = start_web(web_env(tmp_path, shared_index, TRAINDOC_WEB_AUTH="alice:s3cret"), tmp_path)
    try:
        with pytest.raises(Exception):  # noqa: B017 - gradio_client raises its own types for a 401
            Client(server.url, verbose=False).predict("why is NCCL hanging", api_name="/ask")
        answer = Client(server.url, auth=("alice", "s3cret"), verbose=False).predict("why is NCCL hanging",
                                                                                     api_name="/ask")
        assert answer["citations"]
    finally:
        stop_web(server)


@pytest.mark.parametrize("auth", [None, "alice:s3cret"])
def test_warning_on_a_public_address_without_auth(shared_index: Path, tmp_path: Path, auth: str | None) -> None:
    extra = {"TRAINDOC_WEB_AUTH": auth} if auth else {}
    server = start_web(web_env(tmp_path, shared_index, **extra), tmp_path, host="0.0.0.0")
    try:
        time.sleep(0.5)
        warned = "without authentication" in server.log()
        assert warned is (auth is None), server.log()
    finally:
        stop_web(server)


def test_bad_port_is_a_usage_error(cli) -> None:
    result = cli("traindoc", "web", "--port", "70000")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert free_port() > 0
