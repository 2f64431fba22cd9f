"""The linear-time scan that finds the secrets of the one table of shapes (``common.secret_shapes``).

Every path that masks (the reversible redactor before a model, the probes' ``***`` masking, bundles,
Slack, the web UI, the feedback store) uses it. A row of the table is found one of four ways: by a regex
over the text (a token's literal prefix), from a word in the lowered text (``anchor``: ``authorization``, a
secret word in a name), on a command line (``command`` and the ``options`` that carry a password), or by a
finder (``pem``: a private key block, found before lines are cut so that a long BEGIN line cannot hide the
body below it; ``hosts`` and ``ipv6`` in strict mode, ``common.hostnames``).

Linear time on any text: a line longer than ``LINE_CAP`` characters is cut (the cut is shown as
``[... 98 KB cut]``) before anything is matched, and every pattern is written so that the regex engine
never rescans a run of characters: a shape may only start where the run of its body characters
starts (a look-behind), its repetitions are possessive (``++``, ``{n,}+``) or bounded, and a repetition
holds another only when both are bounded. A pattern whose literal the text does not hold is not run at all.
``tests/security/test_secret_patterns.py`` checks every pattern's form; ``benchmarks/bench_redact.py``
measures it.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator

from common import hostnames
from common.patterns import needles
from common.secret_shapes import (
    _PEM_BEGIN,
    _PEM_END,
    _RUN,
    LINE_CAP,
    PRIVATE_SHAPES,
    SHAPES,
    START,
    Shape,
    secret_name,
)
from common.spellings import Plain, plain

__all__ = ["LINE_CAP", "MASK", "PLACEHOLDER", "PRIVATE_SHAPES", "SHAPES", "START", "Shape", "clip", "clip_line", "find",
           "mask", "scan", "secret_name"]


def _distinct(shapes: tuple[Shape, ...]) -> tuple[Shape, ...]:
    """One row per way of finding: rows that differ only in their example are one pass."""
    seen: dict[tuple[object, ...], Shape] = {}
    for s in shapes:
        seen.setdefault((s.kind, s.pattern, s.anchor, s.before, s.check, s.command, s.options, s.finder), s)
    return tuple(seen.values())


# Shapes found by a regex over the text, one pass each: a pattern that starts with a literal is searched at the
# speed of a substring search (an alternation of them is not), and a match one shape rejects never hides
# another shape's secret inside it. Shapes with an anchor are found from it, all in one pass (_anchored).
def _plain(shapes: tuple[Shape, ...]) -> tuple[tuple[Shape, re.Pattern[str], tuple[str, ...]], ...]:
    return tuple((s, re.compile(s.pattern), needles(s.pattern)) for s in _distinct(shapes) if not (s.anchor or s.command or s.finder))


_PASSES = _plain(SHAPES)
_STRICT_PASSES = _plain(PRIVATE_SHAPES)


def _compile_anchored(shapes: tuple[Shape, ...]) -> tuple[Anchored, ...]:
    return tuple((s, re.compile(s.anchor), re.compile(s.pattern), re.compile(f"[{s.before}]{{0,128}}+" if s.before else ""),
                  re.compile(f"[{s.before}]" if s.before else "(?!)"), needles(s.anchor))
                 for s in _distinct(shapes) if s.anchor)


# (shape, anchor, pattern, the run before the anchor, one character of it, what every anchor hit contains)
Anchored = tuple[Shape, re.Pattern[str], re.Pattern[str], re.Pattern[str], re.Pattern[str], tuple[str, ...]]
_ANCHORED = _compile_anchored(SHAPES)
_STRICT_ANCHORED = _compile_anchored(PRIVATE_SHAPES)
_COMMAND_SHAPES = tuple(s for s in _distinct(SHAPES) if s.command)
_COMMANDS = re.compile("(?<![a-z0-9_.-])(?:" + "|".join(f"(?P<c{i}>{s.command})" for i, s in enumerate(_COMMAND_SHAPES))
                       + ")(?![a-z0-9_-])")
_COMMAND_WORDS = needles(_COMMANDS.pattern)
# Per command, its option words: ``-p`` alone (the value is the next word), ``-pVALUE`` / ``--password=VALUE``.
_OPTIONS = tuple(re.compile(
    r"(?<!\S)(?:(?P<long>" + ("|".join(re.escape(o) for o, _ in sorted(s.options, key=lambda o: -len(o[0])) if len(o) > 2) or "(?!)")
    + r")(?:(?!\S)|(?P<eq>=))|(?P<short>" + ("|".join(re.escape(o) for o, _ in s.options if len(o) == 2) or "(?!)")
    + r")(?:(?!\S)|(?P<joined>\S)))") for s in _COMMAND_SHAPES)
_FORMS = {s: dict(s.options) for s in _COMMAND_SHAPES}
_COMMAND_STOP = re.compile(r"[ \t](?:\|\|?|&&|;)(?=[ \t])|;(?=[ \t])")
_PEM_KIND = next(s.kind for s in SHAPES if s.finder == "pem")
_PEM_HEAD, _PEM_TAIL = re.compile(_PEM_BEGIN), re.compile(_PEM_END)
_PEM_BODY = re.compile(r"[A-Za-z0-9+/=\\\r\n]{0,65536}+")  # base64 lines (or \n-escaped ones in JSON) when no END follows
PEM_SPAN = 65536  # characters from BEGIN within which END is looked for
MAX_OPTIONS = 16  # password options read on one command's line; past them the line is masked to its end
_ARG = re.compile(r"\S++")
PLACEHOLDER = re.compile(r"\[[A-Z_]{1,40}_[0-9]{1,6}\]")
MASK = "***"

Replace = Callable[[str, str], str]  # (kind, secret) -> what is shown instead
Span = tuple[int, int, str]  # (first, last, kind)




def clip(text: str, cap: int = LINE_CAP) -> str:
    """``text`` with every line longer than ``cap`` characters cut, the cut shown (``[... 98 KB cut]``). A cut
    never keeps half a token: it backs off to where the token began."""
    if len(text) <= cap:
        return text
    lines = text.split("\n")
    if all(len(line) <= cap for line in lines):
        return text
    return "\n".join(clip_line(line, cap) if len(line) > cap else line for line in lines)


_RUN_CHARS = re.compile(f"[{_RUN}]*+")


def clip_line(line: str, cap: int = LINE_CAP) -> str:
    if len(line) <= cap:
        return line
    keep = cap - max(len(_marker(1023)), len(_marker(10**12)))  # head and marker never pass the cap
    head = line[:keep]
    if _RUN_CHARS.fullmatch(line[keep - 1 : keep + 1]):
        tail_run = _RUN_CHARS.match(head[::-1])
        back = tail_run.end() if tail_run else 0
        if back < len(head):  # the token straddling the cut goes whole; a line that is one token keeps its head
            head = head[: len(head) - back]
    return head + _marker(len(line) - len(head))


def _marker(cut: int) -> str:
    size = f"{cut // 1024} KB" if cut >= 1024 else f"{cut} characters"
    return f" [... {size} cut]"


def scan(text: str, replace: Replace, *, strict: bool = False) -> str:
    """``text`` (lines clipped) with every secret replaced by ``replace(kind, secret)``.

    The shapes are matched on the plain spelling of the text (``common.spellings``: full-width forms, NBSP and
    tabs, percent-escapes, and zero-width characters, soft hyphens and ANSI codes inside a token folded away),
    and the original's span that wrote each secret is replaced: the rest of the text is shown as it was."""
    if not text:
        return text
    whole = plain(text)
    keyed = _private_keys(whole, replace)  # before the cut: a long BEGIN line must not hide the key below it
    clipped = clip(keyed)
    seen = whole if clipped is text else plain(clipped)
    spans = _spans(seen.text, strict)
    if not seen.same:
        spans = [(*seen.origin(first, last), kind) for first, last, kind in spans]
    return clip(_replace_spans(clipped, spans, replace))  # placeholders lengthen


