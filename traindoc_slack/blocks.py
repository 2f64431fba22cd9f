"""Block Kit rendering of an answer for Slack: diagnosis and fixes, Sources, probe findings, buttons.
Everything posted is redacted first (secrets never reach Slack) and escaped for mrkdwn: no link, mention
or ``<!channel>`` comes from a log line, a bundle or a question, and no invisible character (a right-to-left
override shows as ``<U+202E>``). Every mrkdwn text object is ``"verbatim": true``: Slack then links no bare URL,
e-mail address or channel name in it, while the ``<url|title>`` links traindoc writes (Sources) stay links."""

from __future__ import annotations

from typing import Any

from agent.answer import Answer
from agent.summary import INLINE_MARK, flag_line
from common.language import Lang, say
from common.redaction import Redactor
from common.textsafe import GRAVE, escape_mrkdwn
from traindoc_slack.feedback import button_value
from traindoc_slack.mrkdwn import NOTIFICATION_CHARS, plain_line, to_mrkdwn
from traindoc_slack.mrkdwn import plain as plain_text
from traindoc_slack.sources import source_line

SECTION_LIMIT = 2900  # Slack's section text limit is 3000 characters
MAX_BLOCKS = 45


def _chunks(text: str, limit: int = SECTION_LIMIT) -> list[str]:
    """Sections of at most ``limit`` characters (plus a closing fence), split at lines; a code block split
    across sections is closed and reopened so each renders on its own. A line longer than a section is cut."""
    parts: list[str] = []
    current = ""
    in_code = False
    room = limit - 8  # a piece always fits after a reopened fence, with the closing fence
    lines = (whole[i:i + room] for whole in text.splitlines(keepends=True) for i in range(0, max(len(whole), 1), room))
    for line in lines:
        if len(current) + len(line) > limit and current:
            if in_code:
                current += "```"
            parts.append(current)
            current = "```\n" if in_code else ""
        current += line
        if line.strip().startswith("```"):
            in_code = not in_code
    if current.strip():
        parts.append(current)
    return parts


