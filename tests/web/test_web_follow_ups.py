"""Follow-ups in the web chat, as a new user asks them (issue 38 point 1): after "why is NCCL hanging", a follow-up's new
detail (a framework, a node count, a platform) changes the question, and the answer is what differs under it; the
chat's intake asks a log with no question about its root cause, as the CLI does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agent.core import build_troubleshooter
from common.settings import Settings
from traindoc_web.chat import WebChat, WebOptions

ROOT = Path(__file__).resolve().parents[2]
OOM_LOG = ROOT / "tests" / "jobs" / "data" / "gpu-real" / "oom_crash" / "console.log"


@pytest.fixture(scope="module")
def troubleshooter(shared_index: Path) -> Any:
    import os

    previous = os.environ.get("TRAINDOC_DATA_DIR")
    os.environ["TRAINDOC_DATA_DIR"] = str(shared_index)
    try:
        yield build_troubleshooter(Settings.from_env())
    finally:
        if previous is None:
            os.environ.pop("TRAINDOC_DATA_DIR", None)
        else:
            os.environ["TRAINDOC_DATA_DIR"] = previous


def _turn(chat: WebChat, message: str, state: tuple[Any, ...] | None, log: str | None = None) -> tuple[Any, ...]:
    chat_messages, answers, turns, browser = state if state is not None else ([], [], [], None)
    *_, last = chat.respond(message, chat_messages, log, answers, turns, browser)
    messages, _, _, answers, _, turns, _, browser = last
    return messages, answers, turns, browser


@pytest.mark.parametrize("follow_up, kind, said", [
    ("and with DeepSpeed?", "deepspeed_init_hang", "DeepSpeed"),
    ("what about on 8 nodes?", "nccl_network", "node"),
    ("and in Kubernetes?", "dev_shm", "/dev/shm"),
    ("那在 Kubernetes 的 pod 里呢？", "dev_shm", "/dev/shm"),
])
def test_a_follow_ups_new_detail_changes_the_answer(troubleshooter: Any, tmp_path: Path, follow_up: str, kind: str,
                                                    said: str) -> None:
    chat = WebChat(troubleshooter, WebOptions(feedback_db=tmp_path / "fb.sqlite3", history_days=0))
    first = _turn(chat, "why is NCCL hanging", None)
    before = first[1][-1]["answer"]
    assert before["lead"]["kind"] == "collective_timeout"
    after = _turn(chat, follow_up, first)[1][-1]["answer"]
    assert after["lead"]["kind"] == kind, after["lead"]
    assert said in after["verdict"]["cause"] + after["answer"]
    assert after["verdict"]["cause"] != before["verdict"]["cause"]
    assert after["language"] == ("zh" if "那" in follow_up else "en")


def test_a_log_without_a_question_asks_about_its_root_cause(troubleshooter: Any, tmp_path: Path) -> None:
    chat = WebChat(troubleshooter, WebOptions(feedback_db=tmp_path / "fb.sqlite3", history_days=0))
    messages, answers, _, _ = _turn(chat, "", None, log=str(OOM_LOG))
    answer = answers[-1]["answer"]
    assert answer["question"] == answer["diagnosis"]["root_cause"]["summary"]  # the root cause, not the loudest line
    assert "out of memory" in answer["verdict"]["cause"].lower()
    shown = next(m["content"] for m in messages if m["role"] == "assistant" and not m.get("metadata"))
    assert "Checks that confirm it" not in shown  # the brief answer first, the whole one folded below it
    assert any((m.get("metadata") or {}).get("title", "").endswith("Full answer") for m in messages)


def test_a_paste_past_the_message_limit_is_refused_at_once_saying_to_upload_it(troubleshooter: Any, tmp_path: Path) -> None:
    """Issue 40 point 4: bounded work per request: a 5 MB paste costs the shared server nothing but one line."""
    chat = WebChat(troubleshooter, WebOptions(feedback_db=tmp_path / "fb.sqlite3", history_days=0))
    paste = "step 1 loss 2.3\n" * 350_000 + "RuntimeError: CUDA out of memory"
    outputs = list(chat.respond(paste, [], None, [], [], None))
    assert len(outputs) == 1  # answered with nothing asked
    messages, _, kept, answers, said, turns, _, _ = outputs[0]
    assert messages == [] and answers == [] and turns == []
    assert kept == paste  # the box keeps what was pasted: nothing is lost
    assert "Upload the log as a file instead" in said and f"{len(paste):,}" in said
    small = _turn(chat, "RuntimeError: CUDA out of memory while training", None)
    assert small[1][-1]["answer"]["citations"]  # a message under the limit is answered as before


def test_long_pastes_are_answered_one_at_a_time_while_short_questions_never_wait(troubleshooter: Any,
                                                                                 tmp_path: Path) -> None:
    """Issue 40 point 4: long pastes are answered at most one at a time (traindoc_web.chat.LONG_TURNS), and a short
    question is not queued behind them. Counted here on a chat without its worker process (``worker=False``: long
    pastes answered on the server's threads, as for a troubleshooter with a scripted model); the worker, which
    answers one turn at a time by construction, is tests/web/test_web_worker.py."""
    import threading

    chat = WebChat(troubleshooter, WebOptions(feedback_db=tmp_path / "fb.sqlite3", history_days=0, worker=False))
    running, most, lock = [0], [0], threading.Lock()
    real_ask = troubleshooter.ask

    def counted(question: Any, **kw: Any) -> Any:  # the real ask, counted
        long = bool(question.log_head or question.log_errors or question.job)  # the paste, read as a log
        with lock:
            running[0] += long
            most[0] = max(most[0], running[0])
        try:
            return real_ask(question, **kw)
        finally:
            with lock:
                running[0] -= long

    troubleshooter.ask = counted
    try:
        paste = "\n".join(f"[rank{i % 4}]:step {i} loss 0.5" for i in range(4_000)) + "\n[rank2]: CUDA out of memory"
        threads = [threading.Thread(target=chat.api_ask, args=(paste,)) for _ in range(3)]
        for thread in threads:
            thread.start()
        short = chat.api_ask("CUDA out of memory with ZeRO-3")
        for thread in threads:
            thread.join(timeout=300)
    finally:
        del troubleshooter.ask
    assert most[0] == 1 and short["citations"]
