"""The app's API as gradio_client sees it: /ask returns the answer JSON with citations, an empty question
an error object, /probes an HTML table naming every probe."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def client(web_server):
    from gradio_client import Client

    return Client(web_server.url, verbose=False)


def test_only_the_named_endpoints_are_public(client) -> None:
    endpoints = client.view_api(return_format="dict", print_info=False)["named_endpoints"]
    assert set(endpoints) == {"/ask", "/probes"}


def test_ask_returns_the_answer_json_with_citations(client) -> None:
    answer = client.predict("why is NCCL hanging", api_name="/ask")
    assert answer["question"] == "why is NCCL hanging"
    assert answer["no_match"] is False and answer["backend"] == "offline"
    citations = answer["citations"]
    assert citations and [c["n"] for c in citations] == list(range(1, len(citations) + 1))
    assert citations[0]["source"] == "corpus/runbooks/en/collective_timeout.md"  # the runbook leads, in English
    assert citations[1]["source"].startswith("corpus/002_") and "NCCL" in citations[1]["section"]
    assert citations[1]["lang"] == "en"  # the seed section, shown in English, cited as the original
    assert "[1]" in answer["answer"] and "[1]" in answer["brief"]
    assert answer["findings"] == [], "the server's own host is not probed unless its operator says so"


@pytest.mark.parametrize("question", ["", "   \n"])
def test_empty_question_is_an_error_object(client, question: str) -> None:
    assert client.predict(question, api_name="/ask") == {"error": "empty question"}


def test_a_paste_past_the_limit_is_an_error_object_at_once(client) -> None:
    answer = client.predict("NCCL WARN x\n" * 30_000, api_name="/ask")
    assert set(answer) == {"error"} and "Upload the log as a file instead" in answer["error"]


def test_probes_of_the_servers_own_host_are_off_unless_its_operator_turns_them_on(client) -> None:
    report = client.predict(api_name="/probes")
    assert not report.startswith("<table"), "the server's host (other users' jobs) is not read by default"
    assert "TRAINDOC_WEB_PROBES=host" in report and "traindoc probe --json" in report


@pytest.mark.slow
def test_a_port_in_use_is_one_line_and_serving_on_is_never_said(use_shared_index: Path, cli: Any) -> None:
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = cli("traindoc", "web", "--port", str(port), timeout=240)
    assert result.returncode == 1, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and f"cannot serve on 127.0.0.1:{port}" in lines[0] and "Traceback" not in result.stderr
    assert "serving on" not in result.stderr
