"""Explain mode, for models without (reliable) tool calling: traindoc gathers the facts itself (retrieval,
probes, the job's triage or live hang snapshot, exactly as the offline path does), numbers them, masks
secrets, and asks the model to write the answer from them in the question's language, citing [n].

Grounding as in agent mode: a number the model was not given is dropped; an answer citing nothing is marked
``grounded: false``. The citation list is the sections the model was given; the diagnosis and the findings
stay traindoc's own.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, replace
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from agent.answer import Answer, FindingView
from agent.events import EventSink, StepFinished, StepStarted, Token
from agent.facts import Facts
from agent.llm.backends import describe, make_chat_model
from agent.llm.capability import context_from_error, load, prompts, remember
from agent.llm.failure import ModelFailure, failure_kind, translate
from agent.llm.grounding import ground_numbers
from agent.llm.loop import _text
from agent.llm.toolbox import _cut
from common.errors import TraindocError
from common.language import Lang, say
from common.redaction import Redactor
from common.settings import Settings
from jobs.render import diagnosis_text

SECTION_CHARS = 1200  # of one document section
CHARS_PER_TOKEN = 2.0  # conservative: Chinese text takes about a token per 1-2 characters
PROMPT_TOKENS = 600  # the system prompt, the question and the instructions
DEFAULT_BUDGET = 12_000  # characters of facts when the context size is unknown
MIN_BUDGET = 1_200
FACT_HEADER = re.compile(r"(?m)^\[\d+\] (?:Document section|Probe|Job diagnosis|Live stack snapshot)\b")


@dataclass(frozen=True)
class Fact:
    n: int
    kind: str  # doc | probe | job
    name: str  # the section's chunk id, the probe's name, job_triage or hang_snapshot
    text: str  # redacted: what the model is shown


@cache
def system_prompt() -> str:
    return resources.files("agent").joinpath("data/explain_prompt.md").read_text(encoding="utf-8")


def explainable(facts: Facts) -> bool:
    """Anything for a model to explain: a section, a probe that found a problem, a job's root cause."""
    problems = any(f.status == "problem" for f in facts.findings)
    return bool(facts.citations or problems or (facts.job is not None and facts.job.root_cause is not None))


def number_facts(facts: Facts, redactor: Redactor) -> list[Fact]:
    """[1..k] the sections as retrieval ranked them (the findings' related numbers stay valid), then the
    probes (problems first), then the job's diagnosis. Masked before cut, so no cut can split a secret."""
    template = prompts()["explain"]
    out: list[Fact] = []
    for c in facts.citations:
        # c.text went through advice.review (agent.core): corrected, the wrong commands marked or left out
        text = _cut(redactor.redact(c.text), SECTION_CHARS)
        text += "".join("\n" + (template["correction"].format(note=redactor.redact(note.split(": ", 1)[-1]))
                                 if note.startswith("traindoc corrected") else f"({redactor.redact(note)})")
                        for note in c.notes)
        out.append(Fact(c.n, "doc", c.chunk_id, template["doc"].format(
            n=c.n, source=Path(c.source).name, section=redactor.redact(c.section), text=text)))
    where = say("bundle_machine", "en", name=facts.machine) if facts.machine else say("this_machine", "en")
    ranked = sorted(facts.results, key=lambda r: not any(f.severity == "problem" for f in r.findings))
    for result in ranked:
        lines = [template["probe"].format(n=len(out) + 1, probe=result.probe, where=where, status=result.status,
                                          summary=result.summary)]
        for finding in result.findings:
            lines.append(template["probe_finding"].format(code=finding.code, severity=finding.severity,
                                                          summary=finding.summary, evidence=_cut(finding.evidence, 300)))
            if finding.fix:
                lines.append(template["probe_fix"].format(fix=finding.fix))
        out.append(Fact(len(out) + 1, "probe", result.probe, redactor.redact("\n".join(lines))))
    job = facts.job
    if job is not None and job.root_cause is not None:
        kind = "job_hang" if job.kind == "hang" else "job_log"
        text = template[kind].format(n=len(out) + 1, text=redactor.redact(diagnosis_text(job)))
        out.append(Fact(len(out) + 1, "job", "hang_snapshot" if job.kind == "hang" else "job_triage", text))
    return out


