"""An answer as text to paste (``ask --format text|markdown``, and whatever is not a terminal): the answer, its
sources by their readable titles, one line about the probes, and last a one-line summary (cause and first fix).

Text is the markdown made plain: headings and emphasis marks dropped, lists kept as numbered and bulleted,
code lines as they are (indented four spaces, never wrapped), so a command copies as one line.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator

from agent.answer import Answer
from agent.summary import summary_line
from common.language import Lang, say
from common.textsafe import inert_markdown, printable, segments

FORMATS = ("text", "markdown")
HEADING = re.compile(r"^ {0,3}#{1,6}\s+")
STRONG = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*")
ITALIC_LINE = re.compile(r"^_(\S.*\S)_$")


def probes_line(answer: Answer, lang: Lang) -> str:
    """How the probes came out, in one line (the problems are in the answer; `traindoc probe` shows each)."""
    if not answer.findings:
        return ""
    counts = Counter(status for status, *_ in dict.fromkeys((f.status, f.probe, f.code, f.summary) for f in answer.findings))
    order = ["problem", "info", "ok", "unavailable", "error"]
    shown = ", ".join(f"{counts[s]} {s}" for s in sorted(counts, key=lambda s: order.index(s) if s in order else 9))
    return f"{say('probe_evidence', lang)}: {shown} (`traindoc probe`)"


def closing_line(answer: Answer, width: int) -> str:
    """The last line a terminal keeps: the cause and the first fix."""
    verdict = answer.verdict
    return summary_line(verdict, answer.lang, width) if verdict is not None else ""


def plain_text(markdown: str) -> str:
    """Markdown as plain text: no heading marks or emphasis asterisks; lists and code kept, code unwrapped."""
    out: list[str] = []
    for kind, piece in segments(_unitalic(markdown)):
        if kind == "fence":
            lines = piece.rstrip("\n").split("\n")
            indent = len(lines[0]) - len(lines[0].lstrip())
            out.append("\n".join("    " + line[indent:] if line.strip() else "" for line in lines[1:-1]) + "\n")
        elif kind == "code":
            out.append(piece)
        else:
            out.append(_plain_lines(piece))
    return re.sub(r"\n{3,}", "\n\n", "".join(out)).strip()


def _unitalic(markdown: str) -> str:
    """Whole italic lines (``_Why this leads: ... `code` ..._``) without their marks, outside code blocks: a code
    span inside the line would otherwise split it before the line's marks are seen."""
    lines, fence = markdown.split("\n"), ""
    for i, line in enumerate(lines):
        stripped = line.strip()
        if stripped.startswith("```"):
            ticks = stripped[: len(stripped) - len(stripped.lstrip("`"))]
            fence = "" if fence and ticks.startswith(fence) and stripped == ticks else (fence or ticks)
        elif not fence:
            lines[i] = ITALIC_LINE.sub(r"\1", line)
    return "\n".join(lines)


def _plain_lines(text: str) -> str:
    lines = []
    for line in text.split("\n"):
        line = HEADING.sub("", line)
        line = STRONG.sub(r"\1", line)
        line = ITALIC_LINE.sub(r"\1", line)
        lines.append(line)
    return "\n".join(lines)


def document(answer: Answer, fmt: str, width: int = 80, *, full: bool = False) -> str:
    """The answer in ``fmt`` ("text" or "markdown"), ending with the summary line: the brief one (agent.brief), or
    the whole with ``full``."""
    return "\n".join(_document(answer, fmt, width, full)).rstrip("\n") + "\n"


def _document(answer: Answer, fmt: str, width: int, full: bool) -> Iterator[str]:
    lang = answer.lang
    markdown = fmt == "markdown"
    if answer.notice:
        yield f"{say('note', lang)}: {printable(answer.notice)}\n"
    body = printable(answer.answer if full else answer.shown)
    yield inert_markdown(body) if markdown else plain_text(body)
    if answer.citations:
        yield ""
        yield f"**{say('sources', lang)}**\n" if markdown else say("sources", lang)
        shown = answer.sources(full)
        for citation in shown:
            title = printable(citation.named)
            yield f"- [{citation.n}] {inert_markdown(title)}" if markdown else f"  [{citation.n}] {title}"
        if len(answer.citations) > len(shown):
            yield say("more_sources", lang, count=len(answer.citations) - len(shown))
    if line := probes_line(answer, lang):
        yield ""
        yield line if markdown else line.replace("`", "")
    if answer.grounded is False:
        yield ""
        yield f"{say('warning', lang)}: {say('unverified', lang)}"
    if last := closing_line(answer, width):
        yield ""
        yield printable(last)


__all__ = ["FORMATS", "closing_line", "document", "plain_text", "probes_line"]
