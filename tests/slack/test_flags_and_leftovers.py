"""A flagged first fix is never shown bare (issue 40, point 6) and two Slack leftovers.

A team runbook whose fix exports two variables NCCL does not know, indexed for real with `traindoc index <folder>`:
the default `ask` answer, `--format markdown`, `--full` and the real `traindoc slack` against the fake Slack Web API
keep advice.review's note on each name under the First fix, its Summary line says the command is flagged, Slack's
plain-text notification names both flags, in the asker's language. A bot killed mid-turn left its attachments in
``<data>/cache/slack``: the next bot removes them as it starts. A Retry-After over the bot's longest wait is said for
what it is: the bot gave up at once.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from clikit import BIN, ROOT, CliRunner, isolated_env
from slack_kit import Bot, blocks_text, event_callback, mention, new_user

from advice.review import NOTE_PREFIX, review
from agent.answer import Answer, Citation
from agent.brief import brief
from agent.summary import finished, summary_line, verdict_markdown, verdict_of
from common.language import say
from traindoc_slack.blocks import answer_blocks, notification_line
from traindoc_slack.mrkdwn import to_mrkdwn

NAMES = ("NCCL_GHOST_RING_FLUSH", "NCCL_PHANTOM_RESET")
RUNBOOK = """# Cluster runbook

## Ghost ring on the gpu-b nodes

```
ghostring: ring 3 stale after node restart (gpu-b07)
```

After a gpu-b node restarts, its NCCL ring stays stale until it is flushed. Flush the ring, then relaunch:

