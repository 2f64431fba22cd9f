"""Chat-model backends: any OpenAI-compatible server (vLLM, llama.cpp, LM Studio, Ollama's /v1, OpenAI)
through langchain-openai, and Ollama through langchain-ollama. `traindoc doctor-llm` is in doctor.py."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlparse

from common.errors import ConfigError
from common.settings import Settings

DEFAULT_URLS = {"openai": "https://api.openai.com/v1", "ollama": "http://127.0.0.1:11434"}


def describe(settings: Settings) -> str:
    return f"{settings.backend}:{settings.llm_model}"


def base_url(settings: Settings) -> str:
    return (settings.llm_base_url or DEFAULT_URLS.get(settings.backend, "")).rstrip("/")


def make_chat_model(settings: Settings, *, streaming: bool = True) -> Any:
    if not settings.llm_model:
        raise ConfigError(f"--backend {settings.backend} needs a model", hint="set TRAINDOC_LLM_MODEL")
    url = base_url(settings)
    if settings.backend == "openai":
        from langchain_openai import ChatOpenAI
        from pydantic import SecretStr

        # OpenAI itself takes max_completion_tokens (langchain's max_tokens); llama.cpp's and most other
        # compatible servers know only max_tokens and would generate to the end of the context.
        cap: dict[str, Any] = ({"max_tokens": settings.llm_max_tokens} if urlparse(url).hostname == "api.openai.com"
                               else {"extra_body": {"max_tokens": settings.llm_max_tokens}})
        return ChatOpenAI(
            model=settings.llm_model, base_url=url, api_key=SecretStr(settings.llm_api_key or "not-needed"),
            timeout=settings.llm_timeout_s, max_retries=0, streaming=streaming, temperature=0, **cap,
        )
    if settings.backend == "ollama":
        from langchain_ollama import ChatOllama

        return ChatOllama(model=settings.llm_model, base_url=url, temperature=0, num_predict=settings.llm_max_tokens,
                          client_kwargs={"timeout": settings.llm_timeout_s})
    raise ConfigError(f"unknown backend {settings.backend!r}", hint="use offline, openai or ollama")
