"""The bounded agent loop with a scripted model over the real index: step limit, output cap, cache,
concurrent tool calls, the system prompt."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from fakes.chat_model import ScriptedChatModel, reply, tool_call
from langchain_core.messages import SystemMessage, ToolMessage

import agent.llm.toolbox
from agent.core import Question
from agent.events import StepFinished, StepStarted
from agent.llm.loop import ANSWER_NOW, system_prompt


def tool_messages(model: ScriptedChatModel) -> list[ToolMessage]:
    return [m for m in model.sent[-1] if isinstance(m, ToolMessage)]


def test_step_limit_last_call_has_no_tools_and_an_answer_still_comes(agent_ask: Any) -> None:
    model = ScriptedChatModel(script=[
        reply(f"still looking {i}", calls=[tool_call("search_docs", {"query": f"NCCL timeout {i}"}, f"c{i}")])
        for i in range(10)
    ])
    answer, _ = agent_ask("NCCL watchdog timeout", model, llm_max_steps=3)

    assert len(model.sent) == 3  # model calls, not tool calls
    assert len(model.bound_tools) == 2  # the third call was made with no tools bound
    assert model.sent[-1][-1].content == ANSWER_NOW
    assert [s["args"]["query"] for s in answer.steps] == ["NCCL timeout 0", "NCCL timeout 1"]  # 3rd call not run
    assert "still looking 2" in answer.answer
    assert answer.notice is None and answer.backend == "openai:scripted"


def test_tool_output_is_capped_with_a_request_for_a_narrower_call(
    agent_ask: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(agent.llm.toolbox, "MAX_TOOL_OUTPUT", 400)  # one NCCL section is longer than that
    model = ScriptedChatModel(script=[reply(calls=[tool_call("search_docs", {"query": "NCCL timeout"})]), reply("ok")])
    agent_ask("NCCL watchdog timeout", model)

    (result,) = tool_messages(model)
    assert result.content.endswith("[output capped at 400 characters: make a narrower call]")
    assert len(result.content) < 400 + 100


def test_identical_repeated_calls_are_answered_from_the_first_result(
    agent_ask: Any, warm_retriever: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tools.registry

    searches, probes = [], []
    search, run_probes = warm_retriever.search, tools.registry.run_probes
    monkeypatch.setattr(warm_retriever, "search", lambda *a, **k: searches.append(a) or search(*a, **k))
    monkeypatch.setattr(tools.registry, "run_probes", lambda *a, **k: probes.append(a) or run_probes(*a, **k))
    same = [tool_call("search_docs", {"query": "NCCL timeout"}), tool_call("env_vars", {})]
    model = ScriptedChatModel(script=[reply(calls=same), reply(calls=same), reply("done")])
    answer, _ = agent_ask(Question("NCCL watchdog timeout", probes=True), model)

    assert searches == [("NCCL timeout",)] * 2 and len(probes) == 1  # one search_docs: documents, runbooks apart
    assert [s["cached"] for s in answer.steps] == [False, False, True, True]
    first, second = tool_messages(model)[:2], tool_messages(model)[2:]
    for earlier, later in zip(sorted(first, key=lambda m: m.name), sorted(second, key=lambda m: m.name), strict=True):
        assert later.content.startswith(earlier.content)
        assert "same call as before" in later.content


def test_two_tool_calls_in_one_turn_run_concurrently(
    agent_ask: Any, warm_retriever: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tools.registry

    both = threading.Barrier(2, timeout=10)  # breaks (and the tool reports an error) if they ran one by one
    search, run_probes = warm_retriever.search, tools.registry.run_probes
    # search_docs searches the documents, then the runbooks apart: the first of its searches meets the probe
    monkeypatch.setattr(warm_retriever, "search",
                        lambda *a, **k: (k.get("among") == "runbooks" or both.wait()) and 0 or search(*a, **k))
    monkeypatch.setattr(tools.registry, "run_probes", lambda *a, **k: both.wait() and 0 or run_probes(*a, **k))
    model = ScriptedChatModel(script=[
        reply(calls=[tool_call("search_docs", {"query": "NCCL timeout"}), tool_call("env_vars", {})]),
        reply("done"),
    ])
    answer, events = agent_ask(Question("NCCL watchdog timeout", probes=True), model)

    steps = [e for e in events if isinstance(e, StepStarted | StepFinished)]
    assert [type(e) for e in steps] == [StepStarted, StepStarted, StepFinished, StepFinished]
    assert not any(s["result"].startswith("ERROR") for s in answer.steps), answer.steps


def test_the_system_prompt_is_sent_and_carries_the_language_rule(agent_ask: Any) -> None:
    model = ScriptedChatModel(script=[reply("NCCL 超时")])
    agent_ask("NCCL 超时怎么办", model)

    first = model.sent[0][0]
    assert isinstance(first, SystemMessage) and first.content == system_prompt()
    assert "Answer in the language of the user's question" in first.content
    assert "NCCL 超时怎么办" in model.sent[0][1].content
