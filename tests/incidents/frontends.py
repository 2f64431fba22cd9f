"""Start `traindoc web` and `traindoc slack` as users do (a process group of their own on a free 127.0.0.1 port) over a
copy of the session's index, and stop them by their group, for the incident tests of the web's 👍 and Slack's :+1:."""

from __future__ import annotations

import hashlib
import hmac
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlencode
from urllib.request import Request, urlopen

from clikit import BIN, ROOT, isolated_env

SIGNING_SECRET = "fake-signing-secret-incidents-0123"
START_TIMEOUT_S = 150


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def server_env(base: Path, index: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = isolated_env(base, {k: v for k, v in os.environ.items() if not k.startswith(("TRAINDOC_", "SLACK_"))})
    shutil.copytree(index, base / "data")
    env.update(TRAINDOC_DATA_DIR=str(base / "data"), TRAINDOC_FEEDBACK_DB=str(base / "feedback.sqlite3"),
               GRADIO_ANALYTICS_ENABLED="False", **(extra or {}))
    return env


def start(argv: list[str], env: dict[str, str], log: Path, port: int) -> subprocess.Popen[bytes]:
    """``traindoc ARGV`` in its own process group; returns once ``port`` takes connections (or fails with its log)."""
    with log.open("wb") as out:
        process = subprocess.Popen([str(BIN / "traindoc"), *argv], env=env, cwd=ROOT, stdin=subprocess.DEVNULL,
                                   stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"traindoc {argv[0]} exited {process.returncode}: {log.read_text(errors='replace')}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return process
        except OSError:
            time.sleep(0.3)
    stop(process)
    raise AssertionError(f"traindoc {argv[0]} did not listen in {START_TIMEOUT_S} s: {log.read_text(errors='replace')}")


def stop(process: subprocess.Popen[bytes]) -> None:
    """End the process group: TERM, then KILL if it lingers."""
    for sig, wait_s in ((signal.SIGTERM, 10), (signal.SIGKILL, 10)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=wait_s)
            return
        except subprocess.TimeoutExpired:
            continue


def post_to_slack_bot(url: str, body: bytes, content_type: str) -> int:
    """POST ``body`` to the bot as Slack does: signed with the signing secret (bolt rejects anything else)."""
    stamp = str(int(time.time()))
    digest = hmac.new(SIGNING_SECRET.encode(), b"v0:" + stamp.encode() + b":" + body, hashlib.sha256).hexdigest()
    request = Request(url, data=body, method="POST", headers={"Content-Type": content_type, "X-Slack-Request-Timestamp": stamp,
                                                              "X-Slack-Signature": f"v0={digest}"})
    with urlopen(request, timeout=60) as response:  # noqa: S310 - 127.0.0.1 only
        return int(response.status)


def form(fields: Mapping[str, str]) -> bytes:
    return urlencode(fields).encode()
