"""The form of every pattern in the secret table, read from its parsed regex: what keeps masking linear on
hostile input without timing anything. A repetition with no upper bound is possessive (the engine never gives
characters back to retry), a repetition inside another one is bounded, and a pattern that is searched over
the text starts with a literal or a look-behind (it can only start where a run starts). How long masking
takes, 10 KB against 1 MB, is measured in ``benchmarks/bench_redact.py``."""

from __future__ import annotations

import re
from re import _constants as sre  # type: ignore[attr-defined]
from re import _parser as sre_parse  # type: ignore[attr-defined]
from typing import Any

import pytest

from common import hostnames
from common.patterns import needles
from common.secrets import _COMMANDS, _OPTIONS, _PEM_BEGIN, _PEM_END, PRIVATE_SHAPES, SHAPES, Shape

REPEATS = (sre.MAX_REPEAT, sre.MIN_REPEAT, sre.POSSESSIVE_REPEAT)
UNBOUNDED = sre.MAXREPEAT


def _problems(pattern: str) -> list[str]:
    """What in ``pattern``'s form could make the engine rescan."""
    found: list[str] = []

    def walk(items: Any, outer: int) -> None:  # outer: the upper bound of the repeat around (0: none)
        for op, value in items:
            if op in REPEATS:
                low, high, body = value
                if high == UNBOUNDED and op is not sre.POSSESSIVE_REPEAT:
                    found.append(f"an unbounded {'lazy' if op is sre.MIN_REPEAT else 'greedy'} repeat: make it possessive or bounded")
                if outer > 1 and high == UNBOUNDED:
                    found.append("an unbounded repeat inside a repeat")
                if outer == UNBOUNDED and high > 1:
                    found.append("a repeat inside an unbounded repeat")
                walk(body, max(outer, high))
            elif op is sre.SUBPATTERN:
                walk(value[3], outer)
            elif op is sre.BRANCH:
                for branch in value[1]:
                    walk(branch, outer)
            elif op in (sre.ASSERT, sre.ASSERT_NOT):
                walk(value[1], outer)
            elif op is sre.GROUPREF_EXISTS:
                walk(value[1], outer)
                if value[2] is not None:
                    walk(value[2], outer)

    walk(sre_parse.parse(pattern), 0)
    return found


def _starts_anchored(pattern: str) -> bool:
    """A searched pattern starts with a literal, a small set of characters, or a look-behind."""
    first = sre_parse.parse(pattern)[0]
    if first[0] is sre.BRANCH:
        return all(_starts_anchored_items(branch) for branch in first[1][1])
    return _starts_anchored_items([first])


def _starts_anchored_items(items: Any) -> bool:
    op, value = items[0]
    if op is sre.SUBPATTERN:
        return _starts_anchored_items(value[3])
    if op is sre.BRANCH:
        return all(_starts_anchored_items(branch) for branch in value[1])
    return op is sre.LITERAL or (op is sre.ASSERT_NOT and value[0] == -1) or (op is sre.ASSERT and value[0] == -1) or (
        op is sre.IN and len(value) <= 8)


ALL = SHAPES + PRIVATE_SHAPES
IDS = [f"{s.kind}-{i}" for i, s in enumerate(ALL)]


@pytest.mark.parametrize("shape", ALL, ids=IDS)
def test_every_pattern_has_a_linear_form(shape: Shape) -> None:
    for source in (shape.pattern, shape.anchor, shape.command):
        if source:
            assert _problems(source) == [], (shape.kind, source)


@pytest.mark.parametrize("shape", [s for s in ALL if s.pattern and not (s.anchor or s.finder)],
                         ids=[f"{s.kind}-{i}" for i, s in enumerate(ALL) if s.pattern and not (s.anchor or s.finder)])
def test_a_searched_pattern_starts_where_a_run_starts(shape: Shape) -> None:
    """Searched over the whole text, a pattern may only begin at a literal or behind a look-behind; an anchored
    one (matched where its word ends) may not be searched at all."""
    assert _starts_anchored(shape.pattern), shape.pattern


def test_the_helpers_patterns_have_a_linear_form_too() -> None:
    helpers = [_PEM_BEGIN, _PEM_END, _COMMANDS.pattern, *(o.pattern for o in _OPTIONS), hostnames._NAME_RUN.pattern,
               hostnames._V6_RUN.pattern]
    for source in helpers:
        assert _problems(source) == [], source


@pytest.mark.parametrize("pattern, problem", [
    (r"(a+)+b", "repeat"), (r"[a-z]+@", "possessive"), (r"x(?:ab|a)*?y", "possessive"), (r"(?:\w{1,9})+", "inside"),
])
def test_the_form_check_finds_backtracking_shapes(pattern: str, problem: str) -> None:
    assert any(problem in found for found in _problems(pattern)), pattern


@pytest.mark.parametrize("pattern, expected", [
    ("hf_(?<![a-z].{3})[a-z]+", ("hf_",)), (r"k_(?:live|test)_", ("k_live", "k_test")),
    (r"(?<![a-z])(?:set-cookie|cookie)", ("cookie", "set-cookie")),
    (r"(?m:^[ \t]{0,16}+password)", ("password",)), (r"[0-9]{1,3}\.", (".",)), (r"[a-z]+", ()), (r"(?i)token", ()),
])
def test_needles_are_what_every_match_contains(pattern: str, expected: tuple[str, ...]) -> None:
    assert needles(pattern) == expected
    for word in expected:
        assert re.search(pattern, f"x {word} y") or not re.search(pattern, "x y")
