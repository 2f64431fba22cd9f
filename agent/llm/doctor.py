"""`traindoc doctor-llm`: reachable? lists the model? calls tools? streams? how much context? The verdict
is cached (agent.llm.capability) and decides what ``TRAINDOC_LLM_MODE=auto`` uses."""

from __future__ import annotations

import urllib.error
from dataclasses import dataclass
from typing import Any

from agent.llm.backends import base_url
from agent.llm.capability import cache_path, get_json, measure_context, measure_streaming, measure_tool_calls, remember
from common.settings import Settings


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    fatal: bool = True  # a failed check that is not fatal is a note: the model is usable all the same

    @property
    def passed(self) -> bool:
        return self.ok or not self.fatal

    def line(self) -> str:
        return f"{'ok  ' if self.ok else 'FAIL' if self.fatal else 'note'} {self.name}: {self.detail}"


def mode_for(settings: Settings, tool_calls: bool | None) -> str:
    if settings.llm_mode != "auto":
        return settings.llm_mode
    return "agent" if tool_calls else "explain"


def doctor(settings: Settings) -> list[Check]:
    if settings.backend == "offline":
        return [Check("backend", False, "no model configured: set TRAINDOC_LLM_MODEL (and TRAINDOC_LLM_BASE_URL) or --backend")]
    url = base_url(settings)
    listing_url = f"{url}/models" if settings.backend == "openai" else f"{url}/api/tags"
    try:
        listing = get_json(listing_url, settings.llm_api_key, settings.llm_timeout_s)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        return [Check("reachable", False, f"GET {listing_url}: {getattr(exc, 'reason', exc)}")]
    checks = [Check("reachable", True, f"GET {listing_url} answered")]
    items = [m for m in (listing.get("data") or listing.get("models") or []) if isinstance(m, dict)]
    names = [str(m.get("id") or m.get("name") or m.get("model")) for m in items]
    listed = settings.llm_model in names or any(n.split(":")[0] == settings.llm_model for n in names)
    shown = ", ".join(names[:10]) or "(none)"
    checks.append(Check("model listed", listed, f"{settings.llm_model} {'is' if listed else 'is not'} among: {shown}"))
    try:
        tool_calls, detail = measure_tool_calls(settings)
    except Exception as exc:  # the chat endpoint could not be asked: nothing to cache
        checks.append(Check("tool calls", False, f"{type(exc).__name__}: {str(exc)[:200]}"))
        return checks
    streaming, stream_detail = measure_streaming(settings)
    item: dict[str, Any] | None = next((m for m in items if settings.llm_model in (m.get("id"), m.get("name"))), None)
    context, context_detail = measure_context(settings, item)
    remember(settings, "doctor-llm", tool_calls=tool_calls, streaming=streaming, context_tokens=context)
    mode = mode_for(settings, tool_calls)
    if not tool_calls:
        detail += "; `ask` answers in explain mode (traindoc gathers the facts, the model writes the answer)"
    checks.append(Check("tool calls", tool_calls, detail, fatal=settings.llm_mode == "agent"))
    checks.append(Check("streaming", bool(streaming), stream_detail, fatal=False))
    shown_context = f"{context} tokens ({context_detail})" if context else f"unknown: {context_detail}"
    checks.append(Check("context", context is not None, shown_context, fatal=False))
    cached = f"verdict cached in {cache_path(settings)}"
    if mode == "agent" and not tool_calls:
        checks.append(Check("mode", False, f"agent, but the model makes no tool calls: set TRAINDOC_LLM_MODE=auto or "
                                           f"explain; {cached}"))
    else:
        checks.append(Check("mode", True, f"{settings.llm_mode} → {mode}; {cached}"))
    return checks