```bash
export NCCL_GHOST_RING_FLUSH=1
export NCCL_PHANTOM_RESET=1
torchrun --nproc_per_node=8 train.py
```
"""
QUESTION = {"en": "ghostring: ring 3 stale after node restart (gpu-b12) — how do I get training going again?",
            "zh": "报错 ghostring: ring 3 stale after node restart (gpu-b07)，怎么修复？"}
UNKNOWN = {"en": "is unknown upstream", "zh": "上游没有这个名字"}  # advice/data/wording.json's verdict, as the note says it
LEFTOVER = "4194301-0123456789abcdef0123456789abcdef"  # a turn of a bot (pid 4194301, the kernel's last) killed mid-turn


# -- the answer, built from a section the real review read --------------------------------------------------------

def _answer(lang: str, fixes: str) -> Answer:
    reviewed = review(fixes, "/srv/team/runbooks/ghost.md", "Ghost ring > Fixes", lang)  # type: ignore[arg-type]
    assert {f.id for f in reviewed.flags} >= set(NAMES), reviewed.flags
    answer = Answer(question=QUESTION[lang], answer=f"### {say('fixes', lang)}\n{reviewed.text}\n", no_match=False,
                    lang=lang,  # type: ignore[arg-type]
                    citations=[Citation(1, "/srv/team/runbooks/ghost.md", "Ghost ring > Fixes", "c1", 0.9, text=fixes)],
                    findings=[])
    answer.answer = finished(answer)  # the verdict first, as ask() makes it
    answer.verdict = verdict_of(answer)
    return answer


def _fixes(commands: str) -> str:
    return (f"1. Flush the ring before relaunching:\n\n```bash\n{commands}\n```\n\n"
            "2. Drain the node if it comes back:\n\n```bash\nscontrol update nodename=gpu-b07 state=drain\n```\n")


SHORT = "export NCCL_GHOST_RING_FLUSH=1\nexport NCCL_PHANTOM_RESET=1\ntorchrun --nproc_per_node=8 train.py"
LONG = "export NCCL_GHOST_RING_FLUSH=1\nexport NCCL_PHANTOM_RESET=1\n" + "\n".join(f"echo step {i}" for i in range(5))


def _notes_under(text: str, command: str) -> str:
    """The quoted lines right under the first code block whose last line is ``command`` (its closing fence, where
    the view prints one, between them)."""
    lines = text.split("\n")
    at = next(i for i, line in enumerate(lines) if line.strip() == command) + 1
    while at < len(lines) and lines[at].strip().startswith("```"):
        at += 1
    notes = []
    for line in lines[at:]:
        if not line.lstrip().startswith(">"):
            break
        notes.append(line)
    return "\n".join(notes)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_every_flag_on_the_first_fix_is_under_it_and_in_the_one_line_forms(lang: str) -> None:
    answer = _answer(lang, _fixes(SHORT))
    verdict = answer.verdict
    assert verdict is not None and len(verdict.fix_notes) == 2, verdict  # both names, not only the first
    assert verdict.flags == tuple(f"`{name}` {UNKNOWN[lang]}" for name in NAMES)
    block = verdict_markdown(verdict, answer.lang)
    under = _notes_under(block, "torchrun --nproc_per_node=8 train.py")
    assert all(name in under for name in NAMES) and under.count(NOTE_PREFIX) == 2, block
    assert "\n>\n" in under  # each note a paragraph of its own, as the Fixes block has them
    line = summary_line(verdict, answer.lang, 200)
    assert say("advice.fix_flagged", answer.lang) in line
    text = notification_line(answer)
    assert all(f"{name} {UNKNOWN[lang]}" in text for name in NAMES), text
    assert verdict.to_json()["fix_flags"] == list(verdict.flags)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_brief_keeps_the_notes_under_the_first_fix_and_says_it_once(lang: str) -> None:
    answer = _answer(lang, _fixes(SHORT))
    short = brief(answer.answer, answer.lang, most=12)  # shortened: the Fixes' first item is the verdict's
    under = _notes_under(short, "torchrun --nproc_per_node=8 train.py")
    assert all(name in under for name in NAMES) and under.count(NOTE_PREFIX) == 2, short
    assert short.count(NOTE_PREFIX) == 2 and short.count("export NCCL_PHANTOM_RESET=1") == 1, short
    assert "scontrol" not in _notes_under(short, "torchrun --nproc_per_node=8 train.py")


def test_a_first_fix_too_long_for_the_verdict_keeps_its_notes_in_the_fixes() -> None:
    answer = _answer("en", _fixes(LONG))
    assert "# … " + say("see_below", "en") in answer.answer  # the verdict shows its head only
    short = brief(answer.answer, "en", most=30)
    assert short.count("export NCCL_PHANTOM_RESET=1") == 1, short  # the whole fix, once: under Fixes
    under = _notes_under(short, "echo step 4")
    assert all(name in under for name in NAMES), short


def test_a_note_under_a_command_the_brief_leaves_out_goes_with_it() -> None:
    """What not to do keeps no code in a brief: the note on its command goes with the command, never onto the
    block before it."""
    note = "> ⚠ traindoc: `NCCL_GHOST_RING_FLUSH` is unknown upstream: check it. (NCCL)"
    markdown = (f"### {say('fixes', 'en')}\n\n1. List it:\n\n```bash\nls /dev/shm\n```\n\n"
                f"### {say('runbook_avoid', 'en')}\n\n- Do not set it blindly:\n\n```bash\nexport NCCL_GHOST_RING_FLUSH=1\n```\n"
                f"{note}\n\n### {say('runbook_checks', 'en')}\n\n" + "\n".join(f"{i}. Check {i}." for i in range(1, 40)))
    kept = brief(markdown, "en", most=20)  # the checks go: the rest fits
    assert "ls /dev/shm" in kept and "NCCL_GHOST_RING_FLUSH" not in kept and NOTE_PREFIX not in kept, kept


def test_a_mark_after_a_fix_sentence_survives_its_clipping() -> None:
    prose = ("1. Flush the ring before relaunching the job on every node of the partition: set "
             "`NCCL_GHOST_RING_FLUSH=1` in the job's environment, then relaunch the whole job from its last checkpoint.\n"
             "2. Drain the node.\n")
    reviewed = review(prose, "/srv/team/runbooks/ghost.md", "Ghost ring > Fixes", "en")
    answer = Answer(question=QUESTION["en"], answer=f"### {say('fixes', 'en')}\n{reviewed.text}\n", no_match=False,
                    lang="en", citations=[Citation(1, "/srv/team/runbooks/ghost.md", "Ghost ring > Fixes", "c1", 0.9)],
                    findings=[])
    verdict = verdict_of(answer)
    assert verdict is not None and "⚠ [traindoc" in verdict.fix_text, verdict
    first = next(line for line in verdict_markdown(verdict, "en").split("\n") if say("first_fix", "en") in line)
    assert "…" in first and "NCCL_GHOST_RING_FLUSH" in first.split("…", 1)[1], first  # clipped, the mark kept
    assert verdict.flags == ("`NCCL_GHOST_RING_FLUSH` unknown upstream",)
    answer.verdict = verdict
    line = summary_line(verdict, "en", 200)
    assert "(⚠ traindoc: `NCCL_GHOST_RING_FLUSH` unknown upstream)" in line, line
    assert "NCCL_GHOST_RING_FLUSH unknown upstream" in notification_line(answer)


def test_slack_shows_each_note_as_a_quote_line_of_its_own() -> None:
    answer = _answer("en", _fixes(SHORT))
    answer.brief = brief(answer.answer, "en", most=12)
    for full, notes in ((False, 2), (True, 4)):  # the brief: under the First fix; the whole answer: there and in Fixes
        _, blocks = answer_blocks(answer, "a1", probes_button=False, full=full)
        shown = "\n".join(b["text"]["text"] for b in blocks if b.get("type") == "section")
        assert shown.count("> ⚠ traindoc") == notes and "&gt;\n" not in shown and "\n&gt;" not in shown, shown
    assert to_mrkdwn("> a\n>\n> b\n\n> c") == "> a\n> b\n\n> c"


def test_the_notification_keeps_its_flags_whatever_the_cause_takes() -> None:
    answer = _answer("en", _fixes(SHORT))
    answer.verdict = replace(answer.verdict, cause="ring stale " * 40)
    text = notification_line(answer)
    assert len(text) <= 300 and all(f"{name} is unknown upstream" in text for name in NAMES), text


# -- a leftover attachment is removed when the next bot starts ---------------------------------------------------

def _aged(path: Path, seconds: float) -> None:
    stamp = time.time() - seconds
    os.utime(path, (stamp, stamp), follow_symlinks=False)


def test_a_new_bot_removes_what_an_earlier_one_left_and_nothing_else(tmp_path: Path) -> None:
    from traindoc_slack.bot import clear_leftovers

    downloads = tmp_path / "cache" / "slack"
    outside = tmp_path / "keep.log"
    outside.write_text("not the bot's", encoding="utf-8")
    folders = {name: downloads / name for name in ("dead", f"{os.getpid()}-0a", f"{os.getppid()}-0b", "fresh", "link")}
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True)
    folders["dead"] = downloads / f"{done.stdout.strip()}-0c"  # a bot that is gone
    for name, folder in folders.items():
        if name == "link":
            downloads.mkdir(parents=True, exist_ok=True)
            folder.symlink_to(outside)
        else:
            (folder / "a1b2").mkdir(parents=True)
            (folder / "a1b2" / "rank0.log").write_text("NCCL WARN", encoding="utf-8")
        if name != "fresh":
            _aged(folder, 3600)
    started = time.time() - 60
    assert clear_leftovers(downloads, started) == 3
    assert not folders["dead"].exists() and not folders[f"{os.getpid()}-0a"].exists()  # ours: from before we started
    assert not folders["link"].is_symlink() and outside.read_text(encoding="utf-8") == "not the bot's"
    assert folders[f"{os.getppid()}-0b"].exists()  # a bot still running on the same data directory
    assert folders["fresh"].exists()  # written after this bot started
    assert clear_leftovers(tmp_path / "nothing-yet", started) == 0


def test_the_bridge_clears_its_download_folder_as_it_starts(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from traindoc_slack.bot import SlackBridge
    from traindoc_slack.options import SlackOptions

    turn = tmp_path / "cache" / "slack" / LEFTOVER / "a1b2"
    turn.mkdir(parents=True)
    (turn / "rank0.log").write_text("NCCL WARN", encoding="utf-8")
    _aged(turn.parent, 600)
    troubleshooter = SimpleNamespace(settings=SimpleNamespace(data_dir=tmp_path, cache_dir=tmp_path / "cache"))
    SlackBridge(troubleshooter, SlackOptions(bot_token="xoxb-1", signing_secret="s"))  # type: ignore[arg-type]
    assert not turn.parent.exists() and (tmp_path / "cache" / "slack").is_dir()


# -- Retry-After longer than the bot waits ------------------------------------------------------------------------

def _ratelimited(retry_after: str) -> Any:
    from slack_sdk.errors import SlackApiError
    from slack_sdk.web.slack_response import SlackResponse

    data = {"ok": False, "error": "ratelimited"}
    response = SlackResponse(client=None, http_verb="POST", api_url="https://slack.com/api/chat.postMessage",
                             req_args={}, data=data, headers={"Retry-After": retry_after}, status_code=429)
    return SlackApiError(f"The server responded with: {data}", response)


def test_a_retry_after_over_the_longest_wait_is_said_for_what_it_is() -> None:
    from traindoc_slack.options import slack_error_line

    line = slack_error_line(_ratelimited("120"), "chat.postMessage")
    assert "120 s" in line and "gave up at once" in line and "after waiting" not in line, line
    assert "lower TRAINDOC_SLACK_RATE" in line and "\n" not in line
    waited = slack_error_line(_ratelimited("2"), "chat.postMessage")
    assert "after waiting its Retry-After" in waited and "gave up" not in waited, waited


# -- end to end: a real team folder, the real index, the CLI and the bot ------------------------------------------

@pytest.fixture(scope="module")
def bot_data(shared_index: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The session's index with the team folder indexed into it by `traindoc index`, and a turn's attachments a
    killed bot left behind: what the module's bot starts on (tests/slack/conftest.py)."""
    base = tmp_path_factory.mktemp("teambot")
    shutil.copytree(shared_index, base / "data")
    team = base / "team"
    team.mkdir()
    (team / "ghost-ring.md").write_text(RUNBOOK, encoding="utf-8")
    env = isolated_env(base) | {"TRAINDOC_DATA_DIR": str(base / "data")}
    indexed = subprocess.run([str(BIN / "traindoc"), "index", str(team)], capture_output=True, text=True, env=env,
                             stdin=subprocess.DEVNULL, cwd=ROOT, timeout=600, check=False)
    assert indexed.returncode == 0 and all(name in indexed.stderr for name in NAMES), indexed.stderr
    left = base / "data" / "cache" / "slack" / LEFTOVER / "a1b2"
    left.mkdir(parents=True)
    (left / "rank0.log").write_text("token=xoxb-left-behind\nNCCL WARN\n", encoding="utf-8")
    _aged(left.parent, 600)
    return base


