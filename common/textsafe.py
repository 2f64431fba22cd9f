"""Text from users (log lines, bundle strings, questions) made inert for the place it is shown.

Markdown (the web UI, the terminal): quoted text goes in a code span or fenced block whose backtick run is
longer than any inside it, so no backtick in a log can end it; everything outside code is escaped so that
no link, image, autolink or raw HTML comes from it. Slack mrkdwn: ``&``, ``<`` and ``>`` escaped (no
``<http://...|...>``, ``<!channel>``, ``<@U123>``), ``@here`` broken, no backtick inside code. The terminal:
control characters (ESC sequences that move the cursor or make hyperlinks) shown, not sent. Every surface (the
terminal, the JSON, the web page, Slack): characters that change how text reads without being seen (bidi
overrides and isolates, zero-width characters; ``data/invisible.json``) shown as ``<U+202E>``, except a zero-width
joiner inside an emoji sequence (👩‍💻), which is part of the emoji (``printable``). And for every
surface: ``**strong**`` written so CommonMark's flanking rules hold in Chinese (``flanking_safe``), text clipped
at a word, never mid-word (``clip_words``).

Every function here is linear in the length of its input.
"""

from __future__ import annotations

import json
import re
import unicodedata
from bisect import bisect_right
from collections.abc import Iterator, Sequence
from functools import cache
from importlib import resources
from typing import Any

_BACKTICKS = re.compile(r"`+")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
# "@" after a word character: an e-mail address, which GFM renderers (Gradio's chat) make a mailto: link
_MD_SPECIAL = re.compile(r"[\\\[\]<`]|(?<=[A-Za-z])://|(?<![A-Za-z0-9])www\.|(?<=[\w.+-])@", re.IGNORECASE)
_CONTROL = r"\x00-\x08\x0b-\x1f\x7f-\x9f"
ZWJ = "\u200d"
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
    """Plain text for Markdown: no link, image, autolink (a URL, ``www.``, an e-mail address), raw HTML or escape
    of its own, no backtick that could open a code span with one on a later line (whose end would then leave
    text live), and no invisible character (``printable``)."""
    return _MD_SPECIAL.sub(_escaped, printable(text))


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
    autolink or HTML survives (they show as the characters they are); code is left as it is but for invisible
    and control characters, shown everywhere (``printable``)."""
    return "".join(printable(piece) if kind != "text" else escape_markdown(piece) for kind, piece in segments(markdown))


def escape_mrkdwn(text: str) -> str:
    """Plain text for Slack mrkdwn: ``& < >`` escaped as Slack requires, ``@here``/``@channel`` broken, invisible
    characters shown (``printable``). Slack still links a bare URL or e-mail address in mrkdwn unless the text
    object says ``"verbatim": true`` (traindoc_slack.blocks sets it)."""
    return _SLACK_SPECIAL.sub(_slack_escaped, printable(text))


def _slack_escaped(match: re.Match[str]) -> str:
    return {"&": "&amp;", "<": "&lt;", ">": "&gt;"}.get(match.group(0), "@\u200b")


def printable(text: str) -> str:
    """Text as it is, shown: control characters (ESC, BEL, backspace, C1) as ``\\xNN``, never obeyed by a
    terminal; characters that change how text reads without being seen (a right-to-left override, a zero-width
    space: ``data/invisible.json``) as ``<U+202E>``. A zero-width joiner between two emoji (👩‍💻, 🏳️‍🌈) is part
    of the emoji and kept; emoji, variation selectors and newlines are left as they are. Applying it twice
    changes nothing more."""
    return _hidden().sub(_shown, text)


def printable_json(value: Any) -> Any:
    """``value`` (JSON data: dicts, lists, strings, numbers) with every string, keys included, ``printable``."""
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, dict):
        return {printable(k) if isinstance(k, str) else k: printable_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [printable_json(item) for item in value]
    return value


def _shown(match: re.Match[str]) -> str:
    char = match.group(0)
    if char < "\xa0":
        return f"\\x{ord(char):02x}"
    if char == ZWJ:
        text, at = match.string, match.start()
        if 0 < at < len(text) - 1 and _is_emoji(text[at - 1]) and _is_emoji(text[at + 1]):
            return char
    return f"<U+{ord(char):04X}>"


@cache
def _invisible_table() -> dict[str, Any]:
    table: dict[str, Any] = json.loads(resources.files("common").joinpath("data/invisible.json").read_text(encoding="utf-8"))
    return table


def _ranges(key: str) -> list[tuple[int, int]]:
    return [(int(first, 16), int(last, 16)) for first, last, *_ in _invisible_table()[key]]


@cache
def _hidden() -> re.Pattern[str]:
    invisible = "".join(f"{chr(first)}-{chr(last)}" for first, last in _ranges("invisible"))
    return re.compile(f"[{_CONTROL}{invisible}]")


@cache
def _emoji_starts() -> tuple[list[int], list[int]]:
    ranges = sorted(_ranges("emoji"))
    return [first for first, _ in ranges], [last for _, last in ranges]


def _is_emoji(char: str) -> bool:
    """A character an emoji ZWJ sequence joins (a pictograph, a skin tone, the emoji variation selector)."""
    firsts, lasts = _emoji_starts()
    at = bisect_right(firsts, ord(char)) - 1
    return at >= 0 and ord(char) <= lasts[at]


# -- words and emphasis ------------------------------------------------------

_SPACE = re.compile(r"\s")
_STRONG = re.compile(r"\*\*(?=\S)([^*\n]+?)\*\*")
_CLOSERS = set(")]}）】」』》〉>\"'”’")


def _is_punctuation(char: str) -> bool:
    """CommonMark's punctuation: ASCII punctuation and Unicode P* and S* categories."""
    return unicodedata.category(char)[0] in "PS"


