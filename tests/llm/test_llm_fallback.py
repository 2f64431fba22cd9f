"""When the model fails, `ask` still answers: exit 0, a one-line notice, the offline answer, no traceback."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fakes.openai_server import FakeOpenAI, Hang, closed_port, context_overflow, malformed_call, rate_limited

CASES = {
    "unreachable": (None, {}),
    "timed out": ([Hang(30)], {"TRAINDOC_LLM_TIMEOUT": "1"}),
    "rate limited": ([rate_limited()], {}),
    "malformed tool call": ([malformed_call()], {}),
    "context overflow": ([context_overflow()], {}),
}


@pytest.mark.parametrize("kind", list(CASES))
def test_a_failing_model_falls_back_to_the_offline_answer(ask_cli: Any, kind: str) -> None:
    script, env = CASES[kind]
    if script is None:
        result = ask_cli(closed_port(), "--json", "--no-probes", "NCCL watchdog timeout", **env)
    else:
        with FakeOpenAI(list(script)) as server:
            result = ask_cli(server.url, "--json", "--no-probes", "NCCL watchdog timeout", **env)

    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    data = json.loads(result.stdout)
    assert data["notice"].startswith(f"model openai:fake-model {kind}:"), data["notice"]
    assert data["notice"].endswith("showing the offline answer") and "\n" not in data["notice"]
    assert data["backend"] == "offline" and data["citations"] and "steps" not in data


def test_the_terminal_shows_the_notice_as_one_line_then_the_offline_answer(ask_cli: Any) -> None:
    result = ask_cli(closed_port(), "--no-probes", "NCCL watchdog timeout")

    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    notes = [line for line in result.stdout.splitlines() if line.startswith("note:")]
    assert len(notes) == 1 and "unreachable" in notes[0], result.stdout
    assert "Sources" in result.stdout
