"""Text from outside (a command line, a JSON line, a web form, a Slack message) made safe to print and store.

Python carries bytes that are not UTF-8 as lone surrogates: argv and the environment decode them with
``surrogateescape`` (byte 0xFF becomes U+DCFF), and JSON's ``"\\ud800"`` escape makes one as well. Such a string
cannot be encoded: printing it, writing it as JSON or sending it over HTTP raises ``UnicodeEncodeError`` far from
where it came in. Here each one becomes a visible escape (``\\xff`` for a byte, ``\\ud800`` otherwise) and
everything else stays as it was: nothing is lost (the escape names the byte), where U+FFFD would have dropped
it, and the question is still answered on its readable words, where refusing it would have lost all of them.
"""

from __future__ import annotations

import re

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")  # one character class: linear on any input


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"\\u{code:04x}"


def escape_surrogates(text: str) -> tuple[str, int]:
    """``text`` with every lone surrogate shown as an escape, and how many there were (0: unchanged)."""
    if text.isascii():
        return text, 0
    return _LONE_SURROGATE.subn(_escaped, text)


def notice(count: int, what: str = "the question") -> str:
    """The one line that says it happened: nothing is silently changed."""
    unit = "character" if count == 1 else "characters"
    return f"{what} was not valid UTF-8: {count} {unit} kept as escapes such as \\xff"
