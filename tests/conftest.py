"""Shared fixtures: isolation from the real home and caches, a CLI runner, one index built per session.

Every test runs with TRAINDOC_DATA_DIR, HOME and the HF/torch caches under its own tmp_path, no Chroma URL
and offline Hugging Face, so nothing leaks into the repository's .traindoc or the user's home.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from browser_kit import launched
from clikit import BIN, ROOT, CliRunner, isolated_env, run_cli

# A suite started in the background by a non-interactive shell (`make test &`) inherits SIGINT ignored, and so would
# every process it starts: the tests that press Ctrl-C on traindoc would see nothing happen. Python's own handler, as
# under a terminal (a process started from here gets the default disposition at exec).
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in isolated_env(tmp_path).items():
        if os.environ.get(key) != value:
            monkeypatch.setenv(key, value)
    for key in [k for k in os.environ if k.startswith("TRAINDOC_") and k != "TRAINDOC_DATA_DIR"]:
        monkeypatch.delenv(key)


@pytest.fixture
def cli() -> CliRunner:
    return run_cli


@pytest.fixture(scope="session")
def shared_index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The built-in corpus indexed once, with the default embedding model, by `traindoc index`.

    Tests that only read it point TRAINDOC_DATA_DIR here; tests that change an index use ``index_copy``.
    """
    base = tmp_path_factory.mktemp("shared")
    env = isolated_env(base)
    result = subprocess.run([str(BIN / "traindoc"), "index"], capture_output=True, text=True, env=env,
                            stdin=subprocess.DEVNULL, cwd=ROOT, timeout=600, check=False)
    assert result.returncode == 0, result.stderr
    data = Path(env["TRAINDOC_DATA_DIR"])
    (data / "build-report.txt").write_text(result.stdout, encoding="utf-8")
    yield data


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """The test process's one Chromium (browser_kit: a second Playwright in one process fails)."""
    with launched() as chromium:
        yield chromium


@pytest.fixture
def use_shared_index(shared_index: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TRAINDOC_DATA_DIR", str(shared_index))
    return shared_index


@pytest.fixture
def index_copy(shared_index: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private, writable copy of the shared index (copying is far cheaper than re-embedding)."""
    target = tmp_path / "index"
    shutil.copytree(shared_index, target)
    monkeypatch.setenv("TRAINDOC_DATA_DIR", str(target))
    return target
