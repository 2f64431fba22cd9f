"""The verdict an answer leads with, and the one line a terminal ends on.

Every offline answer starts with a short block: the cause, where (rank, host, ``file:line``, or the machine a
probe measured), the first fix as a command to copy, and the confidence with what it rests on; the detail
follows. It is read from the answer's own facts (the job's diagnosis, the probes' findings, the citations) and
from the fixes the composer already chose (the first code block under the Fixes heading), so the verdict never
says anything the detail below does not. The words live in data/guidance.json.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from advice.review import NOTE_PREFIX
from agent.exceptions import recognise
from common.language import Lang, say
from common.textsafe import cells, clip_words, code_span, fence, flanking_safe, segments, strong
from runbooks.catalog import SOURCE

if TYPE_CHECKING:
    from agent.answer import Answer

LOG_PROBE = "log_grep"  # the probe that greps the user's own log files
CAUSE_CHARS = 200  # the verdict's cause: a long root-cause summary is clipped at a word, with an ellipsis
FIX_LINES = 4  # the verdict shows the first fix's first lines; the whole fix is in the detail below
FIX_TEXT_CHARS = 110  # the first fix's sentence, clipped at a word: the command below is what to copy
LEAD_LINES = 6  # a verdict within an answer's first lines leads it (a follow-up's note may come first)
MIN_CAUSE_CHARS = 40  # the summary line keeps this much of the cause even when the command is long (it overflows)
ITEM_NUMBER = re.compile(r"^\s*(?:\*\*)?\d+[.)、](?:\*\*)?\s*")
CITED = re.compile(r"\s*(?:\[\d+\])+\s*$")
INLINE_CODE = re.compile(r"`([^`\n]+)`")
TRAILING_COMMENT = re.compile(r"\s+#\s.*$")
PARENTHESIS = re.compile(r"\s*[(（][^()（）]*[)）]")
# advice.review's words: a note under a code block ("> ⚠ traindoc: `NAME` is unknown upstream: <reason> (<source>)"),
# whose head up to the colon after the name is the flag a one-line surface carries; a mark after a prose line
# (" ⚠ [traindoc: unknown upstream: <reason>]"), kept whole where the sentence before it is clipped
NOTE_HEAD = re.compile(r"^>?\s*⚠\s*traindoc\s*[:：]\s*(?P<head>[^`:：\n]*`[^`\n]+`[^:：\n]*)")
INLINE_MARK = re.compile(r"\s*⚠ \[traindoc[:：]\s*(?P<verdict>[^:：\]]+)[:：](?P<reason>[^\]]*)\]")


@dataclass(frozen=True)
class Verdict:
    cause: str
    where: str = ""
    fix_text: str = ""  # the first fix's sentence, when it has one
    fix_code: str = ""  # its command(s), as printed below
    confidence: float | None = None
    basis: str = ""  # what the confidence rests on, in the answer's language
    next_step: str = ""  # no fix: what to collect next
    proven: bool = False  # the cause rests on evidence (the logs, a probe, the pasted message), not a document's match
    fix_notes: tuple[str, ...] = ()  # what advice.review said under the first fix's block (an unknown upstream name)

    @property
    def flags(self) -> tuple[str, ...]:
        """What advice.review flagged in the first fix, one short phrase each in the answer's language ("`NAME` is
        unknown upstream"): what a surface of one line (a notification) carries next to the fix, without its notes."""
        heads = [match.group("head").strip() if (match := NOTE_HEAD.match(note)) else
                 clip_words(note.removeprefix(NOTE_PREFIX).lstrip(" :："), 80) for note in self.fix_notes]
        for mark in INLINE_MARK.finditer(self.fix_text):
            named = INLINE_CODE.search(mark.group("reason"))
            heads.append(f"{named.group(0)} {mark.group('verdict').strip()}" if named else mark.group("verdict").strip())
        return tuple(dict.fromkeys(heads))

    @property
    def fix_line(self) -> str:
        """The first command of the first fix: what a one-line summary can carry."""
        for line in self.fix_code.splitlines():
            if line.strip() and not line.lstrip().startswith("#"):
                return TRAILING_COMMENT.sub("", line.strip())
        return ""

    def to_json(self) -> dict[str, object]:
        return {"cause": self.cause, "where": self.where, "fix": self.fix_code or self.fix_text,
                "fix_flags": list(self.flags),  # what advice.review flagged in that fix, next to it
                "confidence": None if self.confidence is None else round(self.confidence, 3),
                "basis": "evidence" if self.proven else "match"}


