"""Slack's emphasis rule, written out for tests: where Slack shows ``*text*`` bold and where it leaves the asterisks.

docs.slack.dev/messaging/formatting-message-text: bold is ``*text*``. A delimiter only counts at a word boundary:
``这是*粗体*文字`` stays literal because the asterisks touch CJK characters on the outside (seratch/ChatGPT-in-Slack
#61, #121), as ``foo*bar*baz`` does in English.
"""

from __future__ import annotations

import re
import unicodedata

from common.textsafe import segments


def _word(char: str) -> bool:
    return unicodedata.category(char)[0] in "LN" or unicodedata.east_asian_width(char) in ("W", "F")


def slack_bold_spans(mrkdwn: str) -> tuple[list[str], list[str]]:
    """(bold texts, asterisks Slack would show literally) of mrkdwn, outside code: an opening ``*`` follows the
    start or a non-word character and precedes a non-space; a closing one follows a non-space and precedes the
    end or a non-word character."""
    bold: list[str] = []
    literal: list[str] = []
    for kind, piece in segments(mrkdwn):
        if kind != "text":
            continue
        for line in piece.split("\n"):
            stars = [m.start() for m in re.finditer(r"\*", line)]
            i = 0
            while i < len(stars):
                start = stars[i]
                before = line[start - 1] if start else ""
                after = line[start + 1] if start + 1 < len(line) else ""
                opens = (not before or not _word(before)) and after and not after.isspace() and after != "*"
                closing = next((e for e in stars[i + 1:] if not line[e - 1].isspace()
                                and (e + 1 == len(line) or not _word(line[e + 1]))), None) if opens else None
                if closing is None:
                    literal.append(line[max(0, start - 3): start + 4])
                    i += 1
                    continue
                bold.append(line[start + 1: closing])
                i = stars.index(closing) + 1
    return bold, literal
