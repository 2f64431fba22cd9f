"""`traindoc doctor-llm`: reachable, model listed, tool calls supported."""

from __future__ import annotations

from typing import Any

from clikit import run_cli
from fakes.openai_server import FakeOpenAI, calls, closed_port


def doctor(base_url: str) -> Any:
    env = {"TRAINDOC_BACKEND": "openai", "TRAINDOC_LLM_BASE_URL": base_url, "TRAINDOC_LLM_MODEL": "fake-model",
           "TRAINDOC_LLM_TIMEOUT": "5"}
    return run_cli("traindoc", "doctor-llm", env=env, timeout=120)


def test_doctor_passes_against_a_working_server() -> None:
    with FakeOpenAI([calls(("ping", {"text": "ok"}))], models=("other", "fake-model")) as server:
        result = doctor(server.url)

    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"ok   reachable: GET {server.url}/models answered"
    assert lines[1] == "ok   model listed: fake-model is among: other, fake-model"
    assert lines[2] == "ok   tool calls: model returned 1 tool call(s)"
    (request,) = server.requests
    assert request["stream"] is False and request["tools"][0]["function"]["name"] == "ping"


def test_doctor_fails_on_a_closed_port() -> None:
    url = closed_port()
    result = doctor(url)

    assert result.returncode == 1
    assert result.stdout.startswith(f"FAIL reachable: GET {url}/models:"), result.stdout
    assert "Traceback" not in result.stderr
