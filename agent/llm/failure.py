"""``ModelFailure``: every way a model can fail to answer, translated in one place.

The core falls back to the offline answer with a one-line notice in the question's language; in
``auto`` mode a model that makes no usable tool call is asked again in explain mode instead.
"""

from __future__ import annotations

from typing import Any

from common.errors import TraindocError
from common.language import Lang, say

KINDS = ("unreachable", "timed out", "rate limited", "context overflow", "malformed tool call", "empty answer", "no tool call",
         "echoed prompt", "failed")
NO_TOOL_USE = ("malformed tool call", "empty answer")  # the model cannot drive the tools: explain mode can still help


class ModelFailure(TraindocError):
    def __init__(self, model: str, kind: str, detail: str = "", facts: Any | None = None) -> None:
        self.model, self.kind, self.detail = model, kind, detail
        self.facts = facts  # what explain mode had gathered: the offline answer reuses it
        super().__init__(self.describe("en"))

    def describe(self, lang: Lang) -> str:
        kind = say("kind_" + self.kind.replace(" ", "_"), lang)
        if self.detail:
            return say("model_failed", lang, model=self.model, kind=kind, detail=self.detail)
        return say("model_failed_plain", lang, model=self.model, kind=kind)

    def notice(self, lang: Lang) -> str:
        return say("offline_fallback", lang, failure=self.describe(lang))


def failure_kind(exc: BaseException) -> str:
    name = type(exc).__name__
    text = str(exc).lower()
    if "ratelimit" in name.lower() or "429" in text or "rate limit" in text:
        return "rate limited"
    if "timeout" in name.lower() or "timed out" in text:
        return "timed out"
    if "connect" in name.lower() or "connection" in text or "refused" in text:
        return "unreachable"
    if "context" in text and ("length" in text or "window" in text or "too long" in text or "maximum" in text):
        return "context overflow"
    if "tool" in text or "json" in text or "parse" in name.lower():
        return "malformed tool call"
    return "failed"


def translate(exc: BaseException, model: str, facts: Any | None = None) -> ModelFailure:
    """A client error (openai, httpx, ollama: many types, all meaning "no model answer") as a ModelFailure."""
    return ModelFailure(model, failure_kind(exc), f"{type(exc).__name__}: {str(exc)[:160]}", facts)