def _headings(key: str) -> set[str]:
    return {say(key, lang) for lang in ("en", "zh")}  # type: ignore[arg-type]


def _section(markdown: str, headings: set[str]) -> str:
    """The text under the first ``### <heading>`` of ``headings``, up to the next heading of that level."""
    lines = markdown.split("\n")
    for i, line in enumerate(lines):
        if line.startswith("### ") and line[4:].strip() in headings:
            end = next((j for j in range(i + 1, len(lines)) if lines[j].startswith("### ")), len(lines))
            return "\n".join(lines[i + 1:end])
    return ""


def drop_section(markdown: str, heading: str) -> str:
    """``markdown`` without the section under ``### heading``."""
    lines = markdown.split("\n")
    for i, line in enumerate(lines):
        if line.startswith("### ") and line[4:].strip() == heading:
            end = next((j for j in range(i + 1, len(lines)) if lines[j].startswith("### ")), len(lines))
            return "\n".join(lines[:i] + lines[end:]).strip()
    return markdown


def first_fix(markdown: str) -> tuple[str, str]:
    """(sentence, code) of the first fix under the answer's Fixes heading (the runbook's or the documents'): the
    code dedented, without its fences; the sentence without its number and source note. Where the fixes are a
    numbered list, the first item is the first fix, with or without a command ("fix what the missing rank was
    doing" comes before "only then raise the timeout"); otherwise the first fix that has a command."""
    for key in ("fixes", "more_fixes"):
        section = _section(markdown, _headings(key))
        before = ""
        for kind, piece in segments(section):
            if kind != "fence":
                before += piece
                if len(items := _fix_items(before)) >= 2:  # two fixes before any command block: the first has none
                    return items[0], _command_in(items[0])
                continue
            body = piece.rstrip("\n").split("\n")[1:-1]
            indent = min((len(line) - len(line.lstrip()) for line in body if line.strip()), default=0)
            code = "\n".join(line[indent:] for line in body).strip("\n")
            if not code.strip():
                continue
            prose = [line.strip() for line in before.split("\n") if line.strip() and not line.lstrip().startswith(">")]
            return _sentence_of(prose[-1] if prose else ""), code
        if items := _fix_items(before):  # numbered fixes, none with a command block
            return items[0], _command_in(items[0])
    return "", ""


def first_fix_notes(markdown: str) -> tuple[str, ...]:
    """The notes advice.review put right under the first fix's code block (``> ⚠ traindoc ...``: a name upstream does
    not know, a corrected line): the verdict and the summary line carry them, as the Fixes block does."""
    for key in ("fixes", "more_fixes"):
        block: list[str] | None = None
        lines = iter(_section(markdown, _headings(key)).split("\n"))
        for line in lines:
            if not line.lstrip().startswith("```"):
                if block is not None:
                    block.append(line)
                continue
            if block is None:
                block = []
                continue
            if any(code.strip() for code in block):  # the first fix's block: the notes are the lines right under it
                notes = []
                for after in lines:
                    if after.strip() == ">":  # the bare quote line between two notes (advice.review): read on
                        continue
                    if not after.lstrip().startswith(NOTE_PREFIX):
                        break
                    notes.append(after.strip())
                return tuple(notes)
            block = None
    return ()


def _fix_items(text: str) -> list[str]:
    """The sentences of the numbered fixes in ``text`` (the composer's "1. from [n] title:" labels left out)."""
    items = (_sentence_of(line) for line in text.split("\n") if line.strip() and ITEM_NUMBER.match(line))
    return [item for item in items if item]


def _sentence_of(line: str) -> str:
    sentence = line.strip()
    if sentence.startswith("**") or sentence.endswith((":", "：")):
        return ""  # the composer's "1. from [n] title:": a label, not a sentence
    return CITED.sub("", SOURCE.sub("", ITEM_NUMBER.sub("", sentence)).rstrip())  # a runbook item's "(source: URL)"


