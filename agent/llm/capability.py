"""What a model can do: tool calls, streaming, context size. Measured by `traindoc doctor-llm` (or, in
``auto`` mode, the tool-call check alone on the first question) and cached per backend + base URL + model
in the data directory, so choosing between agent and explain mode costs nothing per question.

A context size the server does not publish is learned from its first context-overflow error.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import threading
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass, fields, replace
from datetime import UTC, datetime
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from agent.llm.backends import base_url, make_chat_model
from agent.llm.failure import failure_kind
from common.settings import Settings

CACHE_FILE = "llm-capabilities.json"
CONTEXT_IN_ERROR = re.compile(
    r"(?i)(?:maximum context length is|context window of|context length of|context size \(|context size is|n_ctx\s*[=:]?)"
    r"\s*(\d{3,7})")
LISTING_KEYS = ("max_model_len", "context_length", "context_window", "max_context_length")
OLLAMA_DEFAULT_NUM_CTX = 4096
TRANSPORT = ("unreachable", "timed out", "rate limited")  # the server was not really asked: no verdict
PING_TOKENS = 200  # room for a tool call, not for a base model's ramble
STREAM_CHECK_TOKENS = 24
_lock = threading.Lock()


@dataclass(frozen=True)
class Capability:
    tool_calls: bool | None  # None: not measured yet
    streaming: bool | None = None
    context_tokens: int | None = None
    source: str = "doctor-llm"  # who measured it: doctor-llm, the first question, an answer that showed otherwise
    checked: str = ""


@cache
def prompts() -> dict[str, Any]:
    return json.loads(resources.files("agent").joinpath("data/model_prompts.json").read_text(encoding="utf-8"))  # type: ignore[no-any-return]


# -- the cache ---------------------------------------------------------------------


def cache_path(settings: Settings) -> Path:
    return settings.llm_capabilities or settings.data_dir / CACHE_FILE


def cache_key(settings: Settings) -> str:
    return f"{settings.backend} {base_url(settings)} {settings.llm_model}"


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def load(settings: Settings) -> Capability | None:
    entry = _read(cache_path(settings)).get(cache_key(settings))
    if not isinstance(entry, dict):
        return None
    known = {f.name for f in fields(Capability)}
    return Capability(**{k: v for k, v in entry.items() if k in known})


def remember(settings: Settings, source: str, **changes: Any) -> Capability:
    """Merge ``changes`` into the cached entry and write it."""
    with _lock:
        path = cache_path(settings)
        data = _read(path)
        old = load(settings) or Capability(tool_calls=None)
        entry = replace(old, **changes, source=source, checked=datetime.now(UTC).isoformat(timespec="seconds"))
        data[cache_key(settings)] = asdict(entry)
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=path.parent, prefix=".llm-cap-", suffix=".json", delete=False,
                                         encoding="utf-8") as handle:
            json.dump(data, handle, indent=1, sort_keys=True)
        os.replace(handle.name, path)  # a reader never sees half a file
    return entry


# -- measuring ---------------------------------------------------------------------


def measure_tool_calls(settings: Settings, model: Any | None = None) -> tuple[bool, str]:
    """Does the model call a tool when told to? Raises the client's error when the server could not be
    asked at all (unreachable, timed out, rate limited): that is no verdict."""
    from langchain_core.tools import tool

    @tool
    def ping(text: str) -> str:
        """Echo the text back."""
        return text

    chat = model if model is not None else make_chat_model(replace(settings, llm_max_tokens=PING_TOKENS), streaming=False)
    try:
        reply = chat.bind_tools([ping]).invoke(prompts()["ping"])
    except Exception as exc:  # a server that rejects `tools` has answered the question too
        if failure_kind(exc) in TRANSPORT:
            raise
        return False, f"{type(exc).__name__}: {str(exc)[:200]}"
    calls = getattr(reply, "tool_calls", None) or []
    return bool(calls), f"model returned {len(calls)} tool call(s)"


def measure_streaming(settings: Settings) -> tuple[bool | None, str]:
    try:
        chat = make_chat_model(replace(settings, llm_max_tokens=STREAM_CHECK_TOKENS))
        pieces = [c for c in chat.stream(prompts()["stream_check"]) if c.content]
    except Exception as exc:  # the finding itself
        return False, f"{type(exc).__name__}: {str(exc)[:200]}"
    if len(pieces) > 1:
        return True, f"the reply came in {len(pieces)} chunks"
    if pieces:
        return False, "the reply came in one piece (it is shown when complete)"
    return None, "the model sent an empty reply"


def context_from_error(text: str) -> int | None:
    match = CONTEXT_IN_ERROR.search(text)
    return int(match.group(1)) if match else None


def measure_context(settings: Settings, listed: dict[str, Any] | None) -> tuple[int | None, str]:
    """The context size the server publishes: vLLM's max_model_len (or another listing field), llama.cpp
    server's /props, Ollama's /api/show. Cheap reads only: nothing is generated."""
    for key in LISTING_KEYS:
        if isinstance((listed or {}).get(key), int):
            return int((listed or {})[key]), f"{key} in the model listing"
    url = base_url(settings)
    try:
        if settings.backend == "ollama":
            return _ollama_context(url, settings)
        props = get_json(re.sub(r"/v1$", "", url) + "/props", settings.llm_api_key, settings.llm_timeout_s)
        n_ctx = (props.get("default_generation_settings") or {}).get("n_ctx") if isinstance(props, dict) else None
        if isinstance(n_ctx, int):
            return n_ctx, "n_ctx from the llama.cpp server's /props"
    except (urllib.error.URLError, OSError, ValueError):
        pass
    return None, "the server does not publish it; learned from its first context-overflow error"


def _ollama_context(url: str, settings: Settings) -> tuple[int | None, str]:
    shown = _post_json(f"{url}/api/show", {"model": settings.llm_model}, settings.llm_timeout_s)
    trained = next((v for k, v in (shown.get("model_info") or {}).items() if k.endswith(".context_length")), None)
    num_ctx = re.search(r"(?m)^num_ctx\s+(\d+)", str(shown.get("parameters") or ""))
    runtime = int(num_ctx.group(1)) if num_ctx else OLLAMA_DEFAULT_NUM_CTX
    size = min(runtime, int(trained)) if isinstance(trained, int) else runtime
    how = "num_ctx of the model" if num_ctx else f"Ollama's default num_ctx {OLLAMA_DEFAULT_NUM_CTX}"
    return size, f"{how} (trained for {trained})" if trained else how


def get_json(url: str, api_key: str | None, timeout: float) -> Any:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {api_key}"} if api_key else {})
    with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 - user-configured URL
        return json.loads(response.read().decode("utf-8"))


def _post_json(url: str, body: dict[str, Any], timeout: float) -> Any:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 - user-configured URL
        return json.loads(response.read().decode("utf-8"))
