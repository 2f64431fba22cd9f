"""The real `traindoc slack` (HTTP Events API) driven by signed requests, its Web API calls seen by a fake Slack.

One bot serves the whole module: allowlist C1 (DMs always answered), one question per user per minute,
attachments up to 1 MB. Each test uses a user and message ts of its own, so tests do not see each other.
"""

from __future__ import annotations

import json
import re
import time

import pytest
from clikit import run_cli
from fakes.slack_api import BOT_ID, BOT_USER
from slack_kit import (
    BOT_TOKEN,
    Bot,
    action_payload,
    blocks_text,
    buttons,
    event_callback,
    fake_token,
    mention,
    new_ts,
    new_user,
)

from tools.base import Finding, ProbeResult, Status
from tools.report import bundle

pytestmark = pytest.mark.slow
BOT_ENV = {"TRAINDOC_SLACK_CHANNELS": "C1", "TRAINDOC_SLACK_RATE": "1", "TRAINDOC_SLACK_MAX_FILE_MB": "1"}
HASH_NAME = re.compile(r"\d{3}_[0-9a-f]{16}\.txt")
# a source is a link to where the corpus records it came from, or its readable title in bold
CORPUS_SOURCE = re.compile(r"^\[\d\] (?:<https://[^|>]+\|[^>]+>|\*[^*\n]+\*)", re.M)
NCCL_WATCHDOG = ("[rank0]:[E ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught collective operation timeout: "
                 "WorkNCCL(SeqNum=1234, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for "
                 "600123 milliseconds before timing out.")


def ask(bot: Bot, text: str, *, channel: str = "C1", **extra: object) -> tuple[str, dict]:
    """Mention the bot with ``text`` as a new user; wait for and return (ts, the posted answer's params)."""
    event = mention(text, user=new_user(), channel=channel, **extra)
    assert bot.event(event_callback(event)).status == 200
    return event["ts"], bot.answer_to(event["ts"], channel=channel)


def settle(bot: Bot) -> None:
    """Let events sent so far be handled: a control question is answered, then a little more time."""
    ask(bot, "why is NCCL hanging?")
    time.sleep(0.5)


def posted_in(bot: Bot, ts: str) -> list:
    return [c for c in bot.fake.calls() if c.params.get("thread_ts") == ts or c.params.get("timestamp") == ts]


# -- a, b, c: the HTTP endpoint -------------------------------------------------------------------------------

def test_startup_says_where_it_listens_and_nothing_else(bot: Bot) -> None:
    first = bot.stderr().splitlines()[0]
    assert first == f"traindoc slack: HTTP Events API on {bot.url}", bot.stderr()


def test_url_verification_challenge_is_echoed(bot: Bot) -> None:
    reply = bot.event({"token": "t", "challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P",
                       "type": "url_verification"})
    assert reply.status == 200
    assert "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P" in reply.body


def test_mention_gets_eyes_then_a_threaded_answer_with_sources_and_feedback_buttons(bot: Bot) -> None:
    ts, answer = ask(bot, "why is NCCL hanging?")
    reaction = bot.fake.wait_for("reactions.add", timestamp=ts)[0]
    assert reaction.params["name"] == "eyes" and reaction.params["channel"] == "C1"
    assert reaction.authorization == f"Bearer {BOT_TOKEN}"
    methods = [c.method for c in posted_in(bot, ts)]
    assert methods.index("reactions.add") < methods.index("chat.postMessage"), "acknowledged before answered"
    assert answer["thread_ts"] == ts and answer["channel"] == "C1"
    text = blocks_text(answer)
    sources = text[text.index("*Sources*"):]
    assert CORPUS_SOURCE.search(sources) and not HASH_NAME.search(sources), sources
    assert "NCCL" in sources
    assert set(buttons(answer)) == {"traindoc_feedback_up", "traindoc_feedback_down", "traindoc_full_answer"}
    labels = [e["text"]["text"] for b in answer["blocks"] if b["type"] == "actions" for e in b["elements"]]
    assert labels == [":+1:", ":-1:", "Full answer"], "the first message is the brief answer: the rest a click away"
    assert "Probe findings" not in text, "the bot's own host is not probed unless TRAINDOC_SLACK_PROBES=host"


