"""The app's API as gradio_client sees it: /ask returns the answer JSON with citations, an empty question
an error object, /probes an HTML table naming every probe."""

from __future__ import annotations

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
    assert "[1]" in answer["answer"]
    assert {"probe", "status", "code", "summary"} <= set(answer["findings"][0])


@pytest.mark.parametrize("question", ["", "   \n"])
def test_empty_question_is_an_error_object(client, question: str) -> None:
    assert client.predict(question, api_name="/ask") == {"error": "empty question"}


def test_probes_returns_a_table_with_every_probe(client) -> None:
    from tools.registry import PROBES

    report = client.predict(api_name="/probes")
    assert report.startswith("<table") and report.count("<tr>") == len(PROBES) + 1
    for name in PROBES:
        assert f"<td>{name}</td>" in report