def _spans(text: str, strict: bool) -> list[Span]:
    """Where the secrets of ``text`` are. A shape found by a regex is blanked (``*`` for each character, so that
    positions stay put) before the next one looks, as a masked secret is; the shapes found from a word, on a
    command line or by a finder then read the blanked text."""
    found: list[Span] = []
    for shape, pattern, words in _PASSES + (_STRICT_PASSES if strict else ()):
        if _holds(text, words):
            text = pattern.sub(_blanker(shape, found), text)
    lowered = _lowered(text)
    if _holds(lowered, _COMMAND_WORDS):
        found += _command_spans(text, lowered)  # before the anchored: the kind of a tie
    found += _anchored_spans(text, lowered, _ANCHORED + (_STRICT_ANCHORED if strict else ()))
    if strict and ":" in lowered:
        found += [(first, last, "IP") for first, last in hostnames.ipv6_addresses(lowered)]
    if strict and "." in lowered:
        found += [(first, last, "HOST") for first, last in hostnames.hosts(lowered)]
    return found


def _holds(text: str, words: tuple[str, ...]) -> bool:
    """Can a pattern match here at all: ``text`` holds one of the literals every match holds (a substring search,
    far cheaper than a regex scan; no literals known: yes)."""
    return not words or any(word in text for word in words)


def _lowered(text: str) -> str:
    lowered = text.lower()
    if len(lowered) != len(text):  # a character whose lower case is longer: positions must stay aligned
        lowered = "".join(c if len(c.lower()) != 1 else c.lower() for c in text)
    return lowered