def test_wrong_signature_is_refused_and_not_answered(bot: Bot) -> None:
    event = mention("why is NCCL hanging?", user=new_user())
    assert bot.event(event_callback(event), secret="not-the-signing-secret").status == 401
    unsigned = json.dumps(event_callback(event)).encode()
    stale = int(time.time()) - 3600
    assert bot.post(unsigned, "application/json", timestamp=stale).status == 401, "a replayed (old) request is refused"
    settle(bot)
    assert posted_in(bot, event["ts"]) == []


# -- d, g: answered once, never to bots -----------------------------------------------------------------------

def test_retries_and_duplicate_event_ids_are_answered_once(bot: Bot) -> None:
    event = mention("why is NCCL hanging?", user=new_user())
    payload = event_callback(event)
    assert bot.event(payload).status == 200
    bot.answer_to(event["ts"])
    assert bot.event(payload, {"X-Slack-Retry-Num": "1", "X-Slack-Retry-Reason": "http_timeout"}).status == 200
    assert bot.event(payload).status == 200  # the same event_id again, without the retry header
    settle(bot)
    posts = [c for c in posted_in(bot, event["ts"]) if c.method == "chat.postMessage"]
    assert len(posts) == 1, [c.params.get("text") for c in posts]


def test_bots_and_the_bot_itself_are_ignored(bot: Bot) -> None:
    other_bot = {"type": "message", "channel_type": "im", "channel": "D9", "user": "U0BOT", "bot_id": "B0OTHER",
                 "text": "why is NCCL hanging?", "ts": new_ts()}
    bot_message = {"type": "message", "subtype": "bot_message", "channel_type": "im", "channel": "D9",
                   "bot_id": "B0OTHER", "text": "why is NCCL hanging?", "ts": new_ts()}
    itself = mention("why is NCCL hanging?", user=BOT_USER, bot_id=BOT_ID)
    for event in (other_bot, bot_message, itself):
        assert bot.event(event_callback(event)).status == 200
    settle(bot)
    for event in (other_bot, bot_message, itself):
        assert posted_in(bot, event["ts"]) == [], event


# -- e, f: attachments ----------------------------------------------------------------------------------------

def test_attached_log_is_downloaded_with_the_bot_token_and_drives_the_answer(bot: Bot) -> None:
    log = "epoch 3 step 1200 loss 1.93\n" * 50 + NCCL_WATCHDOG + "\n"
    name = f"train-{new_ts()}.log"
    url = bot.fake.add_file(name, log)
    files = [{"id": "F1", "name": "train.log", "size": len(log), "url_private_download": url}]
    ts, answer = ask(bot, "my job died, log attached", files=files)
    download = bot.fake.wait_for(f"file:{name}")[0]
    assert download.authorization == f"Bearer {BOT_TOKEN}"
    text = blocks_text(answer)
    # the corpus section on NCCL timeouts (问题：NCCL 超时), titled in the asker's language, linked to its upstream
    assert "|Problem: NCCL Timeout — " in text[text.index("*Sources*"):], text
    assert "ALLREDUCE SeqNum=1234" in text  # the attached log's own collective, read from its watchdog line


