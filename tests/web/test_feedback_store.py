"""FeedbackStore and as_eval_case without a server: thumbs up and down, the export format, bad input, and
the web handler that finds the liked answer from what Gradio sends."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from agent.answer import Answer, Citation
from agent.feedback import FeedbackStore, as_eval_case
from common.errors import ConfigError


def _answer(question: str = "torchrun says Address already in use", *, no_match: bool = False) -> Answer:
    citations = [] if no_match else [
        Citation(1, "corpus/002_8a84ca4f82c44780.txt", "DeepSpeed卡住问题解决方案 > 常见错误及解决方案 > 错误2: 端口被占用", "c1", 0.7),
        Citation(2, "corpus/002_8a84ca4f82c44780.txt", "DeepSpeed卡住问题解决方案 > 故障排除步骤 > 2. 检查端口占用", "c2", 0.5),
    ]
    return Answer(question=question, answer="Likely cause [1]", citations=citations, findings=[], no_match=no_match)


def test_thumbs_up_and_down_become_eval_cases(tmp_path: Path) -> None:
    store = FeedbackStore(tmp_path / "sub" / "fb.sqlite3")
    good = store.record(_answer(), 1, "web")
    bad = store.record(_answer("why is my loss NaN"), -1, "slack")
    assert (good, bad) == (1, 2)
    rows = list(store.rows())
    assert [r["rating"] for r in rows] == [1, -1]
    assert json.loads(rows[0]["citations"])[0]["section"].endswith("错误2: 端口被占用")  # stored unescaped

    up, down = (as_eval_case(r) for r in rows)
    assert up == {"id": "fb0001", "query": "torchrun says Address already in use",
                  "gold": [{"file": "002_8a84ca4f82c44780.txt", "heading": "错误2: 端口被占用"}],
                  "rating": "good", "channel": "web", "notes": ""}
    assert down["id"] == "fb0002" and down["query"] == "why is my loss NaN"
    assert down["gold"] == [] and down["rating"] == "bad" and down["channel"] == "slack"
    assert down["notes"].startswith("marked bad; cited: ") and "错误2: 端口被占用" in down["notes"]
    assert json.loads(json.dumps(down, ensure_ascii=False)) == down


def test_no_match_answer_and_reopening(tmp_path: Path) -> None:
    path = tmp_path / "fb.sqlite3"
    FeedbackStore(path).record(_answer(no_match=True), 1, "web")
    rows = list(FeedbackStore(path).rows())  # a second store on the same file sees the row
    assert len(rows) == 1 and rows[0]["no_match"] == 1
    assert as_eval_case(rows[0])["gold"] == []


def test_bad_rating_and_unwritable_path(tmp_path: Path) -> None:
    store = FeedbackStore(tmp_path / "fb.sqlite3")
    with pytest.raises(ValueError):
        store.record(_answer(), 0, "web")
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(ConfigError, match="TRAINDOC_FEEDBACK_DB"):
        FeedbackStore(blocker / "fb.sqlite3")


def test_web_rate_finds_the_liked_answer(tmp_path: Path) -> None:
    from traindoc_web.chat import WebChat, WebOptions

    chat = WebChat(SimpleNamespace(settings=None), WebOptions(feedback_db=tmp_path / "fb.sqlite3"))  # type: ignore[arg-type]
    first, second = _answer(), _answer("why is my loss NaN")
    second.answer = "Loss NaN [1]"
    answers = [{"index": 5, "answer": first.to_json()}, {"index": 9, "answer": second.to_json()}]
    # a grouped message: tool step contents, then the answer
    assert chat.rate(answers, True, ["ok: port 29500 free", first.answer]) == "Thanks: feedback saved."
    assert chat.rate(answers, False, [{"value": second.answer}]) == "Thanks: feedback saved."
    assert chat.rate(answers, True, ["just a tool step"]) == "That message is not an answer."
    cases = [as_eval_case(r) for r in chat.feedback.rows()]
    assert [(c["query"], c["rating"]) for c in cases] == [(first.question, "good"), (second.question, "bad")]


def test_content_text_reads_gradio_message_parts() -> None:
    from traindoc_web.markup import content_text

    assert content_text("plain") == "plain"
    assert content_text([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]) == "a\nb"
    assert content_text({"value": "v"}) == "v"
    assert content_text(None) == ""
