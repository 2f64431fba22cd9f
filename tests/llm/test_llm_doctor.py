"""`traindoc doctor-llm`: reachable, model listed, tool calls, streaming, context size; the verdict is cached
per base URL + model and picks the mode `ask` uses in auto."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from clikit import run_cli
from fakes.openai_server import FakeOpenAI, calls, closed_port


def doctor(base_url: str, **env: str) -> Any:
    full = {"TRAINDOC_BACKEND": "openai", "TRAINDOC_LLM_BASE_URL": base_url, "TRAINDOC_LLM_MODEL": "fake-model",
            "TRAINDOC_LLM_TIMEOUT": "5", **env}
    return run_cli("traindoc", "doctor-llm", env=full, timeout=120)


def cached() -> dict[str, Any]:
    return json.loads(Path(os.environ["TRAINDOC_LLM_CAPABILITIES"]).read_text())


def test_doctor_passes_against_a_working_server() -> None:
    with FakeOpenAI([calls(("ping", {"text": "ok"}))], models=("other", "fake-model")) as server:
        result = doctor(server.url)

    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"ok   reachable: GET {server.url}/models answered"
    assert lines[1] == "ok   model listed: fake-model is among: other, fake-model"
    assert lines[2] == "ok   tool calls: model returned 1 tool call(s)"
    assert lines[3] == "ok   streaming: the reply came in 4 chunks"
    assert lines[4].startswith("note context: unknown: the server does not publish it")
    assert lines[5].startswith("ok   mode: auto → agent; verdict cached in ")
    ping, stream = server.requests
    assert ping["stream"] is False and ping["tools"][0]["function"]["name"] == "ping"
    assert stream["stream"] is True and "tools" not in stream
    assert ping["max_tokens"] == 200 and stream["max_tokens"] == 24, "llama.cpp's servers know only max_tokens"
    assert cached() == {f"openai {server.url} fake-model": {
        "tool_calls": True, "streaming": True, "context_tokens": None, "source": "doctor-llm",
        "checked": cached()[f"openai {server.url} fake-model"]["checked"]}}


def test_a_model_without_tool_calling_is_usable_in_explain_mode() -> None:
    with FakeOpenAI([calls(("ping", {"text": "ok"}))], tool_calling=False) as server:
        result = doctor(server.url)

    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[2] == ("note tool calls: model returned 0 tool call(s); `ask` answers in explain mode (traindoc gathers "
                        "the facts, the model writes the answer)")
    assert lines[5].startswith("ok   mode: auto → explain; verdict cached in ")
    assert cached()[f"openai {server.url} fake-model"]["tool_calls"] is False


def test_forcing_agent_mode_on_a_model_without_tool_calling_fails() -> None:
    with FakeOpenAI(tool_calling=False) as server:
        result = doctor(server.url, TRAINDOC_LLM_MODE="agent")

    assert result.returncode == 1
    assert "FAIL tool calls: model returned 0 tool call(s)" in result.stdout
    assert "FAIL mode: agent, but the model makes no tool calls: set TRAINDOC_LLM_MODE=auto or explain" in result.stdout


@pytest.mark.parametrize(("listing", "expected"), [
    ({"max_model_len": 32768}, "ok   context: 32768 tokens (max_model_len in the model listing)"),
    ({"context_length": 8192}, "ok   context: 8192 tokens (context_length in the model listing)"),
])
def test_the_context_size_a_server_publishes_is_read_and_cached(listing: dict[str, int], expected: str) -> None:
    with FakeOpenAI(listing=listing) as server:
        result = doctor(server.url)

    assert expected in result.stdout.splitlines(), result.stdout
    assert cached()[f"openai {server.url} fake-model"]["context_tokens"] == next(iter(listing.values()))


def test_doctor_fails_on_a_closed_port() -> None:
    url = closed_port()
    result = doctor(url)

    assert result.returncode == 1
    assert result.stdout.startswith(f"FAIL reachable: GET {url}/models:"), result.stdout
    assert "Traceback" not in result.stderr
    assert not Path(os.environ["TRAINDOC_LLM_CAPABILITIES"]).exists(), "no verdict without an answer"