def notification_line(answer: Answer, redact: Any = None) -> str:
    """The message's ``text``: what a notification, a screen reader and search show. Plain text (no
    ``### Likely cause`` markup), one line: the job's root cause when the logs name one, else the answer's
    first line (its verdict). A fix advice.review flagged carries its flags (agent.summary.flag_line), never clipped:
    the notification has no room for the notes under it."""
    redact = redact or Redactor().redact
    # masked before it is made one line: a secret's shape may span lines (a .netrc entry)
    cause = redact(answer.diagnosis.root_cause.summary) if answer.diagnosis and answer.diagnosis.root_cause else ""
    verdict = getattr(answer, "verdict", None)
    flags = ""
    if verdict is not None and not cause:
        parts = [plain_text(redact(verdict.cause)), plain_text(redact(verdict.where))]
        if fix := plain_text(redact(verdict.fix_line or INLINE_MARK.sub("", verdict.fix_text)), 160):
            parts.append(say("slack_fix", answer.lang, text=fix))
            flags = plain_text(redact(flag_line(verdict, answer.lang)), NOTIFICATION_CHARS // 2)
        cause = " · ".join(p for p in parts if p)
    room = NOTIFICATION_CHARS - (len(flags) + 1 if flags else 0)
    line = plain_text(cause, room) if cause else plain_line(redact(answer.answer))
    line = f"{line} {flags}" if flags and line else line
    return escape_mrkdwn(redact(line or plain_text(redact(answer.question), 200)))


def answer_blocks(answer: Answer, answer_id: str, *, probes_button: bool,
                  share_button: bool = False, full: bool = False) -> tuple[str, list[dict[str, Any]]]:
    """(notification text, blocks), redacted: the brief answer (agent.brief) with a "Full answer" button, or the
    whole one (``full``: what that button posts). A long answer is shortened, never the sources or the buttons.
    The buttons carry what feedback needs after a restart (``traindoc_slack.feedback``); ``share_button`` offers to
    post an ephemeral answer to the channel."""
    redact = Redactor().redact
    lang = answer.lang  # every label in the asker's language
    fallback = notification_line(answer, redact)
    head: list[dict[str, Any]] = []
    if answer.notice:
        head.append({"type": "context", "elements": [mrkdwn(plain(say("slack_note", lang, text=answer.notice), redact))]})
    tail: list[dict[str, Any]] = []
    brief = not full and answer.shown != answer.answer  # the rest a click away
    if answer.citations:
        tail.append({"type": "divider"})
        # every source, linked: a Slack message has no 40-row terminal to fit, and the links are how readers check
        tail.append(_section(f"*{say('slack_sources', lang)}*\n" + "\n".join(source_line(c, redact, lang)
                                                                             for c in answer.citations)))
    problems = [f for f in answer.findings if f.status in ("problem", "error", "timed_out")]
    if problems:
        lines = [f"• *{plain(f.code, redact)}* ({plain(f.probe, redact)}): {plain(f.summary, redact)}"
                 + (f"\n   {say('slack_fix', lang, text=plain(f.fix, redact))}" if f.fix else "") for f in problems]
        tail.append(_section(f"*{say('slack_probe_findings', lang)}*\n" + "\n".join(lines)))
    value = button_value(answer, answer_id, fallback)
    elements = [_button(":+1:", "traindoc_feedback_up", value), _button(":-1:", "traindoc_feedback_down", value)]
    if brief:
        elements.append(_button(say("slack_full_answer", lang), "traindoc_full_answer", value))
    if share_button:
        elements.append(_button(say("slack_share", lang), "traindoc_share", value))
    if probes_button:
        elements.append(_button(say("slack_run_probes", lang), "traindoc_run_probes", answer_id))
    tail.append({"type": "actions", "elements": elements})
    # 4 characters short of the section limit: room for a code fence closed at the end of a chunk
    text = answer.shown if brief else answer.answer
    body: list[dict[str, Any]] = [_section(part) for part in _chunks(to_mrkdwn(redact(text)), SECTION_LIMIT - 4)]
    room = MAX_BLOCKS - len(head) - len(tail)
    if len(body) > room:
        body = body[:room - 1] + [{"type": "context", "elements": [
            mrkdwn(f"_{say('slack_shortened', lang)}_")]}]
    return fallback[:SECTION_LIMIT], head + body + tail


def probe_blocks(results: list[Any], lang: Lang = "en") -> list[dict[str, Any]]:
    redact = Redactor().redact
    lines = [f"• `{_code(r.probe, redact)}`: *{plain(str(r.status), redact)}* — {plain(r.summary, redact)}" for r in results]
    return [_section(f"*{say('slack_probe_report', lang)}*\n" + "\n".join(lines))]


def plain(text: str, redact: Any = None) -> str:
    """A string from an answer, a log or a bundle, as inert mrkdwn: secrets masked, ``& < >`` escaped."""
    return escape_mrkdwn((redact or Redactor().redact)(text))[:SECTION_LIMIT]


def _code(text: str, redact: Any) -> str:
    return plain(text, redact).replace("`", GRAVE)


def mrkdwn(text: str) -> dict[str, Any]:
    """A mrkdwn text object Slack shows as written: no bare URL, e-mail address or #channel made a link."""
    return {"type": "mrkdwn", "text": text[:SECTION_LIMIT], "verbatim": True}


def _section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": mrkdwn(text)}


def _button(label: str, action_id: str, value: str) -> dict[str, Any]:
    return {"type": "button", "text": {"type": "plain_text", "text": label, "emoji": True}, "action_id": action_id, "value": value}


__all__ = ["answer_blocks", "mrkdwn", "notification_line", "plain", "probe_blocks", "to_mrkdwn"]
