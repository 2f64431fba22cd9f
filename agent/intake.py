"""One intake: what any front end received becomes the ``Question`` that ``ask()`` answers.

The CLI (a question, ``--log`` files, standard input, ``--bundle``, ``--pid``), the web chat (a message, an upload
already read under the server's limits, the conversation so far) and Slack (a mention, its attached files, the
thread's earlier turns) each hand over a ``Received``; ``intake()`` reads it once, the same way for all of them:

1. the logs are read once, as one job (``agent.logs.read_logs``);
2. a log with no question asks about the job's root cause, everywhere (not the loudest line);
3. a follow-up is merged with what it follows up on (``agent.conversation`` decides; its new detail is kept and read
   with the earlier question, so "and with DeepSpeed?" asks about DeepSpeed);
4. a question past the length cap is read as the log it is, and a pasted cascade as the job it shows;
5. the language is decided once, from what the asker wrote, and carried to the answer and every renderer;
6. a question with no content (punctuation, one letter, an emoji, zero-width characters, a bare Slack mention) is
   no question: with a log or a bundle they ask, alone it is refused before retrieval (``NoContent``: "ask a
   question or paste the error"), never answered with a confident runbook.

``ask()`` trusts a question that came through here (``Question.lang`` is set); one built by hand (tests, the eval
harness) goes through ``prepare()`` once inside ``ask()``.
"""

from __future__ import annotations

import json
import logging
import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cache
from importlib import resources
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from common.errors import TraindocError, UsageError
from common.language import Lang, language_of, say
from corpus.errorlines import QUESTION_CAP

if TYPE_CHECKING:
    from agent.logs import LogReading
    from agent.question import Question
    from jobs.diagnosis import JobDiagnosis

log = logging.getLogger(__name__)
SLACK_MARKUP = re.compile(r"<[@#!][^>\s]*>")  # <@U024BE7LH>, <#C123|general>, <!here>: who or where, not what
CJK = re.compile(r"[\u4e00-\u9fff]")  # one Chinese character is too little to tell the language by, enough to answer in
MIN_CONTENT = 2  # letters or digits a question needs: "a", "7", "???" and "🤔" ask nothing


class NoContent(UsageError):
    """A question with nothing to answer in it, and nothing else to read (no log, no bundle)."""


def has_content(text: str) -> bool:
    """Whether ``text`` says anything: at least ``MIN_CONTENT`` letters or digits once Slack's mentions and links,
    punctuation, symbols (emoji), spaces and invisible characters are set aside."""
    words = SLACK_MARKUP.sub(" ", text)
    return sum(1 for ch in words if unicodedata.category(ch)[0] in "LN") >= MIN_CONTENT


# Full-width Latin letters and digits (an input method's "ＮＣＣＬ", "ｈｉ") read as the ASCII they stand for: the
# documents, the error messages and the encoder's vocabulary spell them so. Full-width punctuation, which Chinese
# prose uses for its own commas and colons, is left as it is.
WIDE_LATIN = {code: code - 0xFEE0 for start, end in ((0xFF10, 0xFF19), (0xFF21, 0xFF3A), (0xFF41, 0xFF5A))
              for code in range(start, end + 1)}


# An input method's homophone for a word the documents and the failures use: 现存 ("now exists", xiàncún) typed for
# 显存 (GPU memory, xiǎncún) where GPU memory runs short ("报现存不足"); 现存储 (现 + 存储, "now ... storage") is not.
HOMOPHONES = ((re.compile(r"现存(?!储)(?=(?:一直|还是|还|就|都|也)?(?:不足|不够|溢出|爆|占满|满了|泄[漏露]|OOM|oom))"), "显存"),)


def ascii_letters(text: str) -> str:
    """``text`` with its full-width Latin letters and digits as ASCII."""
    return text.translate(WIDE_LATIN)


def as_meant(text: str) -> str:
    """What an input method typed, as the asker meant it: full-width letters as ASCII (``ascii_letters``), a
    homophone typo of a failure's own word as that word (HOMOPHONES)."""
    text = ascii_letters(text)
    for typo, word in HOMOPHONES:
        text = typo.sub(word, text)
    return text


@dataclass(frozen=True)
class Received:
    """What a front end received, as it received it."""

    text: str = ""  # what the user typed (may be empty: a log alone)
    logs: Sequence[Path] = ()  # log files on disk; Path("-") for ``stdin``
    stdin: IO[bytes] | None = None
    reading: LogReading | None = None  # logs a front end already read under its own limits (the web's upload)
    bundle: Path | None = None  # a `traindoc probe --json` bundle: diagnose that machine, not this one
    history: Sequence[Mapping[str, Any]] = ()  # the conversation so far, oldest first (agent.conversation)
    probes: bool = True  # may this machine be probed (the CLI: yes; a server: only when its operator says so)
    python: str | None = None
    pid: int | None = None  # the job to snapshot on this machine (several may run)
    id: str | None = None


