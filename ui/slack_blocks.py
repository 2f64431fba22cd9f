"""Block Kit rendering of an answer for Slack: diagnosis and fixes, Sources, probe findings, buttons.
Everything posted is redacted first: secrets never reach Slack."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from agent.answer import Answer
from common.redaction import Redactor

SECTION_LIMIT = 2900  # Slack's section text limit is 3000 characters
MAX_BLOCKS = 45


def to_mrkdwn(markdown: str) -> str:
    """Markdown -> Slack mrkdwn: headings and bold become *bold*, links stay readable."""
    text = re.sub(r"^#{1,6}\s+(.+)$", r"*\1*", markdown, flags=re.M)
    text = re.sub(r"\*\*(.+?)\*\*", r"*\1*", text)
    text = re.sub(r"^> ", "> ", text, flags=re.M)
    return re.sub(r"\[([^\]]+)\]\((https?://[^)]+)\)", r"<\2|\1>", text)


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
        head.append({"type": "context", "elements": [{"type": "mrkdwn", "text": redact(f"note: {answer.notice}")[:SECTION_LIMIT]}]})
    tail: list[dict[str, Any]] = []
    if answer.citations:
        lines = [f"[{c.n}] `{Path(c.source).name}` › {c.section}" for c in answer.citations]
        tail.append({"type": "divider"})
        tail.append(_section(redact("*Sources*\n" + "\n".join(lines))))
    problems = [f for f in answer.findings if f.status in ("problem", "error", "timed_out")]
    if problems:
        lines = [f"• *{f.code}* ({f.probe}): {f.summary}" + (f"\n   fix: {f.fix}" if f.fix else "") for f in problems]
        tail.append(_section(redact("*Probe findings*\n" + "\n".join(lines))))
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
    fallback = redact(lead)[:300]
    return fallback, head + body + tail


def probe_blocks(results: list[Any]) -> list[dict[str, Any]]:
    redact = Redactor().redact
    lines = [f"• `{r.probe}`: *{r.status}* — {r.summary}" for r in results]
    return [_section(redact("*Probe report (bot host)*\n" + "\n".join(lines)))]


def _section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text[:SECTION_LIMIT]}}


def _button(label: str, action_id: str, value: str) -> dict[str, Any]:
    return {"type": "button", "text": {"type": "plain_text", "text": label, "emoji": True}, "action_id": action_id, "value": value}
