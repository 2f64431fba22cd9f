"""Every secret shape, in every spelling, on every surface: a secret written with full-width forms, a
non-breaking space or a tab, percent-escaped in a URL, or with an ANSI code, a zero-width space or a soft hyphen
inside it, is still masked in the ``--format markdown`` answer, the web chat's history, the feedback export, a
Slack post (the real slack_sdk client against the fake Slack Web API), a bundle, and a model's request (the real
client against the fake OpenAI-compatible server).

What a reader would see is checked, not the bytes: the output is read back the way a screen shows it (compatibility
forms folded, invisible characters and ANSI codes gone, percent-escapes decoded) and the planted secret must not be
in it. Each surface also shows the line the secret was planted in (its ``(shape N)`` marker), so a surface that
dropped the line cannot pass by it."""

from __future__ import annotations

import io
import json
import re
import unicodedata
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from urllib.parse import unquote

import pytest
from fakes.openai_server import FakeOpenAI, echo
from fakes.slack_api import FakeSlack
from rich.console import Console

from agent.answer import Answer, Citation, FindingView
from agent.feedback import FeedbackStore, as_eval_case
from common.secrets import SHAPES, Shape
from tools.report import bundle, load_bundle
from traindoc_web.history import HistoryStore

ZERO_WIDTH, SOFT_HYPHEN, NBSP = "\u200b", "\u00ad", "\u00a0"


def _inside(secret: str, mark: str, every: int = 5) -> str:
    """``mark`` after every ``every`` characters of the secret (never before its first or after its last)."""
    return mark.join(secret[i : i + every] for i in range(0, len(secret), every))


def _full_width(text: str) -> str:
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else "\u3000" if c == " " else c for c in text)


def _percent(text: str) -> str:
    return "".join(c if c.isascii() and c.isalnum() else "".join(f"%{b:02X}" for b in c.encode()) for c in text)


# (name, how the example is written): each a way a secret is written that a person reads as the same secret
SPELLINGS: dict[str, Callable[[Shape], str]] = {
    "as written": lambda s: s.example,
    "full-width =": lambda s: s.example.replace("=", "\uff1d").replace(":", "\uff1a"),
    "full-width forms": lambda s: _full_width(s.example),
    "non-breaking spaces": lambda s: s.example.replace(" ", NBSP),
    "tabs": lambda s: s.example.replace(" ", "\t"),
    "percent-escaped in a URL": lambda s: "GET https://example.com/cb?next=" + _percent(s.example),
    "ANSI code inside": lambda s: s.example.replace(s.planted, _inside(s.planted, "\x1b[1m", 7) + "\x1b[0m"),
    "zero-width spaces inside": lambda s: s.example.replace(s.planted, _inside(s.planted, ZERO_WIDTH)),
    "soft hyphens inside": lambda s: s.example.replace(s.planted, _inside(s.planted, SOFT_HYPHEN, 6)),
}
ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]")
SHOWN_INVISIBLE = re.compile(r"<U\+([0-9A-F]{4,6})>")


def as_read(text: str) -> str:
    """What a person reads in ``text``: written independently of ``common.spellings``."""
    text = ANSI.sub("", text)
    text = SHOWN_INVISIBLE.sub(lambda m: "" if unicodedata.category(chr(int(m.group(1), 16))) in ("Cf", "Cc") else m.group(0), text)
    text = unicodedata.normalize("NFKC", text)
    text = "".join(c for c in text if c in "\n\t" or unicodedata.category(c) not in ("Cf", "Cc"))
    return unquote(text).replace("\\_", "_").replace("\\", "")


def line(index: int, spelled: str) -> str:
    return f"RuntimeError: NCCL watchdog timeout (shape {index}); {spelled}"


def _answer(text: str) -> Answer:
    return Answer(question=text, answer=f"### Likely cause\n{text}\n\n```\n{text}\n```", no_match=False,
                  citations=[Citation(1, "corpus/x.md", f"NCCL > {text}", "c1", 1.0, text=text)],
                  findings=[FindingView("env_vars", "problem", "NCCL_IFNAME_MISSING", text, text, fix=text)],
                  notice=text)


def _leaks(outputs: dict[int, str]) -> list[str]:
    """The shapes whose line did not reach the surface, or whose secret a reader can see there."""
    found = []
    for index, shown in outputs.items():
        read = as_read(shown)
        if f"(shape {index})" not in read:
            found.append(f"{SHAPES[index].kind}-{index}: its line is not there")
        elif SHAPES[index].planted in read:
            found.append(f"{SHAPES[index].kind}-{index}: shown")
    return found


CASES = [pytest.param(name, id=name) for name in SPELLINGS]


def _planted(spelling: str) -> dict[int, str]:
    return {i: line(i, SPELLINGS[spelling](shape)) for i, shape in enumerate(SHAPES)}


@pytest.mark.parametrize("spelling", CASES)
def test_the_markdown_answer_to_paste_never_shows_a_secret(spelling: str) -> None:
    """`ask --format markdown` is text to paste into an issue: masked like everything that leaves the machine."""
    from traindoc_cli.render import print_answer

    outputs = {}
    for index, text in _planted(spelling).items():
        out = io.StringIO()
        print_answer(_answer(text), Console(file=out, width=100), "markdown", full=True)
        outputs[index] = out.getvalue()
    assert _leaks(outputs) == []


