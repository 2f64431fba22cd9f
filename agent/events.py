"""The typed event stream of one answer: what `ask`, the web UI and the Slack bot consume."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agent.answer import Answer


@dataclass(frozen=True)
class StepStarted:
    step: int
    tool: str
    args: dict[str, Any]


@dataclass(frozen=True)
class StepFinished:
    step: int
    tool: str
    result: str  # short, redacted-then-restored summary of what the tool returned
    cached: bool = False


@dataclass(frozen=True)
class Token:
    text: str


@dataclass(frozen=True)
class Notice:
    text: str  # e.g. the one-line fallback notice


@dataclass(frozen=True)
class FinalAnswer:
    answer: Answer
    extra: dict[str, Any] = field(default_factory=dict)


Event = StepStarted | StepFinished | Token | Notice | FinalAnswer
EventSink = Callable[[Event], None]


def ignore(_: Event) -> None:
    return None
