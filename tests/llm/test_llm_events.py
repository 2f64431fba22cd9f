"""The typed event stream every front end consumes, in order."""

from __future__ import annotations

from typing import Any

from fakes.chat_model import ScriptedChatModel, reply, tool_call

from agent.events import FinalAnswer, Notice, StepFinished, StepStarted, Token


def test_a_model_answer_streams_steps_then_tokens_then_the_final_answer(agent_ask: Any) -> None:
    model = ScriptedChatModel(script=[reply(calls=[tool_call("search_docs", {"query": "NCCL timeout"})]),
                                      reply("Raise NCCL_TIMEOUT and rerun.")])
    answer, events = agent_ask("NCCL watchdog timeout", model)

    kinds = [type(e) for e in events]
    assert kinds[:2] == [StepStarted, StepFinished] and kinds[-1] is FinalAnswer
    assert set(kinds[2:-1]) == {Token} and len(kinds[2:-1]) > 1  # streamed, not one block
    started, finished = events[0], events[1]
    assert (started.step, started.tool, started.args) == (1, "search_docs", {"query": "NCCL timeout"})
    assert (finished.step, finished.tool, finished.cached) == (1, "search_docs", False)
    assert "".join(e.text for e in events if isinstance(e, Token)) == "Raise NCCL_TIMEOUT and rerun."
    assert events[-1].answer is answer


def test_a_failing_model_gives_a_notice_then_the_offline_final_answer(agent_ask: Any) -> None:
    model = ScriptedChatModel(script=[ConnectionError("Connection refused")])
    answer, events = agent_ask("NCCL watchdog timeout", model)

    assert [type(e) for e in events] == [Notice, FinalAnswer]
    assert events[0].text == answer.notice and "unreachable" in answer.notice and "\n" not in answer.notice
    assert answer.backend == "offline" and answer.citations