def _masked_already(secret: str) -> bool:
    return not secret or secret == MASK or bool(PLACEHOLDER.fullmatch(secret))


def _private_keys(seen: Plain, replace: Replace) -> str:
    """PEM private key blocks, BEGIN to END (or, with no END within ``PEM_SPAN``, to the end of the base64 that
    follows), found in the plain spelling and replaced in the original. The END is searched forward only, once
    for all the BEGIN lines before it: linear."""
    text = seen.text
    if "PRIVATE KEY" not in text:
        return seen.original
    spans: list[Span] = []
    done = 0
    tail: re.Match[str] | None = None
    ends_left = True
    for head in _PEM_HEAD.finditer(text):
        if head.start() < done:
            continue
        if ends_left and (tail is None or tail.start() < head.end()):
            tail = _PEM_TAIL.search(text, head.end())
            ends_left = tail is not None
        if tail is not None and tail.start() >= head.end() and tail.start() - head.end() <= PEM_SPAN:
            end = tail.end()
        else:
            end = _pem_body_end(text, head.end())
        spans.append((*seen.origin(head.start(), end), _PEM_KIND))
        done = end
    return _replace_spans(seen.original, spans, replace)


def _pem_body_end(text: str, start: int) -> int:
    """Where the base64 after a BEGIN line with no END ends: at a blank line, or before a line it only begins
    (``NCCL WARN ...`` right below the key); a key on one line (``\\n``-escaped JSON) runs to its end."""
    end = _PEM_BODY.match(text, start).end()  # type: ignore[union-attr]
    blank = text.find("\n\n", start, end)
    if blank >= 0:
        return blank
    if end < len(text) and text[end] != "\n":
        last_line = text.rfind("\n", start, end)
        if last_line > start:
            return last_line
    return end


def _blanker(shape: Shape, found: list[Span]) -> Callable[[re.Match[str]], str]:
    """Records a regex shape's secret (its ``value`` group, else the whole match) and blanks it in place."""
    append = found.append

    def blank_whole(match: re.Match[str]) -> str:
        whole = match.group(0)
        if whole[0] == "[" and PLACEHOLDER.fullmatch(whole):
            return whole
        append((match.start(), match.end(), shape.kind))
        return "*" * len(whole)

    def blank_value(match: re.Match[str]) -> str:
        whole = match.group(0)
        value = match.group("value") or ""
        if _masked_already(value):
            return whole
        start, end = match.span("value")
        base = match.start()
        append((start, end, shape.kind))
        return whole[: start - base] + "*" * (end - start) + whole[end - base :]

    return blank_value if "value" in re.compile(shape.pattern).groupindex else blank_whole


def _command_spans(text: str, lowered: str) -> list[Span]:
    return list(_command_secrets(text, lowered))


def _command_secrets(text: str, lowered: str) -> Iterator[Span]:
    """The password options of commands on a line (``curl -u user:PASS``, ``sshpass -p PASS``): the rest of the
    command's line is read once, its option words found by one regex; a quoted value runs to its closing quote
    (a password with spaces)."""
    done = 0
    for hit in _COMMANDS.finditer(lowered):
        if hit.start() < done:
            continue
        index = int(next(name for name, value in hit.groupdict().items() if value is not None)[1:])
        shape, options = _COMMAND_SHAPES[index], _OPTIONS[index]
        line_end = text.find("\n", hit.end())
        done = line_end = len(text) if line_end < 0 else line_end
        stop = _COMMAND_STOP.search(text, hit.end(), line_end)  # the next command of a pipeline or a list
        if stop is not None:
            done = line_end = stop.start()
        found = 0
        for option in options.finditer(text, hit.end(), line_end):
            if found == MAX_OPTIONS:  # a line that is little but password options: the rest of it is masked whole
                yield option.start(), line_end, shape.kind
                break
            value = _option_value(shape, text, option, line_end)
            if value is not None and not _masked_already(text[value[0] : value[1]]) and text[value[0]] != "$":
                found += 1
                yield value[0], value[1], shape.kind


def _option_value(shape: Shape, text: str, option: re.Match[str], line_end: int) -> tuple[int, int] | None:
    """The span of the secret an option word introduces: ``-p VALUE``, ``--password=VALUE``, ``-pVALUE``."""
    form = _FORMS[shape][option.group("long") or option.group("short")]
    joined = option.start("eq") if option.group("eq") else option.start("joined") if option.group("joined") else -1
    if joined < 0:  # the value is the next word
        if form == "joined":  # mysql -p alone asks for the password
            return None
        word = _ARG.search(text, option.end(), line_end)
        if word is None:
            return None
        first = word.start()
    else:
        first = joined + (text[joined] == "=")
    return _secret_part(text, _quoted_value(text, first, line_end), form)


