"""Text from users (log lines, bundle strings, questions) made inert for the place it is shown.

Markdown (the web UI, the terminal): quoted text goes in a code span or fenced block whose backtick run is
longer than any inside it, so no backtick in a log can end it; everything outside code is escaped so that
no link, image, autolink or raw HTML comes from it. Slack mrkdwn: ``&``, ``<`` and ``>`` escaped (no
``<http://...|...>``, ``<!channel>``, ``<@U123>``), ``@here`` broken, no backtick inside code. The terminal:
control characters (ESC sequences that move the cursor or make hyperlinks) shown, not sent.

Every function here is linear in the length of its input.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterator, Sequence

_BACKTICKS = re.compile(r"`+")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_MD_SPECIAL = re.compile(r"[\\\[\]<`]|(?<=[A-Za-z])://|(?<![A-Za-z0-9])www\.", re.IGNORECASE)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_SLACK_SPECIAL = re.compile(r"[&<>]|@(?=here|channel|everyone)", re.IGNORECASE)
GRAVE = "\u02cb"  # MODIFIER LETTER GRAVE ACCENT: looks like a backtick, never closes Slack code


def longest_run(text: str, char: str = "`") -> int:
    """The longest run of ``char`` in ``text``."""
    if char not in text:
        return 0
    pattern = _BACKTICKS if char == "`" else re.compile(re.escape(char) + "+")
    return max((m.end() - m.start() for m in pattern.finditer(text)), default=0)


def fence(lines: Sequence[str] | str, info: str = "text") -> str:
    """A fenced code block no line inside can close: its fence is longer than any backtick run inside."""
    body = lines if isinstance(lines, str) else "\n".join(lines)
    ticks = "`" * max(3, longest_run(body) + 1)
    return f"{ticks}{info}\n{body}\n{ticks}"


def code_span(text: str) -> str:
    """Inline code no backtick inside can end (CommonMark: a longer run, padded when the text touches one)."""
    text = " ".join(text.splitlines())
    ticks = "`" * (longest_run(text) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or not text.strip() else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def escape_markdown(text: str) -> str:
    """Plain text for Markdown: no link, image, autolink, raw HTML or escape of its own, and no backtick that
    could open a code span with one on a later line (whose end would then leave text live)."""
    return _MD_SPECIAL.sub(_escaped, text)


def _escaped(match: re.Match[str]) -> str:
    found = match.group(0)
    if found == "://":
        return "\\://"
    if found.lower() == "www.":
        return found[:3] + "\\."
    return "\\" + found


def segments(markdown: str) -> Iterator[tuple[str, str]]:
    """(kind, text) pieces of ``markdown``: "fence" (a whole fenced block, fences included), "code" (an inline
    code span, backticks included) or "text". Joined, they give ``markdown`` back."""
    lines = markdown.split("\n")
    block: list[str] = []
    closing = ""
    for number, line in enumerate(lines):
        end = "" if number == len(lines) - 1 else "\n"
        if closing:
            block.append(line + end)
            stripped = line.strip()
            if stripped.startswith(closing[0]) and len(stripped) >= len(closing) and stripped == stripped[0] * len(stripped):
                yield "fence", "".join(block)
                block, closing = [], ""
            continue
        opened = _FENCE.match(line)
        if opened and opened.group(1)[0] == "`" and "`" in line[opened.end():]:
            opened = None  # CommonMark: a backtick fence's info string holds no backtick, so this is text
        if opened:
            closing = opened.group(1)
            block = [line + end]
            continue
        # Code spans are paired within a line: one that spans lines may be cut by a block a later line starts
        # (an HTML block such as "<!channel>" interrupts the paragraph), and its text would then be live.
        yield from _inline(line + end)
    if block:  # a fence never closed runs to the end, as CommonMark renders it
        yield "fence", "".join(block)


def _inline(text: str) -> Iterator[tuple[str, str]]:
    """Code spans in a run of text lines: a backtick run opens one that the next run of the same length
    closes; a run with no partner is literal text."""
    runs = [(m.start(), m.end()) for m in _BACKTICKS.finditer(text)]
    if not runs:
        yield "text", text
        return
    by_length: dict[int, list[int]] = {}
    for index, (start, end) in enumerate(runs):
        by_length.setdefault(end - start, []).append(index)
    done = 0
    index = 0
    while index < len(runs):
        start, end = runs[index]
        if start < done:
            index += 1
            continue
        same = by_length[end - start]
        after = bisect_right(same, index)
        if after >= len(same):
            index += 1
            continue
        partner = same[after]
        if start > done:
            yield "text", text[done:start]
        yield "code", text[start : runs[partner][1]]
        done = runs[partner][1]
        index = partner + 1
    if done < len(text):
        yield "text", text[done:]


def inert_markdown(markdown: str) -> str:
    """``markdown`` as it renders, minus anything active that text could carry: outside code, no link, image,
    autolink or HTML survives (they show as the characters they are); code is left as it is."""
    return "".join(piece if kind != "text" else escape_markdown(piece) for kind, piece in segments(markdown))


def escape_mrkdwn(text: str) -> str:
    """Plain text for Slack mrkdwn: ``& < >`` escaped as Slack requires, ``@here``/``@channel`` broken."""
    return _SLACK_SPECIAL.sub(_slack_escaped, text)


def _slack_escaped(match: re.Match[str]) -> str:
    return {"&": "&amp;", "<": "&lt;", ">": "&gt;"}.get(match.group(0), "@\u200b")


def printable(text: str) -> str:
    """Text for a terminal: control characters (ESC, BEL, backspace, C1) shown as ``\\xNN``, never obeyed."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group(0)):02x}", text)
