"""Is this question a follow-up of the conversation, or a new question? Decided once, for every front end.

A follow-up refers to what came before ("how do I fix it?", "这个错误怎么解决", "and with 4 GPUs?") and has
no error, failure subject or log of its own; it inherits the earlier turn's question, log lines and
diagnosis. A question that stands on its own (its own error line, its own failure subject such as an OOM,
an NCCL timeout or a hang (卡住), or its own log) starts fresh, however short it is. A log belongs to the
turn it was uploaded with and to the follow-ups about that turn, and the answer says it used it.

The words and patterns live in ``agent/data/conversation.json``; every pattern is linear in the text.

API for front ends (``agent.core.Troubleshooter.ask`` applies the decision; a front end only passes the
conversation as ``Question.history``, oldest first):

- a user turn:       ``user_turn(question, log_head=..., log_errors=[...], log_name="train.log", log_paths=[...])``
  -> ``{"role": "user", "content": question, "log_head": str, "log_errors": [str], "log_name": str,
  "log_paths": [str]}``; every key but ``role`` and ``content`` is optional. ``log_name`` (what the user calls
  the file) and ``log_paths`` (files still on disk, re-read for the full triage) extend the base format.
- an assistant turn: ``assistant_turn(answer)`` -> ``{"role": "assistant", "content": markdown,
  "diagnosis": short root-cause text}`` (``diagnosis`` optional; it is what a follow-up is searched with).
- ``follow_up_context(text, history, has_own_log=...)``: the ``Context`` the question follows up on, or None
  for a new question. ``context_note(context, lang)``: the line an answer to a follow-up starts with.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING, Any

from common.hang_words import expand
from common.language import Lang
from common.textsafe import escape_markdown

if TYPE_CHECKING:
    from agent.answer import Answer

MAX_CONTEXT_CHARS = 3000
NOTE_QUESTION_CHARS = 80
DIAGNOSIS_CHARS = 300


@dataclass(frozen=True)
class Patterns:
    error_line: re.Pattern[str]
    subjects: dict[str, re.Pattern[str]]
    related: dict[str, set[str]]  # a subject and the ones a follow-up about it may bring up (a hang and NCCL)
    references: re.Pattern[str]
    deictics: re.Pattern[str]
    continuations: re.Pattern[str]
    elliptical: re.Pattern[str]
    notes: dict[str, dict[str, str]]


def _any(patterns: Sequence[str], flags: int = re.IGNORECASE) -> re.Pattern[str]:
    return re.compile("|".join(f"(?:{expand(p)})" for p in patterns), flags)


@cache
def patterns() -> Patterns:
    data: dict[str, Any] = json.loads(
        resources.files("agent").joinpath("data/conversation.json").read_text(encoding="utf-8"))
    return Patterns(
        error_line=_any(data["error_line"], 0),  # an exception's class is capitalised: "this error" is not one
        subjects={name: _any(words) for name, words in data["subjects"].items()},
        related={name: set().union(*(set(f) for f in data["related_subjects"] if name in f), {name})
                 for name in data["subjects"]},
        references=_any(data["references"]), deictics=_any(data["deictics"]),
        continuations=_any(data["continuations"]), elliptical=_any(data["elliptical"]), notes=data["notes"],
    )


@dataclass(frozen=True)
class Context:
    """What a follow-up inherits: the question that started the thread of turns, the log uploaded with it,
    the latest diagnosis, and the follow-ups asked since."""

    question: str
    log_head: str = ""
    log_errors: tuple[str, ...] = ()
    log_name: str = ""
    log_paths: tuple[str, ...] = ()
    diagnosis: str = ""
    follow_ups: tuple[str, ...] = ()

    @property
    def has_log(self) -> bool:
        return bool(self.log_head or self.log_errors or self.log_paths)

    def text(self) -> str:
        """What retrieval adds to a follow-up: the first question (bounded), the diagnosis, the follow-ups."""
        parts = [self.question[:MAX_CONTEXT_CHARS], self.diagnosis, *self.follow_ups[-2:]]
        return "\n".join(p for p in parts if p.strip())

    def evidence(self) -> str:
        """Everything the earlier turns showed, for telling whether a follow-up's subject is theirs."""
        return "\n".join([self.text(), *self.log_errors, self.log_head[:MAX_CONTEXT_CHARS]])


def subjects_of(text: str) -> set[str]:
    """The failure subjects a text names (oom, hang, distributed, port, ...)."""
    return {name for name, pattern in patterns().subjects.items() if pattern.search(text)}


def has_error_line(text: str) -> bool:
    """A pasted error of its own (an exception's class, a traceback, NCCL's or CUDA's own words)."""
    return patterns().error_line.search(text) is not None