LONE_FLAG = re.compile(r"^\s*--?[\w-]+\s*$")  # "`--mem`" in a sentence names an option, it is no command to paste


def _command_in(text: str) -> str:
    """The first inline code span of ``text`` that is a command (``pip install ...``), or ""."""
    from agent.compose import COMMAND_LINE

    return next((span for span in INLINE_CODE.findall(text) if COMMAND_LINE.match(span) and not LONE_FLAG.match(span)),
                "")


def _next_step(markdown: str) -> str:
    section = _section(markdown, {say("collect_heading", lang) for lang in ("en", "zh")})  # type: ignore[arg-type]
    return next((line[2:].strip() for line in section.split("\n") if line.startswith("- ")), "")


def _job_next(answer: Answer, lang: Lang) -> str:
    """The first thing the job's diagnosis says would tell (a stack snapshot, NCCL_DEBUG=INFO), in ``lang``."""
    job = answer.diagnosis
    if job is None:
        return ""
    own = job.wording.get(lang, {}).get("next")
    items = own.splitlines() if own else job.next_evidence
    return items[0].lstrip("- ").strip() if items else ""


def _where(answer: Answer, lang: Lang) -> str:
    root = answer.diagnosis.root_cause if answer.diagnosis is not None else None
    if root is None:
        return ""
    parts = []
    if root.rank is not None:
        parts.append(say("rank", lang, rank=root.rank))
    if root.host:
        parts.append(say("host", lang, host=root.host))
    if root.where:
        parts.append(code_span(root.where))
    return ("，" if lang == "zh" else ", ").join(parts)


def _shown_title(answer: Answer) -> str:
    top = answer.citations[0]
    return f"{top.title or top.section.split(' > ')[-1]} [{top.n}]"


def verdict_of(answer: Answer, markdown: str | None = None) -> Verdict | None:
    """What the answer concludes: from a probe's measured problem, the job's root cause, or the documents. Where its
    first fix is the Fixes block's first command, the review's notes under that block come with it."""
    verdict = _verdict_of(answer, markdown)
    text = answer.answer if markdown is None else markdown
    if verdict is None or not verdict.fix_code or verdict.fix_code != first_fix(text)[1]:
        return verdict
    notes = first_fix_notes(text)
    return replace(verdict, fix_notes=notes) if notes else verdict