def test_attached_rank_logs_are_one_job_and_the_root_cause_leads(bot: Bot) -> None:
    rank0 = "step 3\nRuntimeError: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting " \
            "10000ms for recv operation to complete\n"
    rank1 = 'step 3\nTraceback (most recent call last):\n  File "/job/train.py", line 35, in collate\nKeyError: \'target\'\n'
    files = []
    for rank, log in ((0, rank0), (1, rank1)):
        name = f"rank{rank}-{new_ts()}.log"
        files.append({"id": f"FR{rank}", "name": f"rank{rank}.log", "size": len(log), "url_private_download": bot.fake.add_file(name, log)})
    ts, answer = ask(bot, "why did the job die?", files=files)
    text = blocks_text(answer)
    assert text.index("rank 1 raised KeyError: 'target'") < text.index("rank 0 timed out waiting"), text[:1500]
    assert "consequences of rank 1's failure" in text
    assert "rank 1 raised KeyError" in answer["text"]  # the notification text names the cause too


def test_attachment_over_the_size_limit_is_not_downloaded(bot: Bot) -> None:
    name = f"huge-{new_ts()}.log"
    url = bot.fake.add_file(name, NCCL_WATCHDOG)
    files = [{"id": "F2", "name": "huge.log", "size": 2 * 1024 * 1024, "url_private_download": url}]
    ts, answer = ask(bot, "why is NCCL hanging? log attached", files=files)
    assert bot.fake.calls(f"file:{name}") == []
    assert "*Sources*" in blocks_text(answer), "the question is still answered"


def node_results() -> list[ProbeResult]:
    ifname = Finding("NCCL_IFNAME_MISSING", "problem", "NCCL_SOCKET_IFNAME=ib7 matches no network interface on node-7",
                     "NCCL_SOCKET_IFNAME=ib7; interfaces here: eth0, lo",
                     "Set NCCL_SOCKET_IFNAME to an interface that exists on every node, e.g. eth0.",
                     ("nccl_socket_ifname", "network interface", "nccl hang"))
    shm = Finding("SHM_TOO_SMALL", "problem", "/dev/shm is 64 MiB on node-7", "/dev/shm: 64.0 MiB total",
                  "Start the container with --shm-size=16g (or --ipc=host).", ("/dev/shm", "bus error", "shm"))
    return [
        ProbeResult("port_check", Status.OK, "port(s) 29500 free on node-7", (), {"ports": {}}),
        ProbeResult("env_vars", Status.PROBLEM, ifname.summary, (ifname,),
                    {"variables": {"NCCL_SOCKET_IFNAME": "ib7"}, "interfaces": ["eth0", "lo"]}),
        ProbeResult("disk_and_memory", Status.PROBLEM, shm.summary, (shm,), {"shm_bytes": 64 << 20}),
    ]


def test_attached_probe_bundle_findings_are_shown(bot: Bot) -> None:
    data = json.dumps(bundle(node_results()))
    name = f"node7-{new_ts()}.json"
    url = bot.fake.add_file(name, data)
    files = [{"id": "F3", "name": "node7.json", "size": len(data), "url_private_download": url}]
    ts, answer = ask(bot, "NCCL hangs at init on node-7", files=files)
    text = blocks_text(answer)
    findings = text[text.index("*Probe findings*"):]
    assert "NCCL_IFNAME_MISSING" in findings and "ib7" in findings
    assert "SHM_TOO_SMALL" in findings and "64 MiB" in findings
    # traindoc's verdicts on the bundle's evidence, not the bundle's own words (tools/verdicts.py)
    assert "--shm-size=16g` or `--ipc=host`" in findings and "--shm-size=16g (or --ipc=host)" not in findings
    assert "traindoc_run_probes" not in buttons(answer), "the bot's host is not offered for probing by default"


def test_run_probes_button_does_nothing_when_host_probes_are_off(bot: Bot) -> None:
    ts, answer = ask(bot, "why is NCCL hanging?")
    payload = action_payload("traindoc_run_probes", "x", ts)
    assert bot.form({"payload": json.dumps(payload)}).status == 200
    settle(bot)
    assert [c.params.get("text") for c in posted_in(bot, ts) if c.method == "chat.postMessage"] == [answer["text"]]


# -- h: threads -------------------------------------------------------------------------------------------------