def fit(numbered: list[Fact], budget: int) -> list[Fact]:
    """The facts that fit ``budget`` characters, most telling first (the job's root cause, the top section,
    the probes that found a problem, the other sections, the rest), shown in their numbered order."""
    def rank(fact: Fact) -> int:
        if fact.kind == "job":
            return 0
        if fact.kind == "doc":
            return 1 if fact.n == 1 else 3
        return 2 if ": problem:" in fact.text.split("\n", 1)[0] else 4

    kept: list[Fact] = []
    left = budget
    for fact in sorted(numbered, key=lambda f: (rank(f), f.n)):
        if len(fact.text) <= left:
            kept.append(fact)
        elif left >= 300:  # the head of a long fact is better than none
            kept.append(replace(fact, text=_cut(fact.text, left) + prompts()["explain"]["cut"]))
        else:
            continue
        left -= len(kept[-1].text) + 2
    return sorted(kept, key=lambda f: f.n)


def budget_for(settings: Settings, context_tokens: int | None) -> int:
    if not context_tokens:
        return DEFAULT_BUDGET
    reply = min(settings.llm_max_tokens, context_tokens // 3)
    return max(MIN_BUDGET, int((context_tokens - reply - PROMPT_TOKENS) * CHARS_PER_TOKEN))


def messages_for(facts: Facts, given: list[Fact], redactor: Redactor, lang: Lang) -> list[dict[str, str]]:
    template = prompts()["explain"]
    question = facts.question
    parts = [template["question"].format(question=question.text)]
    if facts.errors and (facts.job is None or facts.job.root_cause is None):
        parts.append(template["error_lines"].format(lines="\n".join(facts.errors[:20])))
    if not any(f.kind == "doc" for f in given):
        parts.append(template["no_facts_from_documents"])
    parts.append(template["facts"])
    parts.extend(f.text for f in given)
    parts.extend([template["closing"], say("model_language", lang)])
    history = [{"role": m["role"], "content": redactor.redact(m["content"])} for m in question.history]
    return [{"role": "system", "content": system_prompt()}, *history,
            {"role": "user", "content": redactor.redact("\n\n".join(parts))}]


def explain(settings: Settings, facts: Facts, on_event: EventSink, model: Any | None = None) -> Answer:
    started = time.perf_counter()
    lang = facts.question.language
    redactor = Redactor(mode="strict" if settings.redact_mode == "strict" else "default")
    numbered = number_facts(facts, redactor)
    _announce(facts, on_event)
    capability = load(settings)
    budget = budget_for(settings, capability.context_tokens if capability else None)
    streaming = capability is None or capability.streaming is not False
    try:
        chat = model if model is not None else make_chat_model(settings, streaming=streaming)
        given = fit(numbered, budget)
        messages = messages_for(facts, given, redactor, lang)
        try:
            text = _generate(chat, messages, streaming, redactor, on_event)
        except Exception as exc:
            if failure_kind(exc) != "context overflow":
                raise
            # The server said how much context it has (llama.cpp's default is 2048): remember it, try once more.
            size = context_from_error(str(exc))
            if size:
                remember(settings, "a context-overflow error", context_tokens=size)
            budget = min(budget_for(settings, size), budget // 2) if size else budget // 3
            given = fit(numbered, budget)
            messages = messages_for(facts, given, redactor, lang)
            text = _generate(chat, messages, streaming, redactor, on_event)
    except TraindocError:
        raise
    except Exception as exc:  # the model's client raises many types; all mean "no model answer"
        raise translate(exc, describe(settings), facts) from exc
    if not text.strip():
        raise ModelFailure(describe(settings), "empty answer", facts=facts)
    if echoed(text, messages[-1]["content"]):
        raise ModelFailure(describe(settings), "echoed prompt", facts=facts)
    return _answer(settings, facts, given, text, redactor, lang, started)


def echoed(text: str, prompt: str) -> bool:
    """A base model (not instruction-tuned) continues its prompt instead of answering: the facts come back
    with their headers, or most of the reply is the prompt's own lines."""
    lines = [line.strip() for line in text.splitlines() if len(line.strip()) >= 20]
    if not lines:
        return False
    known = {line.strip() for line in prompt.splitlines()}
    share = sum(line in known for line in lines) / len(lines)
    return share >= 0.8 or (share >= 0.3 and FACT_HEADER.search(text) is not None)


def _generate(chat: Any, messages: list[dict[str, str]], streaming: bool, redactor: Redactor,
              on_event: EventSink) -> str:
    if not streaming:
        text = _text(chat.invoke(messages).content)
        on_event(Token(redactor.restore(text)))
        return text
    pieces: list[str] = []
    for chunk in chat.stream(messages):
        if piece := _text(chunk.content):
            pieces.append(piece)
            on_event(Token(redactor.restore(piece)))
    return "".join(pieces)


def _announce(facts: Facts, on_event: EventSink) -> None:
    """The gathering shown as steps after the probes' own: the search, and the job's diagnosis."""
    step = len(facts.results)
    step += 1
    on_event(StepStarted(step, "search_docs", {"query": facts.question.text[:200]}))
    on_event(StepFinished(step, "search_docs", f"{len(facts.citations)} section(s)"))
    if facts.job is not None and facts.job.root_cause is not None:
        step += 1
        name = "hang_snapshot" if facts.job.kind == "hang" else "job_triage"
        on_event(StepStarted(step, name, {}))
        on_event(StepFinished(step, name, facts.job.root_cause.summary[:300]))


def _answer(settings: Settings, facts: Facts, given: list[Fact], text: str, redactor: Redactor, lang: Lang,
            started: float) -> Answer:
    model_ms = (time.perf_counter() - started) * 1000
    kinds = {f.n: f.kind for f in given}
    names = {f.name: f.n for f in given}
    grounded_text, used, _ = ground_numbers(text, kinds, names)
    answer_text = redactor.restore(grounded_text).strip()
    if not used:
        answer_text = say("ungrounded", lang) + "\n\n" + answer_text
    cited_probes = {f.name: f.n for f in given if f.kind == "probe" and f.n in used}
    findings = [replace(f, related=sorted(set(f.related) | {cited_probes[f.probe]})) if f.probe in cited_probes else f
                for f in facts.findings]
    job_fact = next((f for f in given if f.kind == "job"), None)
    if job_fact is not None and facts.job is not None and facts.job.root_cause is not None:
        root = facts.job.root_cause
        findings.append(FindingView(job_fact.name, "problem", f"ROOT_CAUSE_{root.category.upper()}", root.summary,
                                    "; ".join(root.evidence[:3]), [job_fact.n] if job_fact.n in used else []))
    steps = [{"tool": "search_docs", "args": {"query": facts.question.text[:200]},
              "result": f"{len(facts.citations)} section(s)", "cached": False}]
    steps += [{"tool": r.probe, "args": {}, "result": f"{r.status}: {r.summary}"[:300], "cached": False}
              for r in facts.results]
    if job_fact is not None:
        steps.append({"tool": job_fact.name, "args": {}, "result": redactor.restore(job_fact.text.split("\n", 1)[-1])[:300],
                      "cached": False})
    timings = dict(facts.timings)
    timings["model"] = model_ms
    timings["total"] = (time.perf_counter() - facts.started) * 1000
    return Answer(
        question=facts.question.text, answer=answer_text, citations=[c for c in facts.citations if c.n in kinds],
        findings=findings, no_match=facts.no_match, backend=describe(settings), timings_ms=timings,
        error_lines=facts.errors, recognised=facts.recognised, id=facts.question.id, steps=steps,
        grounded=bool(used), diagnosis=facts.job, mode="explain", lang=facts.question.language,
    )
