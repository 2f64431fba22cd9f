"""A fake Slack Web API on 127.0.0.1 that records every call, for driving the real `traindoc slack`.

slack_sdk's WebClient POSTs every method to ``BASE_URL + method`` (``/api/chat.postMessage``), form-encoded
(``params``) or JSON (``json``: the methods that carry blocks), with ``Authorization: Bearer <token>``.
This server answers the methods the bot uses (auth.test, reactions.add, reactions.remove, chat.postMessage,
chat.postEphemeral, conversations.replies, files.info, and a file upload's files.getUploadURLExternal, the POST of its
bytes to ``/upload/<id>`` and files.completeUploadExternal), serves attachments at ``/files/<name>`` (the
``url_private_download`` of a file) and takes slash-command ``response_url`` posts at ``/respond/<id>``.
It can fail a method with a Slack error, as Slack does: HTTP 200 with ``{"ok": false, "error": ...}``.
A thread is what a test scripted (``thread()``) plus what the bot posted in it, as Slack keeps it: the bot's
messages come back from conversations.replies with their ``metadata`` only when asked
(``include_all_metadata``), as Slack's API does.

    with FakeSlack() as slack:
        slack.fail("chat.postMessage", "not_in_channel")
        env = {"SLACK_API_URL": slack.api_url, ...}
        posts = slack.wait_for("chat.postMessage")
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

BOT_USER = "UBOT"
BOT_ID = "BBOT"


@dataclass(frozen=True)
class Call:
    method: str  # a Web API method ("chat.postMessage"), "file:<name>" for a download, "respond:<id>"
    params: dict[str, Any]  # the form fields or JSON body, plus the query string
    headers: dict[str, str]  # lower-case names
    body: str  # the raw request body, as sent

    @property
    def authorization(self) -> str:
        return self.headers.get("authorization", "")

    def text(self) -> str:
        """Everything the call would show in Slack (text and blocks), for content assertions."""
        return json.dumps(self.params, ensure_ascii=False)


class FakeSlack:
    def __init__(self) -> None:
        self._calls: list[Call] = []
        self._failures: dict[str, dict[str, Any]] = {}
        self._limits: dict[str, list[int]] = {}  # method -> [calls still answered 429, their Retry-After in s]
        self._files: dict[str, bytes] = {}
        self._replies: dict[str, list[dict[str, Any]]] = {}
        self._posted: dict[str, list[dict[str, Any]]] = {}
        self._lock = threading.Condition()
        self._ts = itertools.count(1)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="fake-slack", daemon=True)

    # -- lifecycle ----------------------------------------------------------------
    def __enter__(self) -> FakeSlack:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def api_url(self) -> str:
        """The SLACK_API_URL (slack_sdk's base_url) that points the bot here."""
        return self.url + "/api/"

    # -- scripting ----------------------------------------------------------------
    def fail(self, method: str, error: str, **extra: Any) -> None:
        """Answer ``method`` with ``{"ok": false, "error": error, **extra}`` (e.g. needed="chat:write")."""
        with self._lock:
            self._failures[method] = {"ok": False, "error": error, **extra}

    def rate_limit(self, method: str, times: int, retry_after: int = 1) -> None:
        """Answer the next ``times`` calls of ``method`` as Slack does when rate-limited: HTTP 429 with
        ``Retry-After: retry_after`` and ``{"ok": false, "error": "ratelimited"}``."""
        with self._lock:
            self._limits[method] = [times, retry_after]

    def _limited(self, method: str) -> int | None:
        """The Retry-After of this call when it is to be refused with 429, else None."""
        with self._lock:
            left = self._limits.get(method)
            if not left or left[0] <= 0:
                return None
            left[0] -= 1
            return left[1]

    def heal(self, method: str | None = None) -> None:
        with self._lock:
            if method is None:
                self._failures.clear()
            else:
                self._failures.pop(method, None)

    def add_file(self, name: str, content: bytes | str) -> str:
        """Serve ``content`` and return its url_private_download."""
        data = content.encode() if isinstance(content, str) else content
        with self._lock:
            self._files[name] = data
        return f"{self.url}/files/{name}"

    def thread(self, channel: str, thread_ts: str, messages: list[dict[str, Any]]) -> None:
        """What conversations.replies returns for this thread (Slack includes the parent first)."""
        with self._lock:
            self._replies[f"{channel}/{thread_ts}"] = messages

    def response_url(self, name: str) -> str:
        return f"{self.url}/respond/{name}"

    # -- inspection ---------------------------------------------------------------
    def calls(self, method: str | None = None) -> list[Call]:
        with self._lock:
            return [c for c in self._calls if method is None or c.method == method]

    def wait_for(self, method: str, count: int = 1, timeout: float = 60, **match: str) -> list[Call]:
        """The calls of ``method`` whose params include ``match``, once there are ``count``; else AssertionError."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while True:
                found = [c for c in self._calls if c.method == method and _matches(c, match)]
                if len(found) >= count:
                    return found
                left = deadline - time.monotonic()
                if left <= 0:
                    seen = [(c.method, c.params) for c in self._calls]
                    raise AssertionError(f"no {count} x {method} {match} within {timeout}s; calls: {seen}")
                self._lock.wait(left)

    def all_bodies(self) -> str:
        with self._lock:
            return "\n".join(c.body for c in self._calls)

    # -- the server ---------------------------------------------------------------
    def _record(self, call: Call) -> None:
        with self._lock:
            self._calls.append(call)
            self._lock.notify_all()

    def _answer(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            failure = self._failures.get(method)
            thread = f"{params.get('channel')}/{params.get('ts')}"
            replies = list(self._replies.get(thread, [])) + [dict(m) for m in self._posted.get(thread, [])]
            files = dict(self._files)
        if failure is not None:
            return failure
        ts = f"1900000000.{next(self._ts):06d}"  # after every ts the tests make (slack_kit.new_ts)
        if method == "chat.postMessage" and params.get("thread_ts"):
            kept = {"type": "message", "user": BOT_USER, "bot_id": BOT_ID, "ts": ts, "thread_ts": params["thread_ts"],
                    "text": params.get("text", ""), "blocks": params.get("blocks") or []}
            if isinstance(params.get("metadata"), dict):
                kept["metadata"] = params["metadata"]
            with self._lock:
                self._posted.setdefault(f"{params.get('channel')}/{params['thread_ts']}", []).append(kept)
        if method == "auth.test":
            return {"ok": True, "url": "https://fake.slack.test/", "team": "Fake", "user": "traindoc",
                    "team_id": "T1", "user_id": BOT_USER, "bot_id": BOT_ID, "is_enterprise_install": False}
        if method == "chat.postMessage":
            return {"ok": True, "channel": params.get("channel"), "ts": ts,
                    "message": {"text": params.get("text", ""), "user": BOT_USER, "bot_id": BOT_ID, "ts": ts}}
        if method == "chat.postEphemeral":
            return {"ok": True, "message_ts": ts}
        if method in ("reactions.add", "reactions.remove"):
            return {"ok": True}
        if method == "conversations.replies":
            if str(params.get("include_all_metadata", "")).lower() not in ("1", "true"):
                replies = [{k: v for k, v in m.items() if k != "metadata"} for m in replies]
            return {"ok": True, "messages": sorted(replies, key=lambda m: float(m.get("ts") or 0)), "has_more": False}
        if method == "files.getUploadURLExternal":  # an upload: the URL to send the bytes to, then completed
            file_id = f"FUP{next(self._ts):06d}"
            return {"ok": True, "upload_url": f"{self.url}/upload/{file_id}", "file_id": file_id}
        if method == "files.completeUploadExternal":
            listed = params.get("files")
            uploads = json.loads(listed) if isinstance(listed, str) else listed or []
            return {"ok": True, "files": [{"id": f.get("id"), "title": f.get("title")} for f in uploads]}
        if method == "files.info":
            name = str(params.get("file", ""))
            if name not in files:
                return {"ok": False, "error": "file_not_found"}
            return {"ok": True, "file": {"id": name, "name": name, "size": len(files[name]),
                                         "url_private_download": f"{self.url}/files/{name}"}}
        return {"ok": False, "error": "unknown_method"}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

            def _reply(self, status: int, body: bytes, content_type: str, extra: dict[str, str] | None = None) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                for name, value in (extra or {}).items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _serve(self) -> None:
                split = urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length).decode("utf-8", "replace") if length else ""
                headers = {k.lower(): v for k, v in self.headers.items()}
                params: dict[str, Any] = dict(parse_qsl(split.query))
                if "json" in headers.get("content-type", ""):
                    try:
                        parsed = json.loads(raw or "{}")
                    except ValueError:
                        parsed = {"_unparsed": raw}
                    params.update(parsed if isinstance(parsed, dict) else {"_body": parsed})
                elif raw:
                    params.update(parse_qsl(raw, keep_blank_values=True))
                if split.path.startswith("/api/"):
                    method = split.path[len("/api/"):]
                    fake._record(Call(method, params, headers, raw))
                    if (wait := fake._limited(method)) is not None:
                        self._reply(429, json.dumps({"ok": False, "error": "ratelimited"}).encode(),
                                    "application/json; charset=utf-8", {"Retry-After": str(wait)})
                        return
                    answer = json.dumps(fake._answer(method, params)).encode()
                    self._reply(200, answer, "application/json; charset=utf-8")
                elif split.path.startswith("/files/"):
                    name = split.path[len("/files/"):]
                    fake._record(Call(f"file:{name}", params, headers, raw))
                    with fake._lock:
                        data = fake._files.get(name)
                    if data is None:
                        self._reply(404, b"not found", "text/plain")
                    else:
                        self._reply(200, data, "application/octet-stream")
                elif split.path.startswith("/upload/"):  # the bytes of a file upload (files.getUploadURLExternal)
                    fake._record(Call(f"upload:{split.path[len('/upload/'):]}", params, headers, raw))
                    self._reply(200, b"OK", "text/plain")
                elif split.path.startswith("/respond/"):
                    fake._record(Call(f"respond:{split.path[len('/respond/'):]}", params, headers, raw))
                    self._reply(200, b"ok", "text/plain")
                else:
                    self._reply(404, b"not found", "text/plain")

            do_GET = _serve
            do_POST = _serve

        return Handler


def _matches(call: Call, match: dict[str, str]) -> bool:
    return all(str(call.params.get(k)) == v for k, v in match.items())


def iter_blocks_text(blocks: list[dict[str, Any]]) -> Iterator[str]:
    """Every mrkdwn/plain text in a Block Kit list (sections, context elements, button labels)."""
    for block in blocks:
        if isinstance(block.get("text"), dict):
            yield str(block["text"].get("text", ""))
        for element in block.get("elements", []):
            if isinstance(element.get("text"), dict):
                yield str(element["text"].get("text", ""))
            elif isinstance(element.get("text"), str):
                yield element["text"]
