"""What a regex's matches must contain, read from its parsed form: the literals one of which every match starts
with (after any look-around). A substring search for them (``str.__contains__``, far faster than a regex
scan) tells that a pattern cannot match a text at all, so most of the secret table costs nothing on text
that holds none of its prefixes."""

from __future__ import annotations

import re
from re import _constants as sre  # type: ignore[attr-defined]
from re import _parser as sre_parse  # type: ignore[attr-defined]
from typing import Any

_ZERO_WIDTH = {sre.AT, sre.ASSERT, sre.ASSERT_NOT}
MAX_CHARS = 8  # a character class of at most this many characters becomes that many one-character needles


def needles(pattern: str) -> tuple[str, ...]:
    """Literals one of which every match of ``pattern`` contains (empty: none known, always scan)."""
    parsed = sre_parse.parse(pattern)
    if parsed.state.flags & re.IGNORECASE:
        return ()
    heads = _heads(list(parsed))
    return tuple(sorted(heads)) if heads and all(heads) else ()


def _heads(items: list[Any]) -> set[str] | None:
    """Literals one of which every match of the sequence ``items`` contains: its first mandatory literal run
    (extended by the alternatives that follow it), or the heads of its first mandatory group."""
    run = ""
    for op, value in items:
        if op is sre.LITERAL:
            run += chr(value)
            continue
        if op in _ZERO_WIDTH:
            continue
        if op is sre.SUBPATTERN and not run and not value[1] & re.IGNORECASE:
            inner = _heads(list(value[3]))  # a group in a sequence: what it contains, the sequence contains
        else:
            inner = _item_heads(op, value)
        if run:
            return {run + head for head in inner} if inner and op in (sre.BRANCH, sre.SUBPATTERN) else {run}
        if inner:
            return inner
    return {run} if run else None


def _item_heads(op: Any, value: Any) -> set[str] | None:
    if op is sre.BRANCH:
        union: set[str] = set()
        for branch in value[1]:
            heads = _prefix_heads(list(branch))
            if not heads:
                return None
            union |= heads
        return union
    if op is sre.SUBPATTERN:
        _group, add_flags, _del_flags, inner = value
        return None if add_flags & re.IGNORECASE else _prefix_heads(list(inner))
    if op in (sre.MAX_REPEAT, sre.MIN_REPEAT, sre.POSSESSIVE_REPEAT) and value[0] >= 1:
        return _prefix_heads(list(value[2]))
    if op is sre.IN and len(value) <= MAX_CHARS and all(kind is sre.LITERAL for kind, _ in value):
        return {chr(code) for _, code in value}
    return None


def _prefix_heads(items: list[Any]) -> set[str] | None:
    """Literals one of which every match of ``items`` starts with (after look-arounds), for alternatives."""
    while items and items[0][0] in _ZERO_WIDTH:
        items = items[1:]
    if not items:
        return None
    run = ""
    for op, value in items:
        if op is not sre.LITERAL:
            break
        run += chr(value)
    if run:
        rest = items[len(run):]
        if rest and rest[0][0] in (sre.BRANCH, sre.SUBPATTERN):
            inner = _item_heads(*rest[0])
            if inner:
                return {run + head for head in inner}
        return {run}
    return _item_heads(*items[0])