def _verdict_of(answer: Answer, markdown: str | None = None) -> Verdict | None:
    lang = answer.lang
    text = answer.answer if markdown is None else markdown
    sentence, code = first_fix(text)
    root = answer.diagnosis.root_cause if answer.diagnosis is not None else None
    known = root is not None and root.category != "unknown"  # the job's own logs, read as a whole, name the cause
    measured = next((f for f in answer.findings if f.status == "problem" and f.explains
                     and not (known and f.probe == LOG_PROBE)), None)  # a grep of the same log says less than its triage
    if measured is not None:  # what a probe measured is the verdict, and its own fix comes first
        command = _command_in(measured.fix)
        return Verdict(clip_words(measured.summary, CAUSE_CHARS), "", measured.fix if command else sentence or measured.fix,
                       command or code, answer.confidence, say("from_probe", lang), proven=True)
    if root is not None and root.category != "unknown" and answer.citations and not answer.no_match:
        return Verdict(_shown_title(answer), _where(answer, lang), sentence, code, root.confidence,
                       say("from_log", lang), proven=True)
    if root is not None:
        summary = answer.diagnosis.wording.get(lang, {}).get("root") if answer.diagnosis is not None else None
        return Verdict(clip_words(summary or root.summary, CAUSE_CHARS), _where(answer, lang), sentence, code,
                       root.confidence if root.category != "unknown" else None,
                       say("from_log", lang) if root.category != "unknown" else "",
                       "" if code else clip_words(_job_next(answer, lang) or _next_step(text), CAUSE_CHARS),
                       proven=root.category != "unknown")
    if answer.citations and not answer.no_match:
        basis = say(f"lead_basis_{answer.lead.rule}", lang) if answer.lead is not None and answer.lead.rule != "diagnosis" \
            else say("documents_match", lang)  # what the lead rests on (agent.leads)
        proven = answer.lead is not None and bool(getattr(answer.lead, "established", False))
        if code and _doubted(answer, code) and (raised := recognise([*answer.error_lines, *answer.question.splitlines()])):
            # traindoc's own review doubts the section's first command (a diagnostic sold as a fix, an unsafe
            # default): for the generic exception the report raises, the command that finds its cause comes first
            return Verdict(_shown_title(answer), "", say("first_check_doubted", lang), raised.check, answer.confidence, basis,
                           proven=proven)
        return Verdict(_shown_title(answer), "", sentence, code, answer.confidence, basis, proven=proven)
    if not text.strip():
        return None
    if (raised := recognise([*answer.error_lines, *answer.question.splitlines()])) is not None:
        # nothing answers a generic exception: the verdict is what it means, where it was raised, its first check
        return Verdict(say(f"exc_{raised.name}", lang, thing=raised.thing), code_span(raised.place) if raised.place else "",
                       say("exc_fix_item", lang), raised.check, None, say("exc_no_runbook", lang))
    if answer.unnamed_code:  # a team's own code: which document would know it is the team's to say
        return Verdict(say("code_in_no_document", lang, code=code_span(answer.unnamed_code)),
                       next_step=say("code_in_no_document_next", lang))
    cause = say("no_cause", lang) + (f" ({', '.join(answer.recognised)})" if answer.recognised else "")
    return Verdict(cause, next_step=clip_words(_next_step(text), CAUSE_CHARS))


DOUBTED = frozenset({"misleading", "harmful", "wrong", "stale"})  # a claim's verdicts that make a command no first fix


def _doubted(answer: Answer, code: str) -> bool:
    """The first citation's review judged a command of ``code`` misleading or worse (advice.claims)."""
    lines = {line.strip() for line in code.split("\n")}
    return any(flag.kind == "claim" and flag.verdict in DOUBTED and (flag.shown or flag.original).strip() in lines
               for flag in answer.citations[0].advice)


def _label(key: str, lang: Lang) -> str:
    return strong(say(key, lang)) + ("：" if lang == "zh" else ": ")


def verdict_markdown(verdict: Verdict, lang: Lang) -> str:
    """The block an answer starts with: a short list, then the first fix's command in a code block."""
    lines = [f"### {say('verdict_heading', lang)}", "", f"- {_label('cause', lang)}{verdict.cause}"]
    if verdict.where:
        lines.append(f"- {_label('where', lang)}{verdict.where}")
    # One scale, said for what it is: evidence (what the logs, a probe or the pasted message prove) has no number; a
    # document's match has its calibrated chance of answering.
    if verdict.proven and verdict.basis:
        lines.append(f"- {_label('evidence', lang)}{verdict.basis}")
    elif verdict.confidence is not None:
        basis = (f"（{verdict.basis}）" if lang == "zh" else f" ({verdict.basis})") if verdict.basis else ""
        lines.append(f"- {_label('match', lang)}{say('match_meaning', lang, confidence=verdict.confidence)}{basis}")
    elif verdict.basis:
        lines.append(f"- {_label('evidence', lang)}{verdict.basis}")
    if verdict.fix_text or verdict.fix_code:
        sentence, marks = _marked(verdict.fix_text)  # the sentence is clipped, never the review's marks after it
        lines.append(f"- {_label('first_fix', lang)}{clip_words(sentence, FIX_TEXT_CHARS)}{marks}".rstrip())
    elif verdict.next_step:
        lines.append(f"- {_label('next_step', lang)}{verdict.next_step}")
    if verdict.fix_code:
        code = verdict.fix_code.split("\n")
        shown = code[:FIX_LINES] + ([f"# … {say('see_below', lang)}"] if len(code) > FIX_LINES else [])
        lines.extend(["", fence(shown, "bash")])
        for i, note in enumerate(verdict.fix_notes):  # flagged here as in the Fixes block: never shown bare
            lines.extend([">", note] if i else [note])  # each note its own paragraph of the quote, as there
    return "\n".join(lines)


