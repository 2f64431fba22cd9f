"""A fake OpenAI-compatible server on 127.0.0.1, driven by a scripted queue of responses.

Implements ``GET /v1/models`` and ``POST /v1/chat/completions`` (plain JSON and SSE streaming, text and
tool calls) and can misbehave on cue: an HTTP error (429, a context-length 400), a hang longer than the
client's timeout, a tool call whose arguments are not JSON. Every request body is recorded, so a test can
prove what a model was (and was not) sent. ``closed_port()`` gives a URL with nothing listening.

``tool_calling=False`` plays a model without tool calling, as llama.cpp's server runs most small GGUF
models: the ``tools`` of a request are ignored and a scripted tool call comes back as prose (the JSON a
small model writes instead of calling). ``cite_facts()`` answers an explain-mode request by citing the
numbered facts it was given.

    with FakeOpenAI([calls(("search_docs", {"query": "NCCL"})), echo("See [doc:{doc}].")]) as server:
        env = {"TRAINDOC_LLM_BASE_URL": server.url, "TRAINDOC_LLM_MODEL": "fake-model"}
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

DOC_ID = re.compile(r"\[doc:([A-Za-z0-9_\-]+)\]")
FACT = re.compile(r"(?m)^\[(\d+)\] (Document section|Probe|Job diagnosis|Live stack snapshot)")
PLACEHOLDER = re.compile(r"\[[A-Z_]+_\d+\]")  # common.redaction's placeholders
CONTEXT_OVERFLOW = {"error": {
    "message": "This model's maximum context length is 8192 tokens. However, your messages resulted in 9100 tokens.",
    "type": "invalid_request_error", "code": "context_length_exceeded"}}
RATE_LIMITED = {"error": {"message": "Rate limit reached for requests", "type": "requests", "code": "rate_limit_exceeded"}}


# -- scripted actions ------------------------------------------------------------


@dataclass(frozen=True)
class Text:
    content: str


@dataclass(frozen=True)
class Calls:
    calls: tuple[tuple[str, dict[str, Any] | str], ...]  # (name, args); a str is sent verbatim (malformed JSON)


@dataclass(frozen=True)
class Status:
    code: int
    body: dict[str, Any]


@dataclass(frozen=True)
class Hang:
    seconds: float


Action = Text | Calls | Status | Hang | Callable[[dict[str, Any]], "Text | Calls | Status | Hang"]


def text(content: str) -> Text:
    return Text(content)


def calls(*pairs: tuple[str, dict[str, Any] | str]) -> Calls:
    return Calls(tuple(pairs))


def rate_limited() -> Status:
    return Status(429, RATE_LIMITED)


def context_overflow() -> Status:
    return Status(400, CONTEXT_OVERFLOW)


def malformed_call(name: str = "search_docs") -> Calls:
    return Calls(((name, "}{ not json"),))


def echo(template: str) -> Callable[[dict[str, Any]], Text]:
    """Answer ``template`` with ``{doc}`` set to the first [doc:ID] in a tool result received and
    ``{placeholders}`` to every redaction placeholder in the messages (as a model echoing them would)."""

    def act(body: dict[str, Any]) -> Text:
        messages = body.get("messages", [])
        seen = json.dumps([m.get("content") for m in messages], ensure_ascii=False)
        found = DOC_ID.search(json.dumps([m.get("content") for m in messages if m.get("role") == "tool"]))
        placeholders = " ".join(dict.fromkeys(PLACEHOLDER.findall(seen)))
        return Text(template.format(doc=found.group(1) if found else "missing", placeholders=placeholders))

    return act


def cite_facts(template: str) -> Callable[[dict[str, Any]], Text]:
    """Answer ``template`` with ``{doc}``, ``{probe}``, ``{job}`` set to the number of the first fact of that kind
    in the last user message (explain mode's numbered facts) and ``{placeholders}`` as in ``echo``."""

    def act(body: dict[str, Any]) -> Text:
        messages = body.get("messages", [])
        user = next((str(m.get("content")) for m in reversed(messages) if m.get("role") == "user"), "")
        numbers: dict[str, str] = {}
        for n, kind in FACT.findall(user):
            numbers.setdefault({"Document section": "doc", "Probe": "probe"}.get(kind, "job"), n)
        seen = json.dumps([m.get("content") for m in messages], ensure_ascii=False)
        placeholders = " ".join(dict.fromkeys(PLACEHOLDER.findall(seen)))
        return Text(template.format(doc=numbers.get("doc", "0"), probe=numbers.get("probe", "0"),
                                    job=numbers.get("job", "0"), placeholders=placeholders))

    return act


def closed_port() -> str:
    """A base URL on 127.0.0.1 where nothing listens."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


# -- the server -----------------------------------------------------------------


@dataclass
class FakeOpenAI:
    script: list[Action] = field(default_factory=list)
    models: Sequence[str] = ("fake-model",)
    fallback: str = "No further replies scripted."
    requests: list[dict[str, Any]] = field(default_factory=list)  # chat request bodies, in order
    busy_s: float = 0.0  # time spent inside chat handlers (for benchmarks)
    tool_calling: bool = True  # False: tools are ignored, scripted calls come back as prose
    listing: dict[str, Any] = field(default_factory=dict)  # extra fields of each model in GET /models (max_model_len)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stop: threading.Event = field(default_factory=threading.Event)
    _server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self._server is not None, "use the server as a context manager"
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def all_text_received(self) -> str:
        return "\n".join(json.dumps(body, ensure_ascii=False) for body in self.requests)

    def __enter__(self) -> FakeOpenAI:
        server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        server.daemon_threads = True
        server.block_on_close = False
        self._server = server
        threading.Thread(target=server.serve_forever, daemon=True, name="fake-openai").start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()  # wakes any hanging handler
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def _next(self, body: dict[str, Any]) -> Text | Calls | Status | Hang:
        with self._lock:
            self.requests.append(body)
            action = self.script.pop(0) if self.script else Text(self.fallback)
        action = action(body) if callable(action) else action
        if isinstance(action, Calls) and not self.tool_calling:
            return Text(" ".join(json.dumps({"name": name, "arguments": args}) for name, args in action.calls))
        return action


def _handler(fake: FakeOpenAI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            return None

        def _json(self, code: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path.rstrip("/").endswith("/models"):
                self._json(200, {"object": "list", "data": [{"id": m, "object": "model", "owned_by": "fake"} | fake.listing
                                                            for m in fake.models]})
            else:
                self._json(404, {"error": {"message": f"no route {self.path}"}})

        def do_POST(self) -> None:
            started = time.perf_counter()
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self._json(404, {"error": {"message": f"no route {self.path}"}})
                return
            action = fake._next(body)
            try:
                if isinstance(action, Hang):
                    fake._stop.wait(action.seconds)
                    action = Text("too late")
                if isinstance(action, Status):
                    self._json(action.code, action.body)
                elif body.get("stream"):
                    self._stream(body, action)
                else:
                    self._json(200, _completion(body, action))
            except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout): fine
                pass
            finally:
                with fake._lock:
                    fake.busy_s += time.perf_counter() - started

        def _stream(self, body: dict[str, Any], action: Text | Calls) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            for delta, finish in _deltas(action):
                self._event(_chunk(body, delta, finish))
            if (body.get("stream_options") or {}).get("include_usage"):
                self._event(_chunk(body, None, None) | {"choices": [], "usage": _USAGE})
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()

        def _event(self, payload: dict[str, Any]) -> None:
            self.wfile.write(f"data: {json.dumps(payload, ensure_ascii=False)}\n\n".encode())
            self.wfile.flush()

    return Handler


_USAGE = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}


def _arguments(args: dict[str, Any] | str) -> str:
    return args if isinstance(args, str) else json.dumps(args)


def _tool_calls(action: Calls) -> list[dict[str, Any]]:
    return [{"id": f"call_{i}_{name}", "type": "function", "function": {"name": name, "arguments": _arguments(args)}}
            for i, (name, args) in enumerate(action.calls)]


def _completion(body: dict[str, Any], action: Text | Calls) -> dict[str, Any]:
    if isinstance(action, Calls):
        message: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": _tool_calls(action)}
        finish = "tool_calls"
    else:
        message, finish = {"role": "assistant", "content": action.content}, "stop"
    return {"id": "chatcmpl-fake", "object": "chat.completion", "created": int(time.time()),
            "model": body.get("model", "fake-model"), "usage": _USAGE,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}]}


def _deltas(action: Text | Calls) -> list[tuple[dict[str, Any], str | None]]:
    """The stream: a role chunk, content word by word or each tool call's name then its arguments, a finish."""
    out: list[tuple[dict[str, Any], str | None]] = [({"role": "assistant", "content": ""}, None)]
    if isinstance(action, Calls):
        for i, call in enumerate(_tool_calls(action)):
            head = {"index": i, "id": call["id"], "type": "function",
                    "function": {"name": call["function"]["name"], "arguments": ""}}
            out.append(({"tool_calls": [head]}, None))
            out.append(({"tool_calls": [{"index": i, "function": {"arguments": call["function"]["arguments"]}}]}, None))
        out.append(({}, "tool_calls"))
    else:
        words = action.content.split(" ")
        out.extend(({"content": w if i == 0 else " " + w}, None) for i, w in enumerate(words))
        out.append(({}, "stop"))
    return out


def _chunk(body: dict[str, Any], delta: dict[str, Any] | None, finish: str | None) -> dict[str, Any]:
    return {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": int(time.time()),
            "model": body.get("model", "fake-model"),
            "choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish}]}
