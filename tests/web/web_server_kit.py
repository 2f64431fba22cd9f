"""Start `traindoc web` as a user does (a subprocess in its own process group) and drive its page.

Server helpers: a free loopback port, an environment whose stores all live under one folder, a start that
waits until the page answers (or fails with the server's stderr), a stop that always ends the whole group.
Page helpers: ask a question and wait for the turn to finish, read the last answer, its tool steps and its sources.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clikit import BIN, ROOT, isolated_env

START_TIMEOUT_S = 150
ANSWER_TIMEOUT_MS = 90_000


def child_pids(pid: int) -> list[int]:
    """The process's children, read from /proc (a server's worker process, traindoc_web.worker)."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            found += [int(child) for child in (task / "children").read_text().split()]
        except OSError:
            continue
    return found


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def server_env(base: Path, index: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """Isolated environment over a private copy of the shared index (uploads land in its cache folder)."""
    env = isolated_env(base)
    data = base / "data"
    if not data.exists():
        shutil.copytree(index, data)
    env.update(TRAINDOC_DATA_DIR=str(data), TRAINDOC_FEEDBACK_DB=str(base / "feedback.sqlite3"),
               GRADIO_ANALYTICS_ENABLED="False", TRAINDOC_PROBE_TIMEOUT="5")
    # GRADIO_TEMP_DIR: an in-process test that loaded the settings set it in this worker; the server picks its own
    for key in ("TRAINDOC_WEB_AUTH", "TRAINDOC_WEB_MAX_UPLOAD_MB", "TRAINDOC_BACKEND", "TRAINDOC_LLM_MODEL",
                "GRADIO_TEMP_DIR"):
        env.pop(key, None)
    env.update(extra or {})
    return env


@dataclass
class WebServer:
    process: subprocess.Popen[bytes]
    port: int
    env: dict[str, str]
    stderr_path: Path
    host: str = "127.0.0.1"
    _stopped: bool = field(default=False, repr=False)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    @property
    def netloc(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def feedback_db(self) -> str:
        return self.env["TRAINDOC_FEEDBACK_DB"]

    def stderr(self) -> str:
        return self.stderr_path.read_text(encoding="utf-8", errors="replace")

    def wait_ready(self, timeout: float = START_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"traindoc web exited with {self.process.returncode}:\n{self.stderr()}")
            try:
                urllib.request.urlopen(self.url, timeout=2).close()
                return
            except urllib.error.HTTPError:  # any HTTP answer (a login wall included) means it is serving
                return
            except OSError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"traindoc web did not answer in {timeout:.0f} s:\n{self.stderr()}") from None
                time.sleep(0.3)

    def stop(self) -> None:
        """End the whole process group: SIGTERM, then SIGKILL if it lingers."""
        if self._stopped:
            return
        self._stopped = True
        for sig, wait_s in ((signal.SIGTERM, 10), (signal.SIGKILL, 10)):
            try:
                os.killpg(self.process.pid, sig)
            except ProcessLookupError:
                break
            try:
                self.process.wait(timeout=wait_s)
                break
            except subprocess.TimeoutExpired:
                continue
        try:  # stragglers the group leader left behind
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def start_web(base: Path, index: Path, *args: str, env: Mapping[str, str] | None = None, host: str = "127.0.0.1",
              wait: bool = True, launcher: Callable[[list[str]], Sequence[str]] | None = None) -> WebServer:
    """``launcher``: the command line that runs the server's (in a mount namespace of its own, say); it must exec it,
    so that the process started is the server."""
    base.mkdir(parents=True, exist_ok=True)
    port = free_port()
    full_env = server_env(base, index, env)
    stderr_path = base / f"web-{port}.stderr"
    argv = [str(BIN / "traindoc"), "web", "--host", host, "--port", str(port), *args]
    with stderr_path.open("wb") as stderr:
        process = subprocess.Popen(list(launcher(argv)) if launcher else argv,
                                   env=full_env, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=stderr, stderr=stderr,
                                   start_new_session=True)
    server = WebServer(process, port, full_env, stderr_path, host)
    if wait:
        try:
            server.wait_ready()
        except BaseException:
            server.stop()
            raise
    return server


# -- page helpers --------------------------------------------------------------------------------------

def ask(page: Any, question: str, *, expect_error: bool = False) -> None:
    """Type a question (may be empty when a log is uploaded), press Ask, wait until the turn is complete:
    the sources panel has a group for this answer (with sections, or saying it has none: the documents do not cover
    the question) or a new warning message or error toast shows (an error)."""
    before = _counts(page)
    page.fill("#question textarea", question)
    page.click("#ask")
    wait_for_turn(page, question, expect_error=expect_error, before=before)


def _counts(page: Any) -> list[int]:
    return [page.locator("#chat .user-row").count(), page.locator("#chat .bot-row", has_text="⚠️").count(),
            page.locator("#sources .traindoc-turn").count()]


def wait_for_turn(page: Any, question: str, *, before: list[int], expect_error: bool = False) -> None:
    """Wait until the turn started after ``before`` (``_counts``) is complete."""
    page.wait_for_function(
        """([users, warnings, turns]) => {
             const n = document.querySelectorAll('#chat .user-row').length;
             const warned = [...document.querySelectorAll('#chat .bot-row')].filter(r => r.innerText.includes('⚠️')).length;
             const answered = document.querySelectorAll('#sources .traindoc-turn').length;
             return (n > users && (answered > turns || warned > warnings)) || document.querySelector('.toast-body');
           }""",
        arg=before, timeout=ANSWER_TIMEOUT_MS)
    page.wait_for_function("() => !document.querySelector('#chat .pending, #chat .generating')", timeout=ANSWER_TIMEOUT_MS)
    answered = page.locator("#sources .traindoc-turn").count() > before[2]
    if answered and not expect_error:  # the sources panel can render before the chat's last message does
        page.wait_for_function(
            """() => {
                 const rows = [...document.querySelectorAll('#chat .user-row, #chat .bot-row')];
                 const last = rows.pop();
                 if (!last || !last.classList.contains('bot-row')) return false;
                 const said = [...last.querySelectorAll('.message')].filter(m => !m.querySelector('.thought-group'));
                 return said.length > 0 && said[said.length - 1].innerText.trim().length > 0;
               }""", timeout=ANSWER_TIMEOUT_MS)
    if answered == expect_error:
        toasts = page.locator(".toast-body").all_inner_texts()
        raise AssertionError(f"expected {'an error' if expect_error else 'an answer'} to {question!r}; "
                             f"counts {before} -> {_counts(page)}, status {page.inner_text('#status')!r}, "
                             f"toasts {toasts}, chat ends {page.inner_text('#chat')[-400:]!r}")


def last_answer(page: Any) -> str:
    """The text of the last assistant message that is not a tool step."""
    row = page.locator("#chat .bot-row").last
    return str(row.locator(".message:not(:has(.thought-group))").last.inner_text())


def last_steps(page: Any) -> list[str]:
    """The titles of the tool steps of the last turn."""
    row = page.locator("#chat .bot-row").last
    return [t.strip() for t in row.locator(".thought-group .title").all_inner_texts()]


def latest_sources(page: Any) -> Any:
    """The sources group of the latest answer (the panel keeps every answer's, the latest first)."""
    return page.locator("#sources .traindoc-turn").first


def source_summaries(page: Any) -> list[str]:
    return [s.strip() for s in latest_sources(page).locator(".traindoc-source").all_inner_texts()]


def source_files(page: Any) -> list[str]:
    """The file each source of the latest answer is (its ``data-source``: the page shows titles, never file names)."""
    sources = latest_sources(page).locator(".traindoc-source")
    return [sources.nth(i).get_attribute("data-source") or "" for i in range(sources.count())]