def test_thread_history_carries_the_earlier_question(bot: Bot) -> None:
    user, parent, earlier_answer = new_user(), new_ts(), new_ts()
    event = mention("how do I find the process that holds it?", user=user, thread_ts=parent)
    bot.fake.thread("C1", parent, [
        {"type": "message", "user": user, "text": f"<@{BOT_USER}> RuntimeError: Address already in use", "ts": parent},
        {"type": "message", "user": BOT_USER, "bot_id": BOT_ID, "text": "The port is taken (错误2: 端口被占用)",
         "ts": earlier_answer, "thread_ts": parent},
        {"type": "message", "user": user, "text": event["text"], "ts": event["ts"], "thread_ts": parent},
    ])
    assert bot.event(event_callback(event)).status == 200
    answer = bot.answer_to(parent)
    replies = bot.fake.wait_for("conversations.replies", channel="C1", ts=parent)
    assert replies
    text = blocks_text(answer)
    assert "already in use" in text[text.index("*Sources*"):], text  # the port-in-use section, from the first turn
    assert "Read as a follow-up" in text


# -- i: secrets ---------------------------------------------------------------------------------------------------

def test_secrets_in_a_question_never_reach_slack(bot: Bot) -> None:
    hf, slack, openai = fake_token("hf_"), "xoxb-" + fake_token("", 12) + "-" + fake_token("", 24), fake_token("sk-proj-")
    question = (f"NCCL hangs, here is the output\nRuntimeError: NCCL timeout on rank 0 (HF_TOKEN={hf})\n"
                f"RuntimeError: NCCL error in all_reduce, posting with {slack}\n"
                f"RuntimeError: NCCL communicator aborted, OPENAI_API_KEY={openai}")
    ts, answer = ask(bot, question)
    before = len(bot.fake.calls("chat.postMessage"))  # the whole answer (its error lines) a click away
    payload = action_payload("traindoc_full_answer", buttons(answer)["traindoc_full_answer"], ts)
    assert bot.form({"payload": json.dumps(payload)}).status == 200
    full = bot.fake.wait_for("chat.postMessage", count=before + 1)[before:][0].params
    shown = blocks_text(answer) + blocks_text(full)
    assert re.search(r"\[[A-Z_]+_\d+\]", shown), "the error lines are shown, with their secrets masked"
    sent = bot.fake.all_bodies() + json.dumps([c.params for c in bot.fake.calls()])
    for secret in (hf, slack, openai):
        assert secret not in sent
        assert secret not in bot.stderr()


# -- j, k: who is answered ------------------------------------------------------------------------------------

def test_channel_allowlist_but_dms_are_always_answered(bot: Bot) -> None:
    elsewhere = mention("why is NCCL hanging?", user=new_user(), channel="C2")
    assert bot.event(event_callback(elsewhere)).status == 200
    dm = {"type": "message", "channel_type": "im", "channel": "D1", "user": new_user(),
          "text": "why is NCCL hanging?", "ts": new_ts()}
    assert bot.event(event_callback(dm)).status == 200
    answer = bot.answer_to(dm["ts"], channel="D1")
    assert "*Sources*" in blocks_text(answer)
    settle(bot)
    assert posted_in(bot, elsewhere["ts"]) == []


def test_rate_limit_answers_the_second_question_with_a_slow_down(bot: Bot) -> None:
    user = new_user()
    first, second = mention("why is NCCL hanging?", user=user), mention("and why is it slow?", user=user)
    assert bot.event(event_callback(first)).status == 200
    assert "blocks" in bot.answer_to(first["ts"])
    assert bot.event(event_callback(second)).status == 200
    reply = bot.answer_to(second["ts"])
    assert "asking faster" in reply["text"] and not reply.get("blocks")


# -- l: Slack API errors --------------------------------------------------------------------------------------

