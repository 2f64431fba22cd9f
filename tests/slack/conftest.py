"""One fake Slack Web API and one real `traindoc slack` process per test module.

A module sets ``BOT_ENV`` (extra environment, e.g. the channel allowlist) to configure its bot. The bot reads
a private copy of the session's index, so its downloads and feedback database stay in the module's tmp.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from fakes.slack_api import FakeSlack
from slack_kit import Bot, bot_env, start_bot, stop


@pytest.fixture(scope="module")
def slack() -> Iterator[FakeSlack]:
    with FakeSlack() as fake:
        yield fake


@pytest.fixture(scope="module")
def bot_data(shared_index: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("slackbot")
    shutil.copytree(shared_index, base / "data")
    return base


@pytest.fixture(scope="module")
def bot(request: pytest.FixtureRequest, slack: FakeSlack, bot_data: Path) -> Iterator[Bot]:
    env = bot_env(bot_data, bot_data / "data", slack, getattr(request.module, "BOT_ENV", None))
    running = start_bot(slack, env, bot_data)
    try:
        yield running
    finally:
        stop(running.process)