def refers_back(text: str) -> bool:
    """The question points at something said before ("it", "这个错误", "and with 4 GPUs?", "怎么解决？")."""
    p = patterns()
    return any(pattern.search(text) for pattern in (p.references, p.deictics, p.continuations, p.elliptical))


def is_follow_up(text: str, previous: Context | None, *, has_own_log: bool = False) -> bool:
    """Whether ``text`` continues ``previous`` rather than asking something new.

    New: nothing before it; its own log or error line; a failure subject of its own that the earlier turns do not
    share, or one it names without pointing back. A follow-up: it points back and has no subject of its own, or
    its subject is the earlier turns' ("how do I fix this OOM?" after an OOM)."""
    if previous is None or has_own_log or has_error_line(text):
        return False
    if not refers_back(text):
        return False
    own = subjects_of(text)
    related = patterns().related
    return not own or any(related[subject] & own for subject in subjects_of(previous.evidence()))


def _user_log(turn: Mapping[str, Any]) -> dict[str, Any]:
    return {"log_head": str(turn.get("log_head") or ""), "log_errors": tuple(map(str, turn.get("log_errors") or ())),
            "log_name": str(turn.get("log_name") or ""), "log_paths": tuple(map(str, turn.get("log_paths") or ()))}


def follow_up_context(text: str, history: Sequence[Mapping[str, Any]], *, has_own_log: bool = False) -> Context | None:
    """The context ``text`` follows up on, or None when it is a new question.

    The earlier turns are read in order with the same rule, so a chain of follow-ups ("how do I fix it?", then
    "and with ZeRO-3?") keeps the question, log and diagnosis that started it."""
    context: Context | None = None
    for turn in history:
        role, content = turn.get("role"), str(turn.get("content") or "")
        if role == "user":
            log = _user_log(turn)
            own_log = bool(log["log_head"] or log["log_errors"] or log["log_paths"])
            if context is not None and is_follow_up(content, context, has_own_log=own_log):
                context = Context(context.question, context.log_head, context.log_errors, context.log_name,
                                  context.log_paths, context.diagnosis, (*context.follow_ups, content))
            else:
                context = Context(content, **log)
        elif role == "assistant" and context is not None and (diagnosis := str(turn.get("diagnosis") or "").strip()):
            context = Context(context.question, context.log_head, context.log_errors, context.log_name,
                              context.log_paths, diagnosis, context.follow_ups)
    return context if is_follow_up(text, context, has_own_log=has_own_log) else None


def context_note(context: Context, lang: Lang) -> str:
    """The line an answer to a follow-up starts with, so the asker sees what it was read with."""
    notes = patterns().notes[lang if lang in patterns().notes else "en"]
    if context.has_log:
        return notes["log"].format(name=escape_markdown(context.log_name or "log"))
    question = " ".join(context.question.split())
    if len(question) > NOTE_QUESTION_CHARS:
        question = question[:NOTE_QUESTION_CHARS].rstrip() + "…"
    return notes["question"].format(question=escape_markdown(question))


def user_turn(question: str, *, log_head: str = "", log_errors: Sequence[str] = (), log_name: str = "",
              log_paths: Sequence[str] = ()) -> dict[str, Any]:
    """A user turn for ``Question.history``; the log keys only when a log came with it."""
    turn: dict[str, Any] = {"role": "user", "content": question}
    if log_head:
        turn["log_head"] = log_head
    if log_errors:
        turn["log_errors"] = list(log_errors)
    if log_name:
        turn["log_name"] = log_name
    if log_paths:
        turn["log_paths"] = [str(p) for p in log_paths]
    return turn


def diagnosis_text(answer: Answer) -> str:
    """The answer's root cause in a line: the job's diagnosis, else the leading section's heading."""
    job = answer.diagnosis
    if job is not None and job.root_cause is not None:
        cause = job.root_cause
        line = " ".join(p for p in (cause.category.replace("_", " "), cause.summary, *cause.evidence[:1]) if p)
        return line[:DIAGNOSIS_CHARS]
    if answer.citations and not answer.no_match:
        first = answer.citations[0]
        return first.title or first.section.split(" > ")[-1]
    return ""


def assistant_turn(answer: Answer, content: str | None = None) -> dict[str, Any]:
    """An assistant turn for ``Question.history``: the answer shown and its diagnosis in a line."""
    turn: dict[str, Any] = {"role": "assistant", "content": answer.answer if content is None else content}
    if diagnosis := diagnosis_text(answer):
        turn["diagnosis"] = diagnosis
    return turn


__all__ = ["Context", "assistant_turn", "context_note", "diagnosis_text", "follow_up_context", "has_error_line",
           "is_follow_up", "refers_back", "subjects_of", "user_turn"]