def test_not_in_channel_is_one_clear_log_line(bot: Bot) -> None:
    before = len(bot.stderr())
    bot.fake.fail("chat.postMessage", "not_in_channel")
    try:
        event = mention("why is NCCL hanging?", user=new_user())
        assert bot.event(event_callback(event)).status == 200
        bot.answer_to(event["ts"])  # the attempt, refused by Slack
        deadline = time.monotonic() + 10
        while "not_in_channel" not in bot.stderr()[before:] and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        bot.fake.heal()
    time.sleep(0.5)
    new = bot.stderr()[before:]
    lines = [line for line in new.splitlines() if "not_in_channel" in line]
    assert len(lines) == 1, new
    assert "invite the bot" in lines[0] and "chat.postMessage" in lines[0]
    assert "Traceback" not in new


# -- m: the slash command -----------------------------------------------------------------------------------

def command(text: str, response: str) -> dict[str, str]:
    return {"token": "t", "team_id": "T1", "team_domain": "fake", "channel_id": "C1", "channel_name": "ml",
            "user_id": new_user(), "user_name": "someone", "command": "/traindoc", "text": text, "api_app_id": "A1",
            "response_url": response, "trigger_id": "1.2.3"}


def test_slash_command_answers_ephemerally_via_response_url(bot: Bot) -> None:
    name = f"cmd-{new_ts()}"
    reply = bot.form(command("why is NCCL hanging?", bot.fake.response_url(name)))
    assert reply.status == 200
    response = bot.fake.wait_for(f"respond:{name}")[0].params
    assert response["response_type"] == "ephemeral"
    assert CORPUS_SOURCE.search(blocks_text(response)) and not HASH_NAME.search(blocks_text(response))


def test_slash_command_without_text_gets_usage(bot: Bot) -> None:
    name = f"cmd-{new_ts()}"
    assert bot.form(command("  ", bot.fake.response_url(name))).status == 200
    response = bot.fake.wait_for(f"respond:{name}")[0].params
    assert response["response_type"] == "ephemeral"
    assert "Usage: /traindoc" in response["text"]


# -- n: feedback ------------------------------------------------------------------------------------------------

def test_thumbs_up_is_exported_as_a_good_case(bot: Bot) -> None:
    question = f"why is NCCL hanging on all_reduce? ({new_ts()})"
    ts, answer = ask(bot, question)
    answer_id = buttons(answer)["traindoc_feedback_up"]
    reply = bot.form({"payload": json.dumps(action_payload("traindoc_feedback_up", answer_id, ts))})
    assert reply.status == 200
    env = {"TRAINDOC_FEEDBACK_DB": bot.env["TRAINDOC_FEEDBACK_DB"]}
    deadline, cases = time.monotonic() + 15, []
    while time.monotonic() < deadline:
        result = run_cli("traindoc", "feedback", "export", env=env)
        assert result.returncode == 0, result.stderr
        cases = [json.loads(line) for line in result.stdout.splitlines()]
        if any(c["query"] == question for c in cases):
            break
        time.sleep(0.3)
    case = next(c for c in cases if c["query"] == question)
    assert case["rating"] == "good" and case["channel"] == "slack"
    assert case["gold"] and case["gold"][0]["file"].endswith((".txt", ".md"))  # a seed or a runbook


# -- an unexpected failure ----------------------------------------------------------------------------------------

def test_an_unexpected_failure_is_one_log_line_without_traceback(bot: Bot) -> None:
    before = len(bot.stderr())
    event = mention("why is NCCL hanging?", user=new_user(), files="train.log")  # malformed: not a list of files
    assert bot.event(event_callback(event)).status == 200
    deadline = time.monotonic() + 15
    while "AttributeError" not in bot.stderr()[before:] and time.monotonic() < deadline:
        time.sleep(0.1)
    new = bot.stderr()[before:]
    assert "Traceback" not in new, new
    lines = [line for line in new.splitlines() if "AttributeError" in line]
    assert len(lines) == 1 and lines[0].startswith("slack: "), new
