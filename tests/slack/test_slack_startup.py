"""`traindoc slack` refuses to start with one clear line when its Slack settings are wrong."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from clikit import BIN, ROOT
from fakes.slack_api import FakeSlack
from slack_kit import bot_env, free_port

pytestmark = pytest.mark.slow


def start(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / "traindoc"), "slack", "--port", str(free_port())], env=env, cwd=ROOT,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=180, check=False)


def one_line(result: subprocess.CompletedProcess[str]) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    return lines[0]


def test_invalid_token_exits_1_naming_slack_bot_token(slack: FakeSlack, bot_data: Path) -> None:
    slack.fail("auth.test", "invalid_auth")
    try:
        result = start(bot_env(bot_data, bot_data / "data", slack))
    finally:
        slack.heal()
    assert result.returncode == 1
    line = one_line(result)
    assert "invalid_auth" in line and "SLACK_BOT_TOKEN" in line
    assert slack.calls("auth.test"), "the token is checked against the (fake) Slack API"


def test_unreachable_slack_api_exits_1_naming_slack_api_url(slack: FakeSlack, bot_data: Path) -> None:
    env = bot_env(bot_data, bot_data / "data", slack, {"SLACK_API_URL": f"http://127.0.0.1:{free_port()}/api/"})
    result = start(env)
    assert result.returncode == 1
    assert "127.0.0.1" in one_line(result)


@pytest.mark.parametrize(("drop", "named"), [
    ("SLACK_BOT_TOKEN", "SLACK_BOT_TOKEN"),
    ("SLACK_SIGNING_SECRET", "SLACK_SIGNING_SECRET"),
])
def test_missing_setting_exits_naming_it(slack: FakeSlack, bot_data: Path, drop: str, named: str) -> None:
    env = bot_env(bot_data, bot_data / "data", slack)
    del env[drop]
    result = start(env)
    assert result.returncode != 0
    assert named in one_line(result)
