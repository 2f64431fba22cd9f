"""Chat-model backends: any OpenAI-compatible server (vLLM, llama.cpp, LM Studio, OpenAI) through
langchain-openai, and Ollama through langchain-ollama. Plus `traindoc doctor-llm`."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

from common.errors import ConfigError
from common.settings import Settings

DEFAULT_URLS = {"openai": "https://api.openai.com/v1", "ollama": "http://127.0.0.1:11434"}


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str


def describe(settings: Settings) -> str:
    return f"{settings.backend}:{settings.llm_model}"


def make_chat_model(settings: Settings, *, streaming: bool = True) -> Any:
    if not settings.llm_model:
        raise ConfigError(f"--backend {settings.backend} needs a model", hint="set TRAINDOC_LLM_MODEL")
    base_url = settings.llm_base_url or DEFAULT_URLS[settings.backend]
    if settings.backend == "openai":
        from langchain_openai import ChatOpenAI
        from pydantic import SecretStr

        return ChatOpenAI(
            model=settings.llm_model, base_url=base_url, api_key=SecretStr(settings.llm_api_key or "not-needed"),
            timeout=settings.llm_timeout_s, max_retries=0, streaming=streaming, temperature=0,
        )
    if settings.backend == "ollama":
        from langchain_ollama import ChatOllama

        return ChatOllama(model=settings.llm_model, base_url=base_url, temperature=0,
                          client_kwargs={"timeout": settings.llm_timeout_s})
    raise ConfigError(f"unknown backend {settings.backend!r}", hint="use offline, openai or ollama")


def _get_json(url: str, api_key: str | None, timeout: float) -> Any:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {api_key}"} if api_key else {})
    with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 - user-configured URL
        return json.loads(response.read().decode("utf-8"))


def doctor(settings: Settings) -> list[Check]:
    """Reachable? Lists the model? Supports tool calls?"""
    if settings.backend == "offline":
        return [Check("backend", False, "no model configured: set TRAINDOC_LLM_MODEL (and TRAINDOC_LLM_BASE_URL) or --backend")]
    base_url = (settings.llm_base_url or DEFAULT_URLS[settings.backend]).rstrip("/")
    checks: list[Check] = []
    listing_url = f"{base_url}/models" if settings.backend == "openai" else f"{base_url}/api/tags"
    try:
        listing = _get_json(listing_url, settings.llm_api_key, settings.llm_timeout_s)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        return [Check("reachable", False, f"GET {listing_url}: {getattr(exc, 'reason', exc)}")]
    checks.append(Check("reachable", True, f"GET {listing_url} answered"))
    items = listing.get("data") or listing.get("models") or []
    names = [str(m.get("id") or m.get("name") or m.get("model")) for m in items if isinstance(m, dict)]
    listed = settings.llm_model in names or any(n.split(":")[0] == settings.llm_model for n in names)
    shown = ", ".join(names[:10]) or "(none)"
    checks.append(Check("model listed", listed, f"{settings.llm_model} {'is' if listed else 'is not'} among: {shown}"))
    try:
        from langchain_core.tools import tool

        @tool
        def ping(text: str) -> str:
            """Echo the text back."""
            return text

        model = make_chat_model(settings, streaming=False).bind_tools([ping])
        reply = model.invoke("Call the ping tool with text 'ok'. Do not answer in prose.")
        calls = getattr(reply, "tool_calls", None) or []
        checks.append(Check("tool calls", bool(calls), f"model returned {len(calls)} tool call(s)"))
    except Exception as exc:  # any client error is the finding itself
        checks.append(Check("tool calls", False, f"{type(exc).__name__}: {str(exc)[:200]}"))
    return checks