def _ask(cli: CliRunner, data: Path, *args: str) -> str:
    result = cli("ask", "--no-probes", *args, env={"TRAINDOC_DATA_DIR": str(data / "data"), "COLUMNS": "100"})
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.slow
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_cli_flags_every_unknown_name_of_the_first_fix_in_every_view(cli: CliRunner, bot_data: Path,
                                                                        lang: str) -> None:
    for view in ((), ("--format", "markdown"), ("--full",)):
        shown = _ask(cli, bot_data, *view, QUESTION[lang])
        assert "Ghost ring on the gpu-b nodes" in shown.split("\n\n", 2)[1], shown  # the team runbook leads
        under = _notes_under(shown, "torchrun --nproc_per_node=8 train.py")  # the First fix: the first such block
        assert all(f"`{name}` {UNKNOWN[lang]}" in under for name in NAMES), (view, shown)
        summary = shown.rstrip().rsplit(say("summary", lang, cause="").strip(), 1)[-1]
        assert "NCCL_GHOST_RING_FLUSH" in summary and say("advice.fix_flagged", lang) in summary, (view, summary)


@pytest.mark.slow
def test_slack_flags_them_in_the_message_and_its_notification(bot: Bot) -> None:
    for lang in ("en", "zh"):
        event = mention(QUESTION[lang], user=new_user())
        assert bot.event(event_callback(event)).status == 200
        posted = bot.answer_to(str(event["ts"]), timeout=120)
        assert all(f"{name} {UNKNOWN[lang]}" in posted["text"] for name in NAMES), posted["text"]
        assert say("slack_fix", lang, text="export NCCL_GHOST_RING_FLUSH=1") in posted["text"]
        shown = blocks_text(posted)
        under = _notes_under(shown, "torchrun --nproc_per_node=8 train.py")
        assert all(f"`{name}` {UNKNOWN[lang]}" in under for name in NAMES), shown
        assert "&gt;" not in under, under


@pytest.mark.slow
def test_the_bot_removed_the_attachments_a_killed_bot_left(bot: Bot, bot_data: Path) -> None:
    downloads = bot_data / "data" / "cache" / "slack"
    assert downloads.is_dir() and not (downloads / LEFTOVER).exists(), list(downloads.iterdir())


@pytest.mark.slow
def test_a_long_retry_after_is_logged_as_given_up_not_waited(bot: Bot) -> None:
    bot.fake.rate_limit("chat.postMessage", times=1, retry_after=120)
    try:
        event = mention("why does CUDA run out of memory?", user=new_user())
        assert bot.event(event_callback(event)).status == 200
        bot.fake.wait_for("reactions.add", timeout=120, timestamp=str(event["ts"]), name="x")
    finally:
        bot.fake.rate_limit("chat.postMessage", times=0)
    line = next(line for line in bot.stderr().splitlines() if "ratelimited" in line)
    assert "120 s" in line and "gave up at once" in line and "after waiting" not in line, line
