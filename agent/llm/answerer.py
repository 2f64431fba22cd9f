"""Answering with a language model: redact, run the bounded agent, ground its citations, restore.

Any failure of the model (unreachable, timeout, rate limit, malformed tool call, context overflow)
is translated into ``ModelFailure`` (agent.llm.failure); the core then falls back to the offline
composer with a one-line notice.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from typing import Any

from agent.answer import Answer
from agent.events import EventSink
from agent.llm.backends import describe, make_chat_model
from agent.llm.failure import ModelFailure, translate
from agent.llm.grounding import ground
from agent.llm.loop import run_loop
from agent.llm.toolbox import Toolbox
from common.errors import TraindocError
from common.language import say
from common.redaction import Redactor
from common.settings import Settings

log = logging.getLogger(__name__)


__all__ = ["ModelFailure", "answer_with_model"]


def answer_with_model(
    settings: Settings,
    question: Any,  # agent.core.Question
    retriever: Any,
    probe_context: Any | None,
    probe_names: list[str],
    on_event: EventSink,
    model: Any | None = None,
) -> Answer:
    started = time.perf_counter()
    lang = question.language
    redactor = Redactor(mode="strict" if settings.redact_mode == "strict" else "default")
    toolbox = Toolbox(retriever=retriever, probe_context=probe_context, redactor=redactor,
                      probe_names=probe_names, on_event=on_event, top_k=settings.top_k, job=question.job,
                      hang_timeout_s=settings.probe_timeout_s)
    messages = [{"role": m["role"], "content": redactor.redact(m["content"])} for m in question.history]
    user = question.text
    if question.job is not None and question.job.root_cause is not None:
        user += ("\n\nLogs are attached: call job_triage first; it names the rank that failed first. Lead with "
                 "that root cause, not with the timeouts that followed it.")
    elif question.log_errors:
        user += "\n\nError lines from the attached log:\n" + "\n".join(question.log_errors[:30])
    if question.log_paths:
        user += "\n\nLog files you may pass to log_grep: " + ", ".join(str(p) for p in question.log_paths)
    user += "\n\n" + say("model_language", lang)
    messages.append({"role": "user", "content": redactor.redact(user)})
    try:
        chat_model = model if model is not None else make_chat_model(settings)
        result = run_loop(chat_model, toolbox, messages, settings.llm_max_steps, on_event)
    except TraindocError:
        raise
    except Exception as exc:  # the model's client raises many types; all mean "no model answer"
        raise translate(exc, describe(settings)) from exc
    if not result.text.strip():
        if result.malformed:  # langchain reports unparseable arguments as invalid_tool_calls, not an error
            raise ModelFailure(describe(settings), "malformed tool call", result.malformed[0][:160])
        raise ModelFailure(describe(settings), "empty answer")

    grounded = ground(result.text, toolbox.chunks, toolbox.probes)
    from agent.diagnose import finding_views

    findings = finding_views(list(toolbox.probes.values()), grounded.citations)
    findings = [replace(f, related=sorted(set(f.related) | {grounded.probe_numbers[f.probe]}))
                if f.probe in grounded.probe_numbers else f for f in findings]
    text = redactor.restore(grounded.text)
    if not grounded.grounded:
        text = say("ungrounded", lang) + "\n\n" + text
    steps = [{"tool": s.tool, "args": s.args, "result": redactor.restore(s.result), "cached": s.cached}
             for s in sorted(toolbox.steps, key=lambda s: s.number)]
    return Answer(
        question=question.text, answer=text, citations=grounded.citations, findings=findings,
        no_match=not grounded.citations and not toolbox.chunks, backend=describe(settings),
        timings_ms={"total": (time.perf_counter() - started) * 1000}, id=question.id, steps=steps,
        grounded=grounded.grounded, diagnosis=toolbox.live_job or question.job,  # traindoc's own, never the model's
        mode="agent", lang=lang,
    )