def summary_line(verdict: Verdict, lang: Lang, width: int = 80) -> str:
    """One line: the cause (clipped at a word to leave room) and the first fix's command (never clipped). Where the
    command leaves the cause too little room, the command goes on a line of its own: a terminal never wraps the
    line mid-word."""
    tail = say("summary_fix", lang, fix=verdict.fix_line) if verdict.fix_line else ""
    if tail and verdict.fix_notes:  # the command the review flagged: the line says so
        tail += " " + say("advice.fix_flagged", lang)
    elif tail and verdict.flags:  # a command in the fix's sentence, whose marks the line carries
        tail += " " + flag_line(verdict, lang)
    words, key = (verdict.fix_text, "first_fix") if verdict.fix_text else (verdict.next_step, "next_step")
    words, marks = _marked(words)
    if not tail and words:  # a fix or a next step in words: it may be clipped (a command may not)
        label = f" · {say(key, lang)}{'：' if lang == 'zh' else ': '}"
        flagged = " " + flag_line(verdict, lang) if marks else ""  # what the review marked in it: never clipped
        room_left = width - cells(say("summary", lang, cause=verdict.cause)) - cells(label) - cells(flagged)
        command = INLINE_CODE.match(words)
        tail = label + (command.group(1) if command else clip_words(words, max(MIN_CAUSE_CHARS, room_left))) + flagged
    head = say("summary", lang, cause="")
    room = max(MIN_CAUSE_CHARS, width - cells(head) - cells(tail) - 1)
    cause = CITED.sub("", verdict.cause)
    if cells(cause) > room:  # a parenthesis (the variables, the exception class) is the first thing to go
        cause = PARENTHESIS.sub("", cause).strip() or cause
    if tail and cells(head) + MIN_CAUSE_CHARS + cells(tail) > width:  # two lines: the cause, then the fix
        return _fit(head, cause, width) + "\n" + " " * cells(head) + tail.lstrip(" ·")
    return _fit(head, cause, room + cells(head)) + tail


def _marked(sentence: str) -> tuple[str, str]:
    """(``sentence`` without advice.review's marks, the marks as they were written after it)."""
    marks = "".join(mark.group(0) for mark in INLINE_MARK.finditer(sentence))
    return (INLINE_MARK.sub("", sentence).rstrip(), marks) if marks else (sentence, "")


def _joined(flags: tuple[str, ...], lang: Lang) -> str:
    return ("；" if lang == "zh" else "; ").join(flags)


def flag_line(verdict: Verdict, lang: Lang) -> str:
    """The review's flags on the first fix as one parenthesis for a surface of one line ("" where it has none)."""
    return say("fix_flags", lang, flags=_joined(verdict.flags, lang)) if verdict.flags else ""


def _fit(head: str, cause: str, width: int) -> str:
    """``head`` and ``cause`` clipped at a word to ``width`` columns (CJK characters take two)."""
    room = max(8, width - cells(head))
    limit = room
    while limit > 8 and cells(clip_words(cause, limit)) > room:
        limit -= max(1, (cells(clip_words(cause, limit)) - room) // 2)
    return head + clip_words(cause, limit)


def finished(answer: Answer) -> str:
    """The answer's markdown as every front end shows it: the verdict first; what the log shows said once (by the
    job's diagnosis when there is one, not again as findings); emphasis written so CommonMark renders it."""
    lang = answer.lang
    heading = f"### {say('verdict_heading', lang)}"
    body = answer.answer
    if heading in body.split("\n")[:LEAD_LINES] or not body.strip():  # already led (a note may stand above it)
        return flanking_safe(body)
    if answer.diagnosis is not None and answer.diagnosis.root_cause is not None:
        body = drop_section(body, say("log_shows", lang))
    verdict = verdict_of(answer, body)
    if verdict is None:
        return flanking_safe(body)
    return flanking_safe(verdict_markdown(verdict, lang) + "\n\n" + body)


__all__ = ["Verdict", "drop_section", "finished", "first_fix", "flag_line", "summary_line", "verdict_markdown",
           "verdict_of"]
