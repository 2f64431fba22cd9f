"""Checks every runbook's message routing shares: one real-shaped line per message of its front matter, the same
messages in both languages, and each line alone picking the runbook (runbooks.choose.for_lines)."""

from __future__ import annotations

from collections.abc import Sequence

from runbooks.catalog import runbooks
from runbooks.choose import for_lines


def assert_a_line_per_message(kind: str, lines: Sequence[str]) -> None:
    """``lines`` holds one line per message, in the front matter's order, and both languages list the same ones."""
    english, chinese = runbooks()[(kind, "en")], runbooks()[(kind, "zh")]
    assert english.messages == chinese.messages
    assert len(lines) == len(english.messages)
    for line, message in zip(lines, english.messages, strict=True):
        assert message in line, (message, line)


def assert_picks(kind: str, lines: Sequence[str]) -> None:
    chosen = for_lines(list(lines))
    assert chosen is not None and chosen.kind == kind, (lines, chosen and chosen.kind)
