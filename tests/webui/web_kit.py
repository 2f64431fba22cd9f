"""Start a real `traindoc web` on a free loopback port and drive it with Debian's chromium."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from clikit import BIN, ROOT, isolated_env

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--disable-quic"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class WebServer:
    process: subprocess.Popen[bytes]
    url: str
    stderr: Path
    env: dict[str, str]

    def log(self) -> str:
        return self.stderr.read_text(encoding="utf-8", errors="replace")


def web_env(base: Path, shared_index: Path, **extra: str) -> dict[str, str]:
    env = isolated_env(base)
    data = base / "data"
    if not data.exists():
        shutil.copytree(shared_index, data)
    env.update(TRAINDOC_DATA_DIR=str(data), TRAINDOC_FEEDBACK_DB=str(base / "feedback.sqlite3"),
               TRAINDOC_PROBE_TIMEOUT="5", GRADIO_ANALYTICS_ENABLED="False")
    env.update(extra)
    return env


def start_web(env: dict[str, str], base: Path, *args: str, host: str = "127.0.0.1", timeout: float = 120,
              auth: tuple[str, str] | None = None) -> WebServer:
    port = free_port()
    stderr = base / f"web-{port}.log"
    process = subprocess.Popen(
        [str(BIN / "traindoc"), "web", "--host", host, "--port", str(port), *args],
        env=env, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=stderr.open("wb"), stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}/"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"traindoc web exited {process.returncode}: {stderr.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return WebServer(process, url, stderr, env)
        except (urllib.error.URLError, OSError):
            time.sleep(0.3)
    stop_web(WebServer(process, url, stderr, env))
    raise RuntimeError(f"traindoc web did not answer within {timeout}s: {stderr.read_text()[-2000:]}")


def stop_web(server: WebServer) -> None:
    try:
        os.killpg(server.process.pid, signal.SIGTERM)
        server.process.wait(timeout=10)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(server.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
