"""Nothing is lost in Slack (issue 40, point 3): a rate-limited post waits Slack's Retry-After and is posted, a
bounded number of times; an attachment that was not read is said with the answer; a bare mention is asked for a
question instead of getting a runbook. The real `traindoc slack` against the fake Slack Web API."""

from __future__ import annotations

import pytest
from slack_kit import Bot, blocks_text, event_callback, mention, new_user

pytestmark = pytest.mark.slow
BOT_ENV = {"TRAINDOC_SLACK_MAX_FILE_MB": "1"}


def _mention(bot: Bot, text: str, **extra: object) -> str:
    event = mention(text, user=new_user(), **extra)
    assert bot.event(event_callback(event)).status == 200
    return str(event["ts"])


def test_a_rate_limited_answer_is_posted_after_waiting_retry_after(bot: Bot) -> None:
    bot.fake.rate_limit("chat.postMessage", times=2, retry_after=1)
    ts = _mention(bot, "why is NCCL hanging?")
    posts = bot.fake.wait_for("chat.postMessage", count=3, timeout=120, thread_ts=ts)
    assert len(posts) == 3, "two refused with 429, the third taken"
    assert "*Sources*" in blocks_text(posts[-1].params)
    assert "ratelimited" not in bot.stderr()


def test_a_rate_limit_that_does_not_end_is_given_up_in_one_line_that_points_the_right_way(bot: Bot) -> None:
    bot.fake.rate_limit("chat.postMessage", times=50, retry_after=1)
    try:
        ts = _mention(bot, "why does CUDA run out of memory?")
        bot.fake.wait_for("chat.postMessage", count=4, timeout=120, thread_ts=ts)  # the first try and 3 more
        bot.fake.wait_for("reactions.add", timeout=60, timestamp=ts, name="x")
    finally:
        bot.fake.rate_limit("chat.postMessage", times=0)
    assert len(bot.fake.calls("chat.postMessage")) >= 4
    line = next(line for line in bot.stderr().splitlines() if "ratelimited" in line)
    assert "lower TRAINDOC_SLACK_RATE" in line and "raise" not in line


def test_an_attachment_that_could_not_be_downloaded_is_said_with_the_answer(bot: Bot) -> None:
    files = [{"id": "F9", "name": "rank3.log", "size": 100, "url_private_download": f"{bot.fake.url}/files/missing"}]
    ts = _mention(bot, "why did rank 3 run out of CUDA memory?", files=files)
    answer = bot.fake.wait_for("chat.postMessage", timeout=120, thread_ts=ts)[0].params
    shown = blocks_text(answer)
    assert "rank3.log could not be downloaded" in shown and "*Sources*" in shown  # said, and the question answered


def test_an_attachment_over_the_limit_is_said_with_the_answer(bot: Bot) -> None:
    url = bot.fake.add_file("big.log", "x")
    files = [{"id": "F8", "name": "big.log", "size": 3 * 1024 * 1024, "url_private_download": url}]
    ts = _mention(bot, "why is NCCL hanging? log attached", files=files)
    shown = blocks_text(bot.fake.wait_for("chat.postMessage", timeout=120, thread_ts=ts)[0].params)
    assert "big.log was not read" in shown and "1 MB limit" in shown


@pytest.mark.parametrize("text", ["", "???", "🤔"])
def test_a_bare_mention_is_asked_for_a_question_not_given_a_runbook(bot: Bot, text: str) -> None:
    ts = _mention(bot, text)
    said = bot.fake.wait_for("chat.postMessage", timeout=120, thread_ts=ts)[0].params
    assert "ask a question or paste the error" in said["text"] and "*Sources*" not in blocks_text(said)
