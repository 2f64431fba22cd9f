"""The plain spelling of a text, to find secrets in, and the way back to the original's positions.

A secret written another way is still the secret: ``ＨＦ_ＴＯＫＥＮ＝hf_…`` (full-width forms), a non-breaking space or
a tab where a space was, ``hf%5F…`` (percent-escapes), and a zero-width space, a soft hyphen or an ANSI colour code
inside the token (each invisible on a screen). ``plain(text)`` is the copy the secret shapes are matched on:
Unicode compatibility forms folded (NFKC: full-width ASCII, NBSP and the other spaces), a no-break space inside a
token read as nothing (``hf_Zq8vR2kL5m<NBSP>N7pX…``, where a token was wrapped: ``_joined``), invisible and control
characters dropped (zero-width and bidirectional marks, the soft hyphen, C0/C1 controls but ``\\n``/``\\r``, and the
``<U+200B>`` a screen shows for one: ``common.textsafe``), ANSI escape sequences dropped, tabs as spaces, and
``%XX`` escapes decoded (UTF-8). Its ``origin`` maps a span found in the copy back to the span of the original
that wrote it, so the original is masked and everything else the user sees stays as it was.

Linear: one regex pass over the text finds what to change (most text has nothing: the copy is the text itself); a
position is mapped back by a binary search over the places where lengths changed; a no-break space reads at most
``_JOIN_SPAN`` characters either side of it.
"""

from __future__ import annotations

import codecs
import re
import unicodedata
from bisect import bisect_right
from dataclasses import dataclass, field
from functools import lru_cache

from common.secret_shapes import TOKEN_PREFIX

# Invisible on a screen and no part of any token: controls but \n and \r, the format characters (Unicode's Cf:
# zero-width spaces and joiners, bidirectional marks, the soft hyphen, the BOM, tag characters) and the fillers
# that draw nothing (combining grapheme joiner, Hangul and Khmer fillers).
_HIDDEN = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\xad\u034f\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891"
                     "\u08e2\u115f\u1160\u17b4\u17b5\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f"
                     "\u3164\ufeff\uffa0\ufff9-\ufffb\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3"
                     "\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f]")
# What may need changing: an ANSI escape sequence (CSI, OSC, or a two-character one), a percent-escape, or a run of
# characters that are not plain printable ASCII (tabs, controls, anything outside ASCII). Every repeat is bounded or
# possessive: the pass is linear.
_SUSPECT = re.compile(r"\x1b(?:\[[0-?]{0,32}+[ -/]{0,8}+[@-~]|\][^\x07\x1b\n]{0,256}+(?:\x07|\x1b\\)?|[@-Z\\-_])?"
                      r"|(?:%[0-9A-Fa-f]{2}){1,64}+|<U\+[0-9A-F]{4,6}>|[^\t\n\r\x1b\x20-\x7e]++")
# A no-break space (NBSP, figure space, narrow NBSP) inside a token: read as nothing when the run before it starts
# with a token's prefix and the run after it is neither a word nor another token (``hf_Zq8v<NBSP>R2kL…`` is one
# token; ``hf_…<NBSP>and``, ``hf_…<NBSP>hf_…`` and ``the<NBSP>password`` stay two). Runs are read at most
# ``_JOIN_SPAN`` characters either way.
_NO_BREAK = frozenset("\u00a0\u2007\u202f")
_JOIN_SPAN = 256
_TOKEN_BEFORE = re.compile(r"[A-Za-z0-9_.+/=-]{1,256}+")  # matched on the reversed text before the space
_TOKEN_AFTER = re.compile(r"[A-Za-z0-9_-]{1,256}+")
_WORD = re.compile(r"[A-Za-z][a-z]*+")
_PLAIN_ASCII = re.compile(r"[\n\r\x20-\x24\x26-\x7e]*+")  # nothing to change: the text is its own copy


@lru_cache(maxsize=4096)
def _plain_char(char: str) -> str:
    """One character as the copy spells it."""
    if char == "\t":
        return " "
    if _HIDDEN.match(char):
        return ""
    return _HIDDEN.sub("", unicodedata.normalize("NFKC", char))


