"""Text from users is inert in Slack, through the real bot: a log line, a question or a bundle string never
becomes a link (an e-mail address, a bare URL: every mrkdwn text is verbatim), a mention, a channel-wide ping or a
live image; a right-to-left override shows as <U+202E>, emoji stay whole; secrets never reach the workspace."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from slack_kit import Bot, blocks_text, event_callback, mention, new_ts, new_user

from agent.answer import Answer, FindingView
from agent.summary import verdict_of
from common.secrets import SHAPES
from traindoc_slack.blocks import answer_blocks

pytestmark = pytest.mark.slow
BOT_ENV = {"TRAINDOC_SLACK_CHANNELS": "C1", "TRAINDOC_SLACK_RATE": "30", "TRAINDOC_MAX_BUNDLE_MB": "0.01"}
HOSTILE = ("RuntimeError: NCCL error ` <!channel> <!here> @here @channel <@U0ATTACKER> <http://attacker.example/x|click me> "
           "[t](http://attacker.example/t) ![x](http://attacker.example/p.png) & <b>bold</b> ``` ```")


def _ask(bot: Bot, text: str, **extra: object) -> dict:
    event = mention(text, user=new_user(), channel="C1", **extra)
    assert bot.event(event_callback(event)).status == 200
    return bot.answer_to(event["ts"], channel="C1")


def _everything(answer: dict) -> str:
    return str(answer.get("text", "")) + "\n" + blocks_text(answer)


def test_a_hostile_log_line_is_shown_as_text(bot: Bot) -> None:
    name = f"train-{new_ts()}.log"
    log = "step 1 loss 2.3\n" + HOSTILE + "\n"
    url = bot.fake.add_file(name, log)
    answer = _ask(bot, "why did it crash?", files=[{"id": "F9", "name": "train.log", "size": len(log), "url_private_download": url}])
    shown = _everything(answer)
    assert "NCCL error" in shown
    for active in ("<!channel>", "<!here>", "<@U0ATTACKER>", "<http://attacker.example", "@here ", "@channel "):
        assert active not in shown, active
    assert "&lt;!channel&gt;" in shown  # shown, escaped as Slack requires
    assert "|attacker" not in shown.replace("&lt;", "<").split("<http")[0]  # no <url|label> link form at all
    call = next(c for c in bot.fake.calls("chat.postMessage") if c.params.get("blocks"))
    assert call.params.get("unfurl_links") in (False, "false", "0", 0) and call.params.get("unfurl_media") in (False, "false", "0", 0)


def test_a_question_is_inert_and_secrets_never_reach_slack(bot: Bot) -> None:
    planted = " ".join(shape.example.replace("\n", " ") for shape in SHAPES[1:6])
    answer = _ask(bot, f"NCCL timeout <!channel> <http://attacker.example|x> {planted}")
    shown = _everything(answer)
    assert "<!channel>" not in shown and "<http://attacker" not in shown
    for shape in SHAPES[1:6]:
        assert shape.planted not in json.dumps(answer)


def test_a_bundle_above_the_cap_is_refused_in_one_line(bot: Bot) -> None:
    """Slack takes attachments up to TRAINDOC_SLACK_MAX_FILE_MB; a bundle is still read only up to its own cap."""
    data = json.dumps({"traindoc_bundle": 1, "host": "n", "results": [], "padding": "x" * 20_000})
    url = bot.fake.add_file(f"node-{new_ts()}.json", data)
    answer = _ask(bot, "NCCL hangs", files=[{"id": "F8", "name": "node.json", "size": len(data), "url_private_download": url}])
    assert answer["text"].startswith(":warning:") and "\n" not in answer["text"]
    assert "bundle cap (TRAINDOC_MAX_BUNDLE_MB)" in answer["text"] and "blocks" not in answer


SPOOF = "invoice_\u202egpj.exe"  # reads "invoice_exe.jpg"
EMOJI = "👩\u200d💻"


def _text_objects(blocks: Any) -> list[dict]:
    """Every text object in a posted Block Kit list."""
    blocks = json.loads(blocks) if isinstance(blocks, str) else blocks or []
    found = []
    for block in blocks:
        for holder in [block, *block.get("elements", [])]:
            if isinstance(holder.get("text"), dict):
                found.append(holder["text"])
            elif holder.get("type") in ("mrkdwn", "plain_text"):  # a context element is a text object itself
                found.append(holder)
    return found


def test_a_log_line_shows_its_override_and_links_nowhere(bot: Bot) -> None:
    log = (f"step 1 loss 2.3\nRuntimeError: NCCL error in {SPOOF} \u200bzw mail ops@attacker.example see "
           f"http://attacker.example/help www.attacker.example {EMOJI}\n")
    url = bot.fake.add_file(f"spoof-{new_ts()}.log", log)
    answer = _ask(bot, f"why did {SPOOF} crash? mail ops@attacker.example",
                  files=[{"id": "F7", "name": "spoof.log", "size": len(log), "url_private_download": url}])
    shown = _everything(answer)
    assert "\u202e" not in shown and "\u200b" not in shown.replace("@\u200b", "@")  # "@\u200bhere" is how @here is broken
    assert "invoice_&lt;U+202E&gt;gpj.exe" in shown and "&lt;U+200B&gt;zw" in shown
    assert EMOJI in shown and "ops@attacker.example" in shown
    links = re.findall(r"<([^<>]*)>", shown)
    assert not [link for link in links if "attacker" in link or link.startswith("mailto:")], links
    mrkdwn = [t for t in _text_objects(answer.get("blocks")) if t.get("type") == "mrkdwn"]
    assert mrkdwn and all(t.get("verbatim") is True for t in mrkdwn)  # Slack links no bare URL or e-mail in them


def test_the_notification_text_shows_the_override_too() -> None:
    """A probe's finding is the verdict, and the notification line says it: escaped there as in the blocks."""
    finding = FindingView("driver", "problem", "DRIVER_TOO_OLD", f"driver of {SPOOF} too old {EMOJI}", "evidence",
                          fix="update the driver", explains=True)
    answer = Answer(question=f"why {SPOOF}", answer=f"Loading {SPOOF} failed {EMOJI} (mail ops@attacker.example)",
                    citations=[], findings=[finding], no_match=False, notice=f"note {SPOOF}")
    answer.verdict = verdict_of(answer)  # as ask() sets it on every answer
    text, blocks = answer_blocks(answer, "a1", probes_button=False)
    assert text.startswith(f"driver of invoice_&lt;U+202E&gt;gpj.exe too old {EMOJI}"), text
    mrkdwn = [t for t in _text_objects(blocks) if t["type"] == "mrkdwn"]
    assert sum(t["text"].count("&lt;U+202E&gt;") for t in mrkdwn) >= 3  # the note, the answer, the finding
    assert all("\u202e" not in t["text"] and t.get("verbatim") is True for t in mrkdwn)