_WIDE = re.compile("[\u2e80-\u9fff\uac00-\ud7af\uff00-\uffef]")  # CJK ideographs, kana, hangul, full-width forms


def _wide(char: str) -> bool:
    """A character that is a word of its own for line breaking (the characters ``_WIDE`` matches)."""
    return _WIDE.match(char) is not None


def cells(text: str) -> int:
    """Terminal columns ``text`` takes: CJK and full-width characters two, others one."""
    return len(text) if text.isascii() else len(text) + len(_WIDE.findall(text))


def clip_words(text: str, limit: int, ellipsis: str = "…") -> str:
    """``text`` in at most ``limit`` characters, cut at a word boundary (a space, or between two CJK characters,
    which are words of their own) with ``ellipsis``; never mid-word. A first word longer than ``limit`` is cut."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    room = max(1, limit - len(ellipsis))
    cut = room
    while cut > 0 and not (_SPACE.match(text[cut]) or _wide(text[cut]) or _wide(text[cut - 1])):
        cut -= 1
    if cut < room // 3:  # one enormous word (a path, a hash): better a cut word than nothing
        cut = room
    return text[:cut].rstrip(" ,;:，；：") + ellipsis


def strong(text: str) -> str:
    """``**text**`` written so CommonMark's flanking rules hold in any language: punctuation that ends ``text``
    (a full-width colon, a period) goes after the closing ``**``, where it needs no flanking."""
    body = text.rstrip()
    tail = ""
    while body and _is_punctuation(body[-1]) and body[-1] not in _CLOSERS:
        tail = body[-1] + tail
        body = body[:-1]
    return f"**{body}**{tail}" if body else tail


def flanking_safe(markdown: str) -> str:
    """``markdown`` whose ``**strong**`` spans render as strong in CommonMark renderers (rich, Gradio, GitHub).

    A closing ``**`` right after punctuation and right before a letter (``**原因：**文本``) is not right-flanking, so
    the asterisks show; the punctuation that ends the span moves after it (``**原因**：文本``), with no invisible
    character added. Code is left as it is."""
    if "**" not in markdown:
        return markdown
    return "".join(_flank(piece) if kind == "text" else piece for kind, piece in segments(markdown))


def _flank(text: str) -> str:
    def fix(match: re.Match[str]) -> str:
        after = text[match.end(): match.end() + 1]
        inner = match.group(1)
        if not after or after.isspace() or _is_punctuation(after) or not _is_punctuation(inner[-1]):
            return match.group(0)
        return strong(inner)

    return _STRONG.sub(fix, text)
