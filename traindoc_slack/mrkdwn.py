"""Markdown -> Slack mrkdwn, and an answer's one plain-text line for notifications.

Slack's mrkdwn (docs.slack.dev/messaging/formatting-message-text) marks bold with one ``*`` on each side, not
CommonMark's ``**``; it has no headings (a heading becomes a bold line) and no list syntax (a bullet is the
``•`` character). A delimiter only opens or closes emphasis at a word boundary: ``这是*粗体*文字`` stays literal
because the ``*`` touches CJK characters on the outside (Slack's own ChatGPT-in-Slack bot hits the same rule:
seratch/ChatGPT-in-Slack#61, #121). So an emphasis whose outside neighbour is a letter, a digit or an East
Asian wide or full-width character (CJK, kana, hangul, ``，：（）``) gets one ASCII space there, and the text
inside starts and ends with a visible character. No invisible character (zero-width space) is used: it would
be copied along with the text.
"""

from __future__ import annotations

import re
import unicodedata

from common.textsafe import GRAVE, escape_mrkdwn, segments

_HEADING = re.compile(r"(?m)^#{1,6}[ \t]+(.+?)[ \t#]*$")
_BOLD = re.compile(r"\*\*([^*\n]{1,400}?)\*\*|__([^_\n]{1,400}?)__")
_BULLET = re.compile(r"(?m)^([ \t]*)[-*+][ \t]+(?=\S|\Z)")  # \Z: the item's text is a code span, a piece of its own
_QUOTE = re.compile(r"(?m)^&gt;[ \t]")
# the bare ">" between two quoted paragraphs (advice.review's notes, one each): Slack keeps every line of a quote
# apart, and shows a ">" with nothing after it as the character itself
_BARE_QUOTE = re.compile(r"[ \t]*>[ \t]*\n")
_MARKER = re.compile(r"\s?\[\d{1,2}\](?:\[\d{1,2}\])*")
_LINK = re.compile(r"!?\[([^\]\n]{0,300})\]\([^)\n]{0,500}\)")
_PLAIN_NOISE = re.compile(r"\*\*|__|`+|^#{1,6}[ \t]+|^>[ \t]?|^[ \t]*[-*+][ \t]+", re.M)
NOTIFICATION_CHARS = 300


def needs_space(char: str) -> bool:
    """Whether ``char`` next to an emphasis delimiter, on its outside, keeps Slack from reading it as one."""
    if not char or char.isspace():
        return False
    return unicodedata.category(char)[0] in "LN" or unicodedata.east_asian_width(char) in ("W", "F")


def _bold(match: re.Match[str]) -> str:
    inner = (match.group(1) or match.group(2) or "").strip()
    if not inner:
        return match.group(0)
    text, start, end = match.string, match.start(), match.end()
    before = " " if start > 0 and needs_space(text[start - 1]) else ""
    after = " " if end < len(text) and needs_space(text[end]) else ""
    return f"{before}*{inner}*{after}"


def _text(piece: str) -> str:
    text = escape_mrkdwn(piece)
    text = _HEADING.sub(lambda m: f"**{m.group(1).strip('*').strip()}**", text)
    text = _BULLET.sub(lambda m: m.group(1) + "• ", text)  # before bold: a "* " bullet is no delimiter
    text = _QUOTE.sub("> ", text)  # a Markdown quote is Slack's quote: ">" used for its parsing purpose
    return _BOLD.sub(_bold, text)


def to_mrkdwn(markdown: str) -> str:
    """Markdown -> Slack mrkdwn. Outside code: ``& < >`` escaped, headings and bold become *bold* (spaced from
    CJK and word characters as Slack needs), bullets become •, a Markdown link stays text (links come only
    from traindoc, never from what it quotes). Code: Slack's one fence (```), with any backtick inside replaced
    by a look-alike that cannot end it; a code span touching CJK text gets a space on that side too."""
    out: list[str] = []
    pieces = list(segments(markdown))
    for index, (kind, piece) in enumerate(pieces):
        if kind == "fence":
            lines = piece.split("\n")
            body = [line for line in lines[1:] if line.strip("`~ ") or line == ""]
            closing = "\n" if piece.endswith("\n") else ""
            inner = "\n".join(body).strip("\n").replace("`", GRAVE)
            out.append(f"```\n{escape_mrkdwn(inner)}\n```{closing}")
        elif kind == "code":
            inner = piece.strip("`").strip(" ") or " "
            before = " " if out and out[-1] and needs_space(out[-1][-1]) else ""
            following = pieces[index + 1][1] if index + 1 < len(pieces) else ""
            after = " " if following and needs_space(following[0]) else ""
            out.append(f"{before}`{escape_mrkdwn(inner.replace('`', GRAVE))}`{after}")
        elif (_BARE_QUOTE.fullmatch(piece) and (not out or out[-1].endswith("\n"))
              and index + 1 < len(pieces) and pieces[index + 1][1].lstrip(" \t").startswith(">")):
            continue  # a line of its own between two quoted lines (a piece of its own: segments splits at lines)
        else:
            out.append(_text(piece))
    return "".join(out)


def plain_line(markdown: str, limit: int = NOTIFICATION_CHARS) -> str:
    """The first line of ``markdown`` with something to say, as plain text: no heading marks, emphasis,
    backticks, ``[n]`` markers or link syntax; code blocks skipped. For a notification or a screen reader."""
    prose = "".join(piece if kind != "fence" else "\n" for kind, piece in segments(markdown))
    for raw in prose.split("\n"):
        line = _MARKER.sub("", _PLAIN_NOISE.sub("", _LINK.sub(r"\1", raw))).strip(" \t:：")
        if line:
            return _clip(line, limit)
    return ""


def plain(text: str, limit: int = NOTIFICATION_CHARS) -> str:
    """Text made plain the same way (one line, no markup), however many lines it had."""
    line = " ".join(part.strip() for part in _PLAIN_NOISE.sub("", _LINK.sub(r"\1", text)).split("\n") if part.strip())
    return _clip(_MARKER.sub("", line).strip(), limit)


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    return (cut[:space] if space > limit // 2 else cut).rstrip(" ,;:") + "…"
