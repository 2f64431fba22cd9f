"""Which way a model answers a question: ``agent`` (it calls the tools) or ``explain`` (traindoc gathers the
facts, the model writes the answer from them).

``auto`` follows the cached capability (agent.llm.capability): with no verdict yet, the first question
measures tool calling once. A model that then does not use the tools (no tool call at all, an empty answer,
a malformed call) is asked again in explain mode, with a notice, and the verdict is kept for the next
question.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agent.answer import Answer
from agent.events import EventSink, Notice
from agent.llm.backends import describe
from agent.llm.capability import load, measure_tool_calls, remember
from agent.llm.failure import NO_TOOL_USE, ModelFailure, translate
from common.errors import TraindocError
from common.language import say
from common.settings import Settings


def choose(settings: Settings, model: Any | None = None) -> str:
    if settings.llm_mode in ("agent", "explain"):
        return settings.llm_mode
    capability = load(settings)
    if capability is None or capability.tool_calls is None:
        try:
            calls, _ = measure_tool_calls(settings, model)
        except TraindocError:
            raise
        except Exception as exc:  # unreachable, timed out, rate limited: the offline answer, at once
            raise translate(exc, describe(settings)) from exc
        capability = remember(settings, "the first question", tool_calls=calls)
    return "agent" if capability.tool_calls else "explain"


def answer_with_llm(settings: Settings, question: Any, on_event: EventSink, *, model: Any | None,
                    agent: Callable[[], Answer], explain: Callable[[], Answer]) -> Answer:
    if choose(settings, model) == "explain":
        return explain()
    try:
        answer = agent()
    except ModelFailure as exc:
        if settings.llm_mode != "auto" or exc.kind not in NO_TOOL_USE:
            raise
        return _explain_instead(settings, question, exc, on_event, explain)
    if settings.llm_mode == "auto" and not answer.steps and not answer.grounded:
        return _explain_instead(settings, question, ModelFailure(describe(settings), "no tool call"), on_event, explain)
    return answer


def _explain_instead(settings: Settings, question: Any, failure: ModelFailure, on_event: EventSink,
                     explain: Callable[[], Answer]) -> Answer:
    remember(settings, f"a question the model answered with: {failure.kind}", tool_calls=False)
    notice = say("explain_instead", question.language, failure=failure.describe(question.language))
    on_event(Notice(notice))  # a front end drops whatever the agent had streamed
    answer = explain()
    answer.notice = notice
    return answer
