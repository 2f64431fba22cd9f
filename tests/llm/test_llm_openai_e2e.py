"""End to end: `ask` with the real langchain-openai client against the fake OpenAI-compatible server."""

from __future__ import annotations

import json
from typing import Any

from fakes.openai_server import DOC_ID, FakeOpenAI, calls, echo

SCRIPT = [calls(("search_docs", {"query": "NCCL watchdog timeout"})),
          echo("NCCL timed out: raise the timeout with NCCL_TIMEOUT [doc:{doc}].")]


def test_ask_json_searches_then_streams_a_cited_answer(ask_cli: Any) -> None:
    with FakeOpenAI(list(SCRIPT)) as server:
        result = ask_cli(server.url, "--json", "--no-probes", "NCCL watchdog timeout after 1800s")

    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    data = json.loads(result.stdout)
    first, second = server.requests
    assert first["model"] == "fake-model" and first["stream"] is True
    assert [t["function"]["name"] for t in first["tools"]] == ["search_docs"]  # --no-probes: no probe tools
    tool_result = next(m for m in second["messages"] if m["role"] == "tool")
    doc_id = DOC_ID.search(tool_result["content"]).group(1)

    assert data["backend"] == "openai:fake-model"
    assert data["answer"] == "NCCL timed out: raise the timeout with NCCL_TIMEOUT [1]."
    assert [(c["n"], c["chunk_id"]) for c in data["citations"]] == [(1, doc_id)]
    assert data["grounded"] is True and "notice" not in data
    assert [(s["tool"], s["args"], s["cached"]) for s in data["steps"]] == [
        ("search_docs", {"query": "NCCL watchdog timeout"}, False)]
    assert f"[doc:{doc_id}]" in data["steps"][0]["result"]


def test_ask_streams_the_tool_call_line_and_the_answer(ask_cli: Any) -> None:
    with FakeOpenAI(list(SCRIPT)) as server:
        result = ask_cli(server.url, "--no-probes", "NCCL watchdog timeout after 1800s")

    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert "→ search_docs(query='NCCL watchdog timeout')" in result.stdout
    assert "✓ search_docs:" in result.stdout
    assert "NCCL timed out: raise the timeout with NCCL_TIMEOUT [1]." in result.stdout
    assert "Sources" in result.stdout and "[1] " in result.stdout


def test_an_agent_answer_whose_kind_the_check_confirms_ends_with_it(ask_cli: Any) -> None:
    """Issue 41 point 1: the kind the question's own evidence names (here the watchdog's message), the model's words
    kept whole before it."""
    question = ("[rank1]: Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE) ran for "
                "1800000 milliseconds before timing out.")
    with FakeOpenAI(list(SCRIPT)) as server:
        result = ask_cli(server.url, "--json", "--no-probes", question)
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)["answer"]
    assert answer.startswith("NCCL timed out: raise the timeout with NCCL_TIMEOUT [1].")
    assert answer.endswith("confirm: `traindoc check nccl` now, and again after the fix")