def _quoted_value(text: str, first: int, line_end: int) -> tuple[int, int]:
    """The value that starts at ``first``: unquoted, to the end of the word; quoted, to the closing quote on the
    line (at most 256 characters), the quotes left out."""
    quote = text[first] if first < line_end and text[first] in "\"'" else ""
    if not quote:
        word = _ARG.match(text, first, line_end)
        return first, word.end() if word else first
    close = text.find(quote, first + 1, min(line_end, first + 258))
    return first + 1, close if close >= 0 else min(line_end, first + 257)


def _secret_part(text: str, span: tuple[int, int], form: str) -> tuple[int, int] | None:
    first, last = span
    if form == "userpass":  # user:PASSWORD (curl -u), pass:PASSWORD (openssl): what follows the first colon
        colon = text.find(":", first, last)
        if colon < 0:
            return None
        first = colon + 1
    return (first, last) if last > first else None


def _anchored_spans(text: str, lowered: str, shapes: tuple[Anchored, ...]) -> list[Span]:
    """The shapes recognised by a word (``authorization``, ``bearer``, a secret word in a name): the word is
    searched in the lowered text, the rest read around it with bounded matches, so each character is looked
    at a bounded number of times."""
    spans: list[Span] = []
    for shape, anchor, pattern, before, one_before, words in shapes:
        if not _holds(lowered, words):
            continue
        named, valued = "name" in pattern.groupindex, "value" in pattern.groupindex
        seen = 0
        for hit in anchor.finditer(lowered):
            if hit.start() < seen:
                continue
            found = pattern.match(lowered, hit.end())  # the cheap test first: most hits are ordinary words
            if found is None:
                if shape.before:  # later hits inside the same run (tokentoken_key) are the same name
                    seen = before.match(lowered, hit.end()).end()  # type: ignore[union-attr]
                continue
            start = hit.start()
            if shape.before:
                back = before.match(lowered[max(0, start - 128) : start][::-1])
                start -= back.end() if back else 0
                if start > 0 and one_before.match(lowered, start - 1):
                    seen = found.end()  # the run goes on further back than is read: not a name
                    continue
            seen = found.end()
            head = text[start : hit.end()] + (text[found.start("name") : found.end("name")] if named else "")
            if shape.check is not None and not shape.check(head, text[start : found.end()]):
                continue
            first, last = found.span("value") if valued else (start, found.end())
            if not _masked_already(text[first:last]):
                spans.append((first, last, shape.kind))
    return spans


def _replace_spans(text: str, spans: list[Span], replace: Replace) -> str:
    """Each span replaced; spans that overlap are masked as one (their union), under the first one's kind."""
    if not spans:
        return text
    merged: list[Span] = []
    for first, last, kind in sorted(spans, key=lambda span: (span[0], -span[1])):
        if merged and first < merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], last), merged[-1][2])
        else:
            merged.append((first, last, kind))
    out: list[str] = []
    done = 0
    for first, last, kind in merged:
        out += [text[done:first], replace(kind, text[first:last])]
        done = last
    out.append(text[done:])
    return "".join(out)


def find(text: str, *, strict: bool = False) -> list[tuple[str, str]]:
    """(kind, secret) of every secret in ``text``, in the order they are masked."""
    found: list[tuple[str, str]] = []

    def record(kind: str, secret: str) -> str:
        found.append((kind, secret))
        return MASK

    scan(text, record, strict=strict)
    return found


def mask(text: str) -> str:
    """``text`` with every secret replaced by ``***`` (for what is shown or stored, not restored). A short text is
    masked once and remembered (``_Remembered``): an answer's JSON holds a thousand strings, most of them the
    documents' own, shown again in the next answer."""
    if len(text) > _REMEMBERED.longest:
        return scan(text, _masked)
    return _REMEMBERED.get(text)


def _masked(kind: str, secret: str) -> str:
    return MASK


class _Remembered:
    """The masked form of the short texts masked lately, least recently used first out, within ``budget``
    characters (texts and their masked forms together): the same text always masks the same way, so this changes
    no result, only how often the scan runs. Thread-safe (web and Slack answer on threads)."""

    def __init__(self, longest: int, budget: int) -> None:
        self.longest, self.budget = longest, budget
        self._kept: OrderedDict[str, str] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()

    def get(self, text: str) -> str:
        with self._lock:
            known = self._kept.get(text)
            if known is not None:
                self._kept.move_to_end(text)
                return known
        result = scan(text, _masked)
        with self._lock:
            if text not in self._kept:
                self._kept[text] = result
                self._size += len(text) + len(result)
                while self._size > self.budget:
                    old, shown = self._kept.popitem(last=False)
                    self._size -= len(old) + len(shown)
        return result


_REMEMBERED = _Remembered(longest=8192, budget=2_000_000)