def _plain_escapes(run: str) -> list[tuple[int, int, str]]:
    """A run of percent-escapes as (first, last, written) pieces, one per character they encode: UTF-8 decoded
    (``%EF%BC%9A`` is ``：``, then ``:``); a byte that is no character (``%FF``) left as written."""
    out: list[tuple[int, int, str]] = []
    decoder = codecs.getincrementaldecoder("utf-8")()
    first = 0
    for at in range(0, len(run), 3):
        try:
            char = decoder.decode(bytes((int(run[at + 1 : at + 3], 16),)))
        except UnicodeDecodeError:
            decoder.reset()
            first = at + 3
            continue
        if char:
            out.append((first, at + 3, "".join(_plain_char(c) for c in char)))
            first = at + 3
    return out


@dataclass(frozen=True)
class Plain:
    """The copy and the places where its length differs from the original's (``starts``: in the copy;
    ``origins``: in the original; ``folded``: a changed piece, mapped as a whole, else an aligned stretch)."""

    text: str
    original: str
    starts: list[int] = field(default_factory=lambda: [0])
    origins: list[int] = field(default_factory=lambda: [0])
    folded: list[bool] = field(default_factory=lambda: [False])

    @property
    def same(self) -> bool:
        return self.text is self.original

    def origin(self, first: int, last: int) -> tuple[int, int]:
        """The original's span for the copy's ``[first, last)``: a changed piece it touches is taken whole."""
        if self.same or len(self.starts) == 1:
            return first, last
        k = bisect_right(self.starts, first) - 1
        start = self.origins[k] if self.folded[k] else self.origins[k] + first - self.starts[k]
        if last <= first:
            return start, start
        k = bisect_right(self.starts, last - 1) - 1
        end = self.origins[k + 1] if self.folded[k] else self.origins[k] + last - self.starts[k]
        return start, end


def _joined(text: str, at: int, inside: int) -> int:
    """The no-break space at ``at``, inside a token, is read as nothing: where the token's run after it ends, else
    -1 (a space). ``inside``: where the run after the last joined one ended (a space there is in the same token)."""
    after = _TOKEN_AFTER.match(text, at + 1)
    if after is None or at == 0 or _WORD.fullmatch(after.group()) or TOKEN_PREFIX.match(after.group()):
        return -1  # a word, or the next token, follows
    if at != inside:
        before = _TOKEN_BEFORE.match(text[max(0, at - _JOIN_SPAN) : at][::-1])
        if before is None or not TOKEN_PREFIX.search(before.group()[::-1]):
            return -1
    return after.end()


def plain(text: str) -> Plain:
    """The copy of ``text`` to find secrets in (``text`` itself when nothing in it is spelled another way)."""
    if _PLAIN_ASCII.fullmatch(text) and "<U+" not in text:
        return Plain(text, text)
    original = text
    text = text.replace("\t", " ")  # same length: positions stay put
    pieces: list[str] = []
    starts, origins, folded = [0], [0], [False]
    size = done = 0  # the copy's length so far; the original's position copied up to

    def piece(first: int, last: int, written: str) -> None:
        nonlocal size, done
        pieces.append(text[done:first])
        size += first - done
        if len(written) == last - first:  # same length: positions stay aligned
            pieces.append(written)
        else:
            starts.append(size)
            origins.append(first)
            folded.append(True)
            pieces.append(written)
            starts.append(size + len(written))
            origins.append(last)
            folded.append(False)
        size += len(written)
        done = last

    inside = -1  # where the run after the last joined no-break space ends
    for found in _SUSPECT.finditer(text):
        first, last, seen = found.start(), found.end(), found.group()
        if seen[0] == "\x1b":
            piece(first, last, "")
        elif seen[0] == "<":  # an invisible character as the screen shows it (common.textsafe): <U+200B>
            code = int(seen[3:-1], 16)
            if code <= 0x10FFFF and _HIDDEN.match(chr(code)):
                piece(first, last, "")
        elif seen[0] == "%":
            for start, end, written in _plain_escapes(seen):
                piece(first + start, first + end, written)
        elif unicodedata.is_normalized("NFKC", seen) and not _HIDDEN.search(seen):
            continue  # Chinese, accents, emoji: already plain
        else:
            for at, char in enumerate(seen, first):
                if char in _NO_BREAK and (joined := _joined(text, at, inside)) >= 0:
                    inside = joined
                    piece(at, at + 1, "")
                    continue
                written = _plain_char(char)
                if written != char:
                    piece(at, at + 1, written)
    if not pieces:
        return Plain(text, original) if text != original else Plain(original, original)
    pieces.append(text[done:])
    return Plain("".join(pieces), original, starts, origins, folded)