def intake(received: Received) -> Question:
    """The one ``Question`` for what a front end received (see the module's docstring for what is decided)."""
    from agent.question import Question

    reading = received.reading
    if reading is None and (received.logs or received.stdin is not None):
        from agent.logs import read_logs

        reading = read_logs(list(received.logs) or [Path("-")], received.stdin, received.text)
    head, errors, job = (reading.head, list(reading.errors), reading.diagnosis) if reading is not None else ("", [], None)
    typed = received.text.strip() if has_content(received.text) else ""
    text = typed or asked_by(head, errors, job, received.bundle)
    if not text and received.text.strip():  # typed, but nothing in it, and no log or bundle asks instead
        raise NoContent(say("intake.no_content", "zh" if CJK.search(received.text) else language_of(received.text)))
    question = Question(
        text=text, log_head=head, log_errors=errors, id=received.id, probes=received.probes,
        log_paths=tuple(p for p in received.logs if str(p) != "-" and p.is_file()), python=received.python,
        bundle=received.bundle, history=[dict(turn) for turn in received.history], job=job, pid=received.pid,
    )
    return prepare(question, typed=typed)


def asked_by(head: str, errors: Sequence[str], job: JobDiagnosis | None, bundle: Path | None) -> str:
    """What a log (or a bundle) with no question asks: the job's root cause where triage names one, else its first
    error line, else its first line; a bundle alone asks what is wrong with its machine."""
    if job is not None and job.root_cause is not None and job.root_cause.category != "unknown":
        return job.root_cause.summary
    if errors:
        return errors[0]
    if first := next((line.strip() for line in head.splitlines() if line.strip()), ""):
        return first
    return say("bundle_question", "en") if bundle is not None else ""


def prepare(question: Question, typed: str | None = None) -> Question:
    """The reading every question gets once: the conversation's context, a long question taken as its log, a
    pasted cascade as its job, and the language. ``typed``: what the asker wrote themselves (None: the text)."""
    question = in_context(question)
    if (folded := as_meant(question.text)) != question.text:
        question = replace(question, text=folded)
    if question.job is None and not question.log_errors and not question.log_head and len(question.text) > QUESTION_CAP:
        from agent.logs import long_question  # a question past the cap is a pasted log, read as one

        if (pasted := long_question(question.text)) is not None:
            asked, reading = pasted
            question = replace(question, text=asked, log_head=reading.head, log_errors=reading.errors,
                               job=reading.diagnosis)
    if question.job is None and not question.log_errors and not question.log_head and _may_hold_a_job(question.text):
        from agent.logs import pasted_job

        if (job := pasted_job(question.text)) is not None:  # a pasted cascade is read as the job it shows
            question = replace(question, job=job)
    return replace(question, lang=_language(question, question.text if typed is None else typed))


def _may_hold_a_job(text: str) -> bool:
    """A question of several lines can hold a cascade; one line only a launcher's report of how a rank ended (its
    literal words, jobs/data/signatures.json "exits"): the job reader is not imported for any other one-liner."""
    return "\n" in text.strip() or any(literal in text for literal in _exit_literals())


@cache
def _exit_literals() -> tuple[str, ...]:
    table = json.loads(resources.files("jobs").joinpath("data/signatures.json").read_text(encoding="utf-8"))
    return tuple(str(row["literal"]) for row in table["exits"])


def _language(question: Question, typed: str) -> Lang:
    """The asker's language: of what they typed; with nothing typed (a log alone), of their last words in the
    conversation; else English."""
    if typed.strip():
        return language_of(typed)
    said = [str(t.get("content") or "") for t in question.history if t.get("role") == "user"]
    return language_of(said[-1]) if said else language_of(question.text)


def in_context(question: Question) -> Question:
    """The question as the conversation makes it (agent.conversation decides): a follow-up inherits the earlier
    turn's log (re-read when its files are still there, for the whole job's triage) and is searched with the
    earlier question and diagnosis; a new question starts fresh, without the earlier turns."""
    from agent.conversation import follow_up_context

    if question.follows is not None or not question.history:
        return question
    context = follow_up_context(question.text, question.history, has_own_log=question.has_own_log())
    if context is None:
        return replace(question, history=[])
    job, paths = None, tuple(Path(p) for p in context.log_paths if Path(p).is_file())
    if paths:
        from agent.logs import read_logs

        try:
            job = read_logs(paths, question=context.question).diagnosis
        except TraindocError as exc:  # the file went away or changed: its lines in the history still serve
            log.debug("re-reading the earlier log: %s", exc)
            paths = ()
    elif not context.has_log and "\n" in context.question.strip():
        from agent.logs import pasted_job

        job = pasted_job(context.question)  # the earlier question was a pasted cascade
    return replace(question, follows=context, log_head=context.log_head, log_errors=list(context.log_errors),
                   log_paths=paths, job=job)


__all__ = ["NoContent", "Received", "asked_by", "has_content", "in_context", "intake", "prepare"]
