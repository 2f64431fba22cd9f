"""The web's 👍 with a note and Slack's :+1: with a note keep an incident, and the same failure asked again through the
same front end leads with it: real `traindoc web` (driven by Chromium) and `traindoc slack` (against the fake Slack
Web API) processes over a copy of the session's index."""

from __future__ import annotations

import json
import secrets
import time
from pathlib import Path
from typing import Any

import pytest
from clikit import ROOT
from fakes.slack_api import BOT_USER, FakeSlack, iter_blocks_text
from frontends import SIGNING_SECRET, form, free_port, post_to_slack_bot, server_env, start, stop

pytestmark = pytest.mark.slow
SOCKET_LOG = (ROOT / "tests" / "jobs" / "data" / "pastes" / "nccl_socket_creation.log").read_text(encoding="utf-8")
ELSEWHERE = SOCKET_LOG.replace("node7:5531", "node12:8812").replace("[3]", "[5]").replace("10.2.0.7", "10.2.0.12")
XOXB = "xoxb-" + "2222222222-3333333333-ZyXwVuTsRqPoNmLkJiHgFeDc"


def kept(base: Path) -> list[dict[str, Any]]:
    path = base / "incidents.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()] if path.exists() else []


def wait_until(check: Any, what: str, timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    while (found := check()) in (None, [], False):
        assert time.monotonic() < deadline, f"waited {timeout:.0f} s for {what}"
        time.sleep(0.3)
    return found


def test_the_web_thumbs_up_with_a_note_is_recognised_next_time(shared_index: Path, tmp_path: Path, browser: Any) -> None:
    port = free_port()
    process = start(["web", "--port", str(port)], server_env(tmp_path, shared_index, {"TRAINDOC_PROBE_TIMEOUT": "5"}),
                    tmp_path / "web.log", port)
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    try:
        page = context.new_page()
        page.set_default_timeout(90_000)
        page.goto(f"http://127.0.0.1:{port}/")
        page.wait_for_selector("#question textarea:enabled")
        assert not page.locator("#fixed-row").is_visible()  # no note field before a 👍
        ask(page, SOCKET_LOG, answers=1)
        page.locator("#chat button[aria-label='Like']").first.click()
        page.wait_for_selector("#fixed-note textarea")
        page.fill("#fixed-note textarea", f"set NCCL_SOCKET_FAMILY=AF_INET on node7, token {XOXB}")
        page.click("#save-note")
        page.wait_for_function("() => document.querySelector('#status').innerText.includes('kept with the incident')")
        incident = wait_until(lambda: [i for i in kept(tmp_path) if i["note"]], "the note")[0]
        assert incident["channel"] == "web" and incident["hosts"] == ["node7"] and XOXB not in json.dumps(incident)
        assert incident["note"] == "set NCCL_SOCKET_FAMILY=AF_INET on node7, token ***"

        ask(page, ELSEWHERE, answers=2)
        answer = page.locator("#chat .bot-row").last.locator(".message").first.inner_text()
        first = answer.strip().splitlines()[0]
        assert first.startswith("Seen before:") and incident["date"] in first and "node7" in first, answer[:400]
        assert "set NCCL_SOCKET_FAMILY=AF_INET on node7" in first and "node12" in answer
    finally:
        context.close()
        stop(process)


def ask(page: Any, text: str, answers: int) -> None:
    """Paste ``text`` and wait for the sources panel's group of answer number ``answers``."""
    page.fill("#question textarea", text)
    page.click("#ask")
    page.wait_for_function(f"() => document.querySelectorAll('#sources .traindoc-turn').length >= {answers}")
    page.wait_for_function("() => !document.querySelector('#chat .pending, #chat .generating')")


def mention(text: str, user: str) -> tuple[str, bytes]:
    ts = f"1800000000.{secrets.randbelow(10**6):06d}"
    event = {"type": "app_mention", "user": user, "text": f"<@{BOT_USER}> {text}", "ts": ts, "channel": "C1", "event_ts": ts}
    callback = {"token": "t", "team_id": "T1", "api_app_id": "A1", "type": "event_callback", "event": event,
                "event_id": "Ev" + secrets.token_hex(6).upper(), "event_time": int(time.time()),
                "authorizations": [{"team_id": "T1", "user_id": BOT_USER, "is_bot": True, "is_enterprise_install": False}]}
    return ts, json.dumps(callback).encode()


def action(user: str, thread_ts: str, act: dict[str, Any]) -> bytes:
    payload = {"type": "block_actions", "token": "t", "api_app_id": "A1", "trigger_id": "1.2.3",
               "user": {"id": user, "team_id": "T1"}, "team": {"id": "T1", "domain": "fake"},
               "container": {"type": "message", "message_ts": thread_ts, "channel_id": "C1", "is_ephemeral": False},
               "channel": {"id": "C1", "name": "ml"}, "response_url": "http://127.0.0.1:9/unused",
               "message": {"type": "message", "user": BOT_USER, "ts": thread_ts, "thread_ts": thread_ts},
               "actions": [{**act, "action_ts": str(time.time())}]}
    return form({"payload": json.dumps(payload)})


def blocks_of(params: dict[str, Any]) -> list[dict[str, Any]]:
    blocks = params.get("blocks") or []
    return json.loads(blocks) if isinstance(blocks, str) else blocks


def test_slacks_thumbs_up_and_its_note_are_recognised_next_time(shared_index: Path, tmp_path: Path) -> None:
    with FakeSlack() as slack:
        port = free_port()
        env = server_env(tmp_path, shared_index, {"SLACK_BOT_TOKEN": "xoxb-1111-2222-fakebottoken",
                                                  "SLACK_SIGNING_SECRET": SIGNING_SECRET, "SLACK_API_URL": slack.api_url})
        process = start(["slack", "--port", str(port)], env, tmp_path / "slack.log", port)
        url = f"http://127.0.0.1:{port}/slack/events"
        try:
            ts, body = mention(SOCKET_LOG, "UASKER1")
            assert post_to_slack_bot(url, body, "application/json") == 200
            answer = slack.wait_for("chat.postMessage", timeout=120, channel="C1", thread_ts=ts)[0].params
            up = next(e["value"] for b in blocks_of(answer) if b["type"] == "actions" for e in b["elements"]
                      if e["action_id"] == "traindoc_feedback_up")
            click = {"type": "button", "action_id": "traindoc_feedback_up", "block_id": "b1", "value": up}
            assert post_to_slack_bot(url, action("UFIXER1", ts, click), "application/x-www-form-urlencoded") == 200
            thanks = slack.wait_for("chat.postEphemeral", user="UFIXER1")[0].params
            field = next(b for b in blocks_of(thanks) if b["type"] == "input")
            assert field["element"]["action_id"] == "traindoc_fixed_note" and "fixed it" in thanks["text"]
            [incident] = wait_until(lambda: kept(tmp_path), "the incident")
            assert field["block_id"].endswith(incident["id"]) and incident["channel"] == "slack"

            note = {"type": "plain_text_input", "action_id": "traindoc_fixed_note", "block_id": field["block_id"],
                    "value": f"drained node7 and rebooted it; bot token {XOXB}"}
            assert post_to_slack_bot(url, action("UFIXER1", ts, note), "application/x-www-form-urlencoded") == 200
            saved = slack.wait_for("chat.postEphemeral", count=2, user="UFIXER1")[1].params
            assert saved["text"].startswith("Saved")
            assert kept(tmp_path)[0]["note"] == "drained node7 and rebooted it; bot token ***"

            ts, body = mention(ELSEWHERE, "UASKER2")
            assert post_to_slack_bot(url, body, "application/json") == 200
            again = slack.wait_for("chat.postMessage", timeout=120, channel="C1", thread_ts=ts)[0].params
            first = next(iter_blocks_text(blocks_of(again)))
            assert first.startswith("*Seen before:*") and incident["date"] in first and "node7" in first, first[:300]
            assert "drained node7 and rebooted it" in first and XOXB not in slack.all_bodies()
        finally:
            stop(process)
