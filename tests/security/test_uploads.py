"""Uploads and pipes: a bundle uploaded to the web chat is the bundle's machine, read within its cap and judged by
traindoc; logs stay streamed, so a pipe or process substitution (`ask --log <(kubectl logs ...)`) works."""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any

from clikit import BIN, ROOT
from test_bundles import EVIL_FIX, bundle

from agent.core import Troubleshooter
from common.settings import Settings
from traindoc_web.chat import WebChat, WebOptions


def _chat(data: Path, tmp_path: Path) -> WebChat:
    settings = replace(Settings.from_env(), data_dir=data)
    return WebChat(Troubleshooter(settings), WebOptions(feedback_db=tmp_path / "fb.sqlite3"))


def _respond(chat: WebChat, text: str, upload: Path) -> list[dict[str, Any]]:
    turns = [chat_state for chat_state, *_ in chat.respond(text, [], str(upload), [])]
    return turns[-1]


def _answer(messages: list[dict[str, Any]]) -> str:
    """The turn's answer: right under the question (the probes that made it follow it)."""
    asked = max(i for i, message in enumerate(messages) if message["role"] == "user")
    return str(messages[asked + 1]["content"])


def test_a_bundle_uploaded_to_the_web_is_the_bundles_machine(use_shared_index: Path, tmp_path: Path) -> None:
    path = tmp_path / "node3.json"
    path.write_text(json.dumps(bundle()), encoding="utf-8")
    messages = _respond(_chat(use_shared_index, tmp_path), "NCCL hangs at init", path)
    answer = _answer(messages)
    assert "node3.json" in answer and "NCCL_IFNAME_MISSING" in answer
    assert EVIL_FIX not in answer


def test_a_bundle_upload_above_the_cap_is_one_line(use_shared_index: Path, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("TRAINDOC_MAX_BUNDLE_MB", "0.01")
    path = tmp_path / "node3.json"
    path.write_text(json.dumps({**bundle(), "padding": "x" * 20_000}), encoding="utf-8")
    messages = _respond(_chat(use_shared_index, tmp_path), "NCCL hangs at init", path)
    shown = _answer(messages)
    assert "bundle cap (TRAINDOC_MAX_BUNDLE_MB)" in shown
    assert "\n" not in shown.strip()


def test_a_log_through_a_pipe_is_read(use_shared_index: Path) -> None:
    read_end, write_end = os.pipe()
    os.write(write_end, b"step 1 loss 2.3\nRuntimeError: CUDA error: out of memory\n")
    os.close(write_end)
    try:
        result = subprocess.run([str(BIN / "ask"), "--json", "--no-probes", "--log", f"/dev/fd/{read_end}", "why"],
                                capture_output=True, text=True, cwd=ROOT, stdin=subprocess.DEVNULL, pass_fds=(read_end,),
                                timeout=120, check=False)
    finally:
        os.close(read_end)
    assert result.returncode == 0, result.stderr
    assert "out of memory" in json.dumps(json.loads(result.stdout))


def test_uploads_past_the_readers_are_refused_in_one_line_and_questions_still_answered(use_shared_index: Path,
                                                                                       tmp_path: Path) -> None:
    """Every upload reader busy (hostile uploads being read): another upload gets one line at once, with no server
    path; a question without an upload is answered as usual, whatever the uploads do."""
    import traindoc_web.chat as web

    chat = _chat(use_shared_index, tmp_path)
    log = tmp_path / "train.log"
    log.write_text("RuntimeError: CUDA error: out of memory\n", encoding="utf-8")
    held = 0
    while web.UPLOAD_READERS.acquire(blocking=False):  # the slots the hostile uploads hold
        held += 1
    original = web.UPLOAD_WAIT_S
    web.UPLOAD_WAIT_S = 0.1
    try:
        refused = _answer(_respond(chat, "why did it die?", log))
        answered = _answer([state for state, *_ in chat.respond("CUDA out of memory, what now?", [], None, [])][-1])
    finally:
        web.UPLOAD_WAIT_S = original
        for _ in range(held):
            web.UPLOAD_READERS.release()
    assert held == 2
    assert "reading other uploaded logs" in refused and "\n" not in refused.strip() and str(tmp_path) not in refused
    assert "out of memory" in answered.lower()


def test_an_upload_error_names_the_file_never_the_servers_path(tmp_path: Path) -> None:
    from traindoc_web.chat import without_upload_path

    upload = tmp_path / "gradio" / "abc123" / "node3.json"
    message = f"{upload}: results[0]: not an object; see {upload.parent}"
    shown = without_upload_path(message, str(upload))
    assert str(tmp_path) not in shown and "'node3.json'" in shown
