"""Block Kit rendering of an answer for Slack: diagnosis and fixes, Sources, probe findings, buttons.
Everything posted is redacted first (secrets never reach Slack) and escaped for mrkdwn: no link, mention
or ``<!channel>`` comes from a log line, a bundle or a question."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from agent.answer import Answer
from common.redaction import Redactor
from common.textsafe import GRAVE, escape_mrkdwn, segments

SECTION_LIMIT = 2900  # Slack's section text limit is 3000 characters
MAX_BLOCKS = 45


def to_mrkdwn(markdown: str) -> str:
    """Markdown -> Slack mrkdwn. Outside code: ``& < >`` escaped, headings and bold become *bold*, a Markdown
    link stays text (links come only from traindoc, never from what it quotes). Code: Slack's one fence
    (```), with any backtick inside replaced by a look-alike that cannot end it."""
    out: list[str] = []
    for kind, piece in segments(markdown):
        if kind == "fence":
            lines = piece.split("\n")
            body = [line for line in lines[1:] if line.strip("`~ ") or line == ""]
            closing = "\n" if piece.endswith("\n") else ""
            inner = "\n".join(body).strip("\n").replace("`", GRAVE)
            out.append(f"```\n{escape_mrkdwn(inner)}\n```{closing}")
        elif kind == "code":
            inner = piece.strip("`").strip(" ") or " "
            out.append(f"`{escape_mrkdwn(inner.replace('`', GRAVE))}`")
        else:
            text = escape_mrkdwn(piece)
            text = re.sub(r"(?m)^#{1,6}[ \t]+(.+)$", r"*\1*", text)
            out.append(re.sub(r"\*\*([^*\n]{1,400}?)\*\*", r"*\1*", text))
    return "".join(out)


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


def answer_blocks(answer: Answer, answer_id: str, *, probes_button: bool) -> tuple[str, list[dict[str, Any]]]:
    """(fallback text, blocks), redacted. A long answer is shortened, never the sources or the buttons."""
    redact = Redactor().redact
    head: list[dict[str, Any]] = []
    if answer.notice:
        head.append({"type": "context", "elements": [{"type": "mrkdwn", "text": plain(f"note: {answer.notice}", redact)}]})
    tail: list[dict[str, Any]] = []
    if answer.citations:
        lines = [f"[{c.n}] `{_code(Path(c.source).name, redact)}` › {plain(c.cited_as, redact)}" for c in answer.citations]
        tail.append({"type": "divider"})
        tail.append(_section("*Sources*\n" + "\n".join(lines)))
    problems = [f for f in answer.findings if f.status in ("problem", "error", "timed_out")]
    if problems:
        lines = [f"• *{plain(f.code, redact)}* ({plain(f.probe, redact)}): {plain(f.summary, redact)}"
                 + (f"\n   fix: {plain(f.fix, redact)}" if f.fix else "") for f in problems]
        tail.append(_section("*Probe findings*\n" + "\n".join(lines)))
    elements = [_button(":+1:", "traindoc_feedback_up", answer_id), _button(":-1:", "traindoc_feedback_down", answer_id)]
    if probes_button:
        elements.append(_button("Run the probes", "traindoc_run_probes", answer_id))
    tail.append({"type": "actions", "elements": elements})
    # 4 characters short of the section limit: room for a code fence closed at the end of a chunk
    body: list[dict[str, Any]] = [_section(part) for part in _chunks(to_mrkdwn(redact(answer.answer)), SECTION_LIMIT - 4)]
    room = MAX_BLOCKS - len(head) - len(tail)
    if len(body) > room:
        body = body[:room - 1] + [{"type": "context", "elements": [
            {"type": "mrkdwn", "text": "_answer shortened for Slack: ask the same question with `ask` for all of it_"}]}]
    lead = answer.diagnosis.root_cause.summary if answer.diagnosis and answer.diagnosis.root_cause else answer.answer
    fallback = plain(lead, redact)[:300]
    return fallback, head + body + tail


def probe_blocks(results: list[Any]) -> list[dict[str, Any]]:
    redact = Redactor().redact
    lines = [f"• `{_code(r.probe, redact)}`: *{plain(str(r.status), redact)}* — {plain(r.summary, redact)}" for r in results]
    return [_section("*Probe report (bot host)*\n" + "\n".join(lines))]


def plain(text: str, redact: Any = None) -> str:
    """A string from an answer, a log or a bundle, as inert mrkdwn: secrets masked, ``& < >`` escaped."""
    return escape_mrkdwn((redact or Redactor().redact)(text))[:SECTION_LIMIT]


def _code(text: str, redact: Any) -> str:
    return plain(text, redact).replace("`", GRAVE)


def _section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text[:SECTION_LIMIT]}}


def _button(label: str, action_id: str, value: str) -> dict[str, Any]:
    return {"type": "button", "text": {"type": "plain_text", "text": label, "emoji": True}, "action_id": action_id, "value": value}
