"""A job's logs attached in Slack: the real `traindoc slack` answers in the thread, then uploads the job's timeline
picture there (files.getUploadURLExternal, the bytes, files.completeUploadExternal, as slack_sdk's files_upload_v2
does against the fake Slack API); a question without logs uploads nothing."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import picturekit
import pytest
from slack_kit import Bot, event_callback, mention, new_ts, new_user

pytestmark = pytest.mark.slow
BOT_ENV = {"TRAINDOC_SLACK_CHANNELS": "C1", "TRAINDOC_SLACK_RATE": "30"}
SVG = "{http://www.w3.org/2000/svg}"


def test_attached_rank_logs_get_the_timeline_picture_in_the_thread(bot: Bot, tmp_path) -> None:
    folder = picturekit.write_job(tmp_path / "job")
    files = []
    for path in sorted(folder.iterdir()):
        name = f"{new_ts()}-{path.name}"
        files.append({"id": f"F{len(files)}", "name": path.name, "size": path.stat().st_size,
                      "url_private_download": bot.fake.add_file(name, path.read_bytes())})
    event = mention("why did the job die?", user=new_user(), channel="C1", files=files)
    assert bot.event(event_callback(event)).status == 200
    bot.answer_to(event["ts"])
    (completed,) = bot.fake.wait_for("files.completeUploadExternal", timeout=120)
    assert completed.params.get("channel_id") == "C1" and completed.params.get("thread_ts") == event["ts"]
    uploaded = json.loads(completed.params["files"]) if isinstance(completed.params["files"], str) else completed.params["files"]
    (upload,) = [c for c in bot.fake.calls() if c.method == f"upload:{uploaded[0]['id']}"]
    root = ET.fromstring(upload.body)
    lanes = [g for g in root.iter(f"{SVG}g") if "lane" in g.get("class", "").split() and g.get("data-rank")]
    assert [g.get("data-node") for g in lanes] == ["node-a"] * 8 + ["node-b"] * 8
    first = [e for e in root.iter() if {"mark", "first-failure"} <= set(e.get("class", "").split())]
    assert [e.get("data-rank") for e in first] == ["11"]
    (asked,) = [c for c in bot.fake.calls("files.getUploadURLExternal") if c.params.get("filename") == "job-timeline.svg"]
    assert int(asked.params["length"]) == len(upload.body.encode("utf-8"))
    assert upload.authorization == ""  # the upload URL carries its own authority; the bot token never goes there


def test_a_question_without_logs_uploads_no_picture(bot: Bot) -> None:
    before = len(bot.fake.calls("files.getUploadURLExternal"))
    event = mention("why is NCCL hanging?", user=new_user(), channel="C1")
    assert bot.event(event_callback(event)).status == 200
    bot.answer_to(event["ts"])
    assert len(bot.fake.calls("files.getUploadURLExternal")) == before
