"""Running the real `traindoc slack` against the fake Slack Web API, and signing requests as Slack does.

A request to the bot carries ``X-Slack-Request-Timestamp`` and ``X-Slack-Signature: v0=HMAC-SHA256(secret,
"v0:{timestamp}:{body}")``; bolt rejects anything else with 401.
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import os
import secrets
import signal
import socket
import string
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.error import HTTPError
from urllib.parse import urlencode
from urllib.request import Request, urlopen

from clikit import BIN, ROOT, isolated_env
from fakes.slack_api import BOT_ID, BOT_USER, FakeSlack

BOT_TOKEN = "xoxb-1111-2222-fakebottoken"
SIGNING_SECRET = "fake-signing-secret-0123456789"
_ts = itertools.count(1)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def new_ts() -> str:
    """A message ts no other test uses (Slack's ts is the message id)."""
    return f"1800000000.{next(_ts):06d}"


def new_user() -> str:
    """A user of its own per test, so the per-user rate limit only bites where a test means it to."""
    return "U" + "".join(secrets.choice(string.ascii_uppercase + string.digits) for _ in range(9))


def fake_token(prefix: str, n: int = 32) -> str:
    return prefix + "".join(secrets.choice(string.ascii_letters + string.digits) for _ in range(n))


def sign(body: bytes, secret: str = SIGNING_SECRET, timestamp: int | None = None) -> dict[str, str]:
    stamp = str(int(time.time()) if timestamp is None else timestamp)
    digest = hmac.new(secret.encode(), b"v0:" + stamp.encode() + b":" + body, hashlib.sha256).hexdigest()
    return {"X-Slack-Request-Timestamp": stamp, "X-Slack-Signature": f"v0={digest}"}


def event_callback(event: dict[str, Any], event_id: str | None = None) -> dict[str, Any]:
    return {
        "token": "deprecated-verification-token", "team_id": "T1", "api_app_id": "A1", "type": "event_callback",
        "event": event, "event_id": event_id or "Ev" + secrets.token_hex(6).upper(), "event_time": int(time.time()),
        "authorizations": [{"team_id": "T1", "user_id": BOT_USER, "is_bot": True, "is_enterprise_install": False}],
    }


def mention(text: str, *, user: str, channel: str = "C1", ts: str | None = None, **extra: Any) -> dict[str, Any]:
    return {"type": "app_mention", "user": user, "text": f"<@{BOT_USER}> {text}", "ts": ts or new_ts(),
            "channel": channel, "event_ts": ts, **extra}


@dataclass
class Reply:
    status: int
    body: str
    headers: Mapping[str, str]


@dataclass
class Bot:
    fake: FakeSlack
    url: str
    process: subprocess.Popen[bytes]
    stderr_path: Path
    env: dict[str, str]

    def post(self, body: bytes, content_type: str, headers: Mapping[str, str] | None = None,
             secret: str = SIGNING_SECRET, timestamp: int | None = None) -> Reply:
        all_headers = {"Content-Type": content_type, **sign(body, secret, timestamp), **(headers or {})}
        request = Request(self.url, data=body, headers=all_headers, method="POST")
        try:
            with urlopen(request, timeout=30) as response:  # noqa: S310 - 127.0.0.1 only
                return Reply(response.status, response.read().decode(), dict(response.headers))
        except HTTPError as exc:
            return Reply(exc.code, exc.read().decode(), dict(exc.headers))

    def event(self, payload: dict[str, Any], headers: Mapping[str, str] | None = None, **kwargs: Any) -> Reply:
        return self.post(json.dumps(payload).encode(), "application/json", headers, **kwargs)

    def form(self, fields: Mapping[str, str], headers: Mapping[str, str] | None = None) -> Reply:
        return self.post(urlencode(fields).encode(), "application/x-www-form-urlencoded", headers)

    def stderr(self) -> str:
        return self.stderr_path.read_text(encoding="utf-8", errors="replace")

    def answer_to(self, ts: str, channel: str = "C1", timeout: float = 60) -> dict[str, Any]:
        """The params of the bot's one chat.postMessage in the thread of message ``ts``."""
        return self.fake.wait_for("chat.postMessage", timeout=timeout, channel=channel, thread_ts=ts)[0].params


def start_bot(fake: FakeSlack, env: dict[str, str], workdir: Path, *, timeout: float = 120) -> Bot:
    """`traindoc slack --port N` in its own process group; returns once it listens (or fails with its stderr)."""
    port = free_port()
    stderr_path = workdir / f"bot-{port}.stderr"
    with stderr_path.open("wb") as err:
        process = subprocess.Popen([str(BIN / "traindoc"), "slack", "--port", str(port)], env=env, cwd=ROOT,
                                   stdin=subprocess.DEVNULL, stdout=err, stderr=subprocess.STDOUT,
                                   start_new_session=True)
    bot = Bot(fake, f"http://127.0.0.1:{port}/slack/events", process, stderr_path, env)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"traindoc slack exited {process.returncode}: {bot.stderr()}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return bot
        except OSError:
            time.sleep(0.2)
    stop(process)
    raise AssertionError(f"traindoc slack did not listen within {timeout}s: {bot.stderr()}")


def stop(process: subprocess.Popen[bytes]) -> None:
    """End the bot and anything it started: its whole process group, TERM then KILL."""
    if process.poll() is not None:
        return
    for sig, wait in ((signal.SIGTERM, 5), (signal.SIGKILL, 5)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def blocks_text(params: dict[str, Any]) -> str:
    """A posted message's visible text: the fallback and every block's text."""
    from fakes.slack_api import iter_blocks_text

    blocks = params.get("blocks") or []
    if isinstance(blocks, str):
        blocks = json.loads(blocks)
    return "\n".join([str(params.get("text", "")), *iter_blocks_text(blocks)])


def buttons(params: dict[str, Any]) -> dict[str, str]:
    """action_id -> value of every button in the message."""
    blocks = params.get("blocks") or []
    if isinstance(blocks, str):
        blocks = json.loads(blocks)
    return {e["action_id"]: e.get("value", "") for b in blocks if b.get("type") == "actions" for e in b["elements"]}


def action_payload(action_id: str, value: str, thread_ts: str) -> dict[str, Any]:
    """A block_actions payload: someone clicked ``action_id`` on the bot's answer in thread ``thread_ts``."""
    message = {"type": "message", "user": BOT_USER, "bot_id": BOT_ID, "ts": new_ts(), "thread_ts": thread_ts}
    return {
        "type": "block_actions", "token": "t", "api_app_id": "A1", "trigger_id": "1.2.3",
        "user": {"id": new_user(), "team_id": "T1"}, "team": {"id": "T1", "domain": "fake"},
        "container": {"type": "message", "message_ts": message["ts"], "channel_id": "C1", "is_ephemeral": False},
        "channel": {"id": "C1", "name": "ml"}, "message": message, "response_url": "http://127.0.0.1:9/unused",
        "actions": [{"type": "button", "action_id": action_id, "block_id": "b1", "value": value,
                     "action_ts": str(time.time())}],
    }


def bot_env(base: Path, data: Path, fake: FakeSlack, extra: dict[str, str] | None = None) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("TRAINDOC_", "SLACK_"))}
    env = isolated_env(base, clean)
    env.update(TRAINDOC_DATA_DIR=str(data), SLACK_BOT_TOKEN=BOT_TOKEN, SLACK_SIGNING_SECRET=SIGNING_SECRET,
               SLACK_API_URL=fake.api_url, TRAINDOC_FEEDBACK_DB=str(base / "feedback.sqlite3"))
    env.update(extra or {})
    return env
