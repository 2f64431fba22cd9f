"""The Slack bridge's small parts, without a process: rate limit, error lines, Block Kit limits, the manifest."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from clikit import ROOT
from slack_kit import fake_token
from slack_sdk.errors import SlackApiError
from slack_sdk.web import SlackResponse

from agent.answer import Answer, Citation, FindingView
from common.errors import ConfigError
from traindoc_slack.blocks import answer_blocks, notification_line
from traindoc_slack.options import RateLimiter, SlackOptions, slack_error_line

SLACK_SECTION_LIMIT = 3000  # Block Kit: section text
SLACK_MAX_BLOCKS = 50  # Block Kit: blocks per message


# -- RateLimiter ------------------------------------------------------------------------------------------------

def test_rate_limiter_counts_per_user_over_a_sliding_minute() -> None:
    limiter = RateLimiter(per_minute=2)
    assert limiter.allow("U1", now=0) and limiter.allow("U1", now=10)
    assert not limiter.allow("U1", now=20), "a third question within the minute"
    assert limiter.allow("U2", now=20), "another user has a budget of their own"
    assert not limiter.allow("U1", now=60), "the first question is still inside the window"
    assert limiter.allow("U1", now=60.5), "a minute after the first question, one more is allowed"
    assert not limiter.allow("U1", now=61)


def test_refused_questions_do_not_use_up_the_budget() -> None:
    limiter = RateLimiter(per_minute=1)
    assert limiter.allow("U1", now=0)
    for t in range(1, 60, 5):
        assert not limiter.allow("U1", now=t)
    assert limiter.allow("U1", now=61)


# -- slack_error_line ---------------------------------------------------------------------------------------------

def api_error(error: str, **extra: object) -> SlackApiError:
    data = {"ok": False, "error": error, **extra}
    response = SlackResponse(client=None, http_verb="POST", api_url="https://slack.com/api/chat.postMessage",
                             req_args={}, data=data, headers={}, status_code=200)
    return SlackApiError(f"The request to the Slack API failed. (url: x)\nThe server responded with: {data}", response)


@pytest.mark.parametrize(("error", "extra", "expected"), [
    ("invalid_auth", {}, "SLACK_BOT_TOKEN"),
    ("not_authed", {}, "SLACK_BOT_TOKEN"),
    ("account_inactive", {}, "reinstall"),
    ("not_in_channel", {}, "invite the bot"),
    ("channel_not_found", {}, "TRAINDOC_SLACK_CHANNELS"),
    ("missing_scope", {"needed": "reactions:write", "provided": "chat:write"}, "reactions:write"),
    ("missing_scope", {}, "deploy/slack-manifest.yaml"),
    ("ratelimited", {}, "TRAINDOC_SLACK_RATE"),
])
def test_slack_error_line_names_the_fix(error: str, extra: dict, expected: str) -> None:
    line = slack_error_line(api_error(error, **extra), "chat.postMessage")
    assert "\n" not in line
    assert line.startswith("slack: chat.postMessage failed: ")
    assert error in line and expected in line


def test_slack_error_line_for_unknown_errors_and_foreign_exceptions() -> None:
    line = slack_error_line(api_error("fatal_error"), "reactions.add")
    assert "fatal_error" in line and "\n" not in line
    line = slack_error_line(ConnectionResetError("peer reset"), "auth.test")
    assert "ConnectionResetError" in line and "\n" not in line


# -- SlackOptions -------------------------------------------------------------------------------------------------

def test_options_from_env() -> None:
    options = SlackOptions.from_env({
        "SLACK_BOT_TOKEN": "xoxb-1", "SLACK_SIGNING_SECRET": "s", "TRAINDOC_SLACK_CHANNELS": " C1, C2 ,,",
        "TRAINDOC_SLACK_PROBES": "host", "TRAINDOC_SLACK_RATE": "3", "TRAINDOC_SLACK_MAX_FILE_MB": "5",
        "SLACK_API_URL": "http://127.0.0.1:9/api/"}, port=3001, host="0.0.0.0")
    assert options.channels == {"C1", "C2"} and options.host_probes and options.rate_per_minute == 3
    assert options.max_file_mb == 5 and options.api_url == "http://127.0.0.1:9/api/"
    assert (options.host, options.port, options.app_token) == ("0.0.0.0", 3001, None)
    defaults = SlackOptions.from_env({"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_APP_TOKEN": "xapp-1"}, port=3000, host="h")
    assert not defaults.host_probes and not defaults.channels


@pytest.mark.parametrize(("env", "names"), [
    ({}, "SLACK_BOT_TOKEN"),
    ({"SLACK_BOT_TOKEN": "xoxb-1"}, "SLACK_SIGNING_SECRET"),
])
def test_options_name_the_missing_setting(env: dict, names: str) -> None:
    with pytest.raises(ConfigError, match=names):
        SlackOptions.from_env(env, port=3000, host="127.0.0.1")


# -- answer_blocks ------------------------------------------------------------------------------------------------

def sample_answer(body: str, n_citations: int = 5, findings: int = 0) -> Answer:
    citations = [Citation(n=i, source=f"/corpus/00{i % 10}_abc.txt", section=f"Guide > NCCL > part {i}",
                          chunk_id=f"c{i}", score=0.5) for i in range(1, n_citations + 1)]
    views = [FindingView(probe="env_vars", status="problem", code=f"CODE_{i}", summary="bad " * 40, evidence="e",
                         fix="do " * 40) for i in range(findings)]
    return Answer(question="q", answer=body, citations=citations, findings=views, no_match=False)


def texts(blocks: list[dict]) -> list[str]:
    out = []
    for block in blocks:
        if isinstance(block.get("text"), dict):
            out.append(block["text"]["text"])
        out += [e["text"] if isinstance(e["text"], str) else e["text"]["text"] for e in block.get("elements", [])]
    return out


@pytest.mark.parametrize("body", [
    "### Fixes\n" + "\n".join(f"- step {i}: " + "x" * 90 for i in range(2000)),  # ~200k chars: > 50 sections
    "```\n" + "\n".join("NCCL WARN " + "y" * 120 for i in range(400)) + "\n```\n",  # one long code block
    "RuntimeError: " + "z" * 3500,  # a single line longer than a section
], ids=["many-lines", "code-block", "one-long-line"])
def test_answer_blocks_respect_slack_limits_and_keep_the_buttons(body: str) -> None:
    fallback, blocks = answer_blocks(sample_answer(body, n_citations=40, findings=30), "a1b2c3", probes_button=True)
    assert len(blocks) <= SLACK_MAX_BLOCKS
    for block in blocks:
        if block["type"] == "section":
            assert len(block["text"]["text"]) <= SLACK_SECTION_LIMIT
    assert len(fallback) <= 3000
    actions = [b for b in blocks if b["type"] == "actions"]
    assert actions and {e["action_id"] for e in actions[-1]["elements"]} == {
        "traindoc_feedback_up", "traindoc_feedback_down", "traindoc_run_probes"}
    assert any(t.startswith("*Sources*") for t in texts(blocks)), "sources survive a long answer"
    json.dumps(blocks)


def test_answer_blocks_code_fences_stay_balanced_across_sections() -> None:
    body = "```bash\n" + "\n".join(f"export NCCL_VAR_{i}=" + "1" * 80 for i in range(100)) + "\n```\n"
    _, blocks = answer_blocks(sample_answer(body), "id", probes_button=False)
    sections = [b["text"]["text"] for b in blocks if b["type"] == "section" and "NCCL_VAR" in b["text"]["text"]]
    assert len(sections) > 1
    for text in sections:
        assert text.count("```") % 2 == 0, text[:80]


def test_answer_blocks_mask_secrets_everywhere() -> None:
    hf, xoxb, sk = fake_token("hf_"), "xoxb-" + fake_token("", 30), fake_token("sk-proj-")
    answer = sample_answer(f"RuntimeError: auth failed for {hf}\nSlack said {xoxb}\nkey {sk}", findings=0)
    answer.citations[0] = Citation(n=1, source="/c/001_x.txt", section=f"token {hf}", chunk_id="c", score=1.0)
    answer.findings.append(FindingView(probe="env_vars", status="problem", code="HF_TOKEN_SET",
                                       summary=f"HF_TOKEN={hf}", evidence="", fix=f"unset {xoxb}"))
    answer.notice = f"model said {sk}"
    fallback, blocks = answer_blocks(answer, "id", probes_button=False)
    posted = fallback + json.dumps(blocks)
    for secret in (hf, xoxb, sk):
        assert secret not in posted
    assert re.search(r"\[[A-Z_]+_\d+\]", posted)


def test_answer_blocks_buttons_carry_the_answer_id_and_what_feedback_needs() -> None:
    from traindoc_slack.feedback import read_value

    answer = sample_answer("### Likely cause: NCCL timeout\n\nmore", n_citations=2)
    answer.question = "why does NCCL time out? HF_TOKEN=" + fake_token("hf_")
    _, blocks = answer_blocks(answer, "abc123", probes_button=False)
    actions = [e for b in blocks if b["type"] == "actions" for e in b["elements"]]
    assert [(e["action_id"], e["text"]["text"]) for e in actions] == [
        ("traindoc_feedback_up", ":+1:"), ("traindoc_feedback_down", ":-1:")]
    assert all(len(e["value"]) <= 2000 for e in actions)
    answer_id, carried = read_value(actions[0]["value"])
    assert answer_id == "abc123" and carried is not None
    assert carried.question.startswith("why does NCCL time out?") and "hf_" not in carried.question
    assert carried.answer == notification_line(answer) and "###" not in carried.answer and "**" not in carried.answer
    assert [(c.source, c.chunk_id) for c in carried.citations] == [("001_abc.txt", "c1"), ("002_abc.txt", "c2")]


def test_a_button_value_stays_within_slacks_limit_for_a_long_question() -> None:
    from traindoc_slack.feedback import read_value

    answer = sample_answer("x", n_citations=5)
    answer.question = "为什么 " * 3000
    answer.citations = [Citation(n=i, source=f"/c/{i}.txt", section="章节 > " * 200, chunk_id=f"c{i}", score=0.5)
                        for i in range(1, 6)]
    _, blocks = answer_blocks(answer, "id1", probes_button=False, share_button=True)
    values = [e["value"] for b in blocks if b["type"] == "actions" for e in b["elements"]]
    assert len(values) == 3 and all(len(v) <= 2000 for v in values)
    assert read_value(values[0])[0] == "id1"


def test_an_old_button_value_is_an_id_alone() -> None:
    from traindoc_slack.feedback import read_value

    assert read_value("abc123") == ("abc123", None)


# -- the manifest -------------------------------------------------------------------------------------------------

NEEDED_SCOPES = {"chat:write", "reactions:write", "app_mentions:read", "files:read", "channels:history",
                 "im:history", "commands"}


def test_manifest_parses_and_grants_what_the_bot_uses() -> None:
    manifest = yaml.safe_load((ROOT / "deploy" / "slack-manifest.yaml").read_text(encoding="utf-8"))
    scopes = set(manifest["oauth_config"]["scopes"]["bot"])
    assert NEEDED_SCOPES <= scopes, NEEDED_SCOPES - scopes
    settings = manifest["settings"]
    assert {"app_mention", "message.im"} <= set(settings["event_subscriptions"]["bot_events"])
    assert settings["interactivity"]["is_enabled"] is True, "the feedback buttons need interactivity"
    commands = [c["command"] for c in manifest["features"]["slash_commands"]]
    assert commands == ["/traindoc"]


def test_every_api_method_the_bot_calls_has_its_scope() -> None:
    """The Web API methods named in traindoc_slack/bot.py, mapped to the scope each needs (api.slack.com/methods)."""
    scope_of = {"chat.postMessage": "chat:write", "chat.postEphemeral": "chat:write", "reactions.add": "reactions:write",
                "reactions.remove": "reactions:write", "conversations.replies": "channels:history", "auth.test": None,
                "files.upload": "files:write"}  # files_upload_v2: files.getUploadURLExternal, files.completeUploadExternal
    source = Path(ROOT / "traindoc_slack" / "bot.py").read_text(encoding="utf-8")
    called = set(re.findall(r"\"((?:chat|reactions|conversations|auth|files)\.[A-Za-z]+)\"", source))
    assert called <= set(scope_of), f"a new Web API method needs its scope checked: {called - set(scope_of)}"
    manifest = yaml.safe_load((ROOT / "deploy" / "slack-manifest.yaml").read_text(encoding="utf-8"))
    scopes = set(manifest["oauth_config"]["scopes"]["bot"])
    assert {scope_of[m] for m in called} - {None} <= scopes


def test_the_bots_own_replies_follow_the_askers_language() -> None:
    from traindoc_slack.replies import reply

    assert reply("thanks_up", "训练卡住了怎么办") == "谢谢，已记录：这个回答有帮助。"
    assert reply("thanks_up", "why does NCCL hang?").startswith("Thanks, recorded")
    assert reply("shared", "why?", user="<@U1>", question="why?") == "<@U1> shared traindoc's answer to: why?"


def test_a_chinese_askers_answer_has_every_label_and_button_in_chinese() -> None:
    answer = sample_answer("### 原因\n显存不足", n_citations=1, findings=1)
    answer.question = "训练时显存不足怎么办？"
    answer.lang = "zh"  # decided once, by the intake, and carried on the answer to every renderer
    answer.notice = "新文档正在索引"
    _, blocks = answer_blocks(answer, "a1b2c3", probes_button=True, share_button=True)
    shown = "\n".join(texts(blocks))
    for label in ("*来源*", "*探针发现的问题*", "修复：", "提示：新文档正在索引", "分享到频道", "运行探针"):
        assert label in shown, label
    for english in ("*Sources*", "Probe findings", "Share to channel", "Run the probes", "note:"):
        assert english not in shown, english