@pytest.mark.parametrize("spelling", CASES)
def test_the_web_history_never_keeps_a_secret(spelling: str, tmp_path: Path) -> None:
    store = HistoryStore(tmp_path / "web-history.sqlite3", days=30)
    outputs = {}
    for index, text in _planted(spelling).items():
        state = {"turns": [{"question": text, "answer": text, "sources": [text], "log_head": [text], "log_errors": [text]}]}
        store.save("browser:b1", f"c{index}", text, state)
        saved = store.load("browser:b1", f"c{index}")
        assert saved is not None
        outputs[index] = json.dumps(saved.state, ensure_ascii=False) + saved.title
    rows = json.dumps(store.rows(), ensure_ascii=False)
    assert _leaks(outputs) == [] and not [s.kind for s in SHAPES if s.planted in as_read(rows)]


@pytest.mark.parametrize("spelling", CASES)
def test_the_feedback_store_and_its_export_never_keep_a_secret(spelling: str, tmp_path: Path) -> None:
    store = FeedbackStore(tmp_path / "feedback.sqlite3")
    planted = _planted(spelling)
    ids = {store.record(_answer(text), 1 if index % 2 else -1, "web"): index for index, text in planted.items()}
    outputs = {ids[row["id"]]: json.dumps(row, ensure_ascii=False) + json.dumps(as_eval_case(row), ensure_ascii=False)
               for row in store.rows()}
    assert sorted(outputs) == sorted(planted) and _leaks(outputs) == []


@pytest.mark.parametrize("spelling", CASES)
def test_a_bundle_never_carries_a_secret(spelling: str, tmp_path: Path) -> None:
    """Written by `traindoc probe --json` (tools.report.bundle) and read back from a hand-edited file."""
    from tools.base import ProbeResult

    outputs = {}
    for index, text in _planted(spelling).items():
        result = ProbeResult.from_dict({"probe": "env_vars", "status": "ok", "summary": text, "findings": [],
                                        "evidence": {"variables": {"NCCL_DEBUG": text}, "interfaces": ["eth0"]}})
        written = json.dumps(bundle([result]), ensure_ascii=False)
        path = tmp_path / f"node{index}.json"
        raw = {"traindoc_bundle": 1, "host": "n1", "results": [result.to_dict()]}
        path.write_text(json.dumps(raw, ensure_ascii=False), encoding="utf-8")
        read = json.dumps([r.to_dict() for r in load_bundle(path)], ensure_ascii=False)
        outputs[index] = written + "\n" + read
    assert _leaks(outputs) == []


@pytest.mark.parametrize("spelling", CASES)
def test_a_slack_post_never_carries_a_secret(spelling: str, tmp_path: Path) -> None:
    """The bot's own post_answer through slack_sdk's WebClient to the fake Slack Web API: the message, its
    blocks and the metadata a later turn reads."""
    from slack_sdk import WebClient

    from traindoc_slack.bot import SlackBridge
    from traindoc_slack.options import SlackOptions

    settings = SimpleNamespace(data_dir=tmp_path, cache_dir=tmp_path / "cache")
    options = SlackOptions(bot_token="xoxb-test", app_token=None, signing_secret="s")  # type: ignore[call-arg]
    bridge = SlackBridge(SimpleNamespace(settings=settings), options)  # type: ignore[arg-type]
    outputs = {}
    with FakeSlack() as slack:
        client = WebClient(token="xoxb-test", base_url=slack.api_url)
        for index, text in _planted(spelling).items():
            assert bridge.post_answer(client, _answer(text), channel="C1", thread_ts=None)
            (call,) = slack.calls("chat.postMessage")[index:]
            outputs[index] = json.dumps(call.params, ensure_ascii=False)
    assert _leaks(outputs) == []


@pytest.mark.parametrize("spelling", CASES)
def test_a_model_request_never_carries_a_secret(spelling: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A question with every shape, and a conversation's earlier turns with them too, asked of a model (agent
    mode, the real OpenAI client): every request body the fake server received is read for the secrets."""
    from agent.core import Question
    from agent.llm.answerer import answer_with_model
    from common.settings import Settings

    monkeypatch.setenv("TRAINDOC_LLM_CAPABILITIES", str(tmp_path / "caps.json"))
    planted = _planted(spelling)
    groups = [dict(list(planted.items())[i : i + 40]) for i in range(0, len(planted), 40)]
    outputs: dict[int, str] = {}
    for group in groups:
        lines = list(group.values())
        history = [{"role": "user", "content": "\n".join(lines[::2])}, {"role": "assistant", "content": "\n".join(lines[1::2])}]
        question = Question(text="NCCL watchdog timeout. My setup:\n" + "\n".join(lines), probes=False, history=history)
        with FakeOpenAI([echo("Masked: {placeholders}")]) as server:
            settings = replace(Settings.from_env(), backend="openai", llm_model="fake-model", llm_base_url=server.url,
                               llm_timeout_s=20.0, llm_mode="agent")
            answer_with_model(settings, question, None, None, [], lambda event: None)
            received = server.all_text_received()
        outputs.update({index: received for index in group})
    assert _leaks(outputs) == []
