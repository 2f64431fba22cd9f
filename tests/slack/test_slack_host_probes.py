"""TRAINDOC_SLACK_PROBES=host: the bot's own machine is probed and a "Run the probes" button is offered."""

from __future__ import annotations

import json

import pytest
from slack_kit import Bot, action_payload, blocks_text, buttons, event_callback, mention, new_user

pytestmark = pytest.mark.slow
BOT_ENV = {"TRAINDOC_SLACK_PROBES": "host"}


def test_run_the_probes_button_posts_the_host_report_in_the_thread(bot: Bot) -> None:
    event = mention("why is NCCL hanging?", user=new_user())
    assert bot.event(event_callback(event)).status == 200
    answer = bot.answer_to(event["ts"], timeout=90)
    assert "traindoc_run_probes" in buttons(answer)
    payload = action_payload("traindoc_run_probes", buttons(answer)["traindoc_run_probes"], event["ts"])
    assert bot.form({"payload": json.dumps(payload)}).status == 200
    report = bot.fake.wait_for("chat.postMessage", 2, timeout=90, thread_ts=event["ts"])[1].params
    text = blocks_text(report)
    assert "Probe report (bot host)" in text
    assert "`port_check`" in text or "`env_vars`" in text, text
