"""Shared fixtures: isolation from the real home and caches, a CLI runner, one index built per session.

Every test runs with TRAINDOC_DATA_DIR, HOME and the HF/torch caches under its own tmp_path, no Chroma URL
and offline Hugging Face, so nothing leaks into the repository's .traindoc or the user's home.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = ROOT / ".venv" / "bin" if (ROOT / ".venv" / "bin" / "ask").exists() else Path(sys.executable).parent
TRAINDOC_VARS = ("TRAINDOC_DATA_DIR", "TRAINDOC_EMBED_MODEL", "TRAINDOC_CHROMA_URL", "TRAINDOC_CORPUS",
                 "TRAINDOC_LOCK_TIMEOUT")


def isolated_env(base: Path, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """An environment whose every store and cache lives under ``base``."""
    env = {k: v for k, v in (os.environ if environ is None else environ).items() if k not in TRAINDOC_VARS}
    env.update(
        TRAINDOC_DATA_DIR=str(base / "data"),
        HOME=str(base / "home"),
        XDG_CACHE_HOME=str(base / "xdg-cache"),
        HF_HOME=str(base / "hf"),
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        SENTENCE_TRANSFORMERS_HOME=str(base / "st"),
        TORCH_HOME=str(base / "torch"),
        MPLCONFIGDIR=str(base / "mpl"),
        ANONYMIZED_TELEMETRY="False",
        PYTHONUNBUFFERED="1",
        COLUMNS="120",
    )
    return env


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in isolated_env(tmp_path).items():
        if os.environ.get(key) != value:
            monkeypatch.setenv(key, value)
    for key in TRAINDOC_VARS[1:]:
        monkeypatch.delenv(key, raising=False)


CliRunner = Callable[..., subprocess.CompletedProcess[str]]


def run_cli(prog: str, *args: str, env: Mapping[str, str] | None = None, input: str | bytes | None = None,
            timeout: float = 180, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """Run ``.venv/bin/<prog>`` as a user would; ``env`` entries override the (isolated) environment."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run(
        [str(BIN / prog), *args],
        input=input,
        stdin=subprocess.DEVNULL if input is None else None,
        capture_output=True,
        text=not isinstance(input, bytes),
        env=full_env,
        cwd=cwd or ROOT,
        timeout=timeout,
        check=False,
    )


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
                            stdin=subprocess.DEVNULL, cwd=ROOT, timeout=300, check=False)
    assert result.returncode == 0, result.stderr
    data = Path(env["TRAINDOC_DATA_DIR"])
    (data / "build-report.txt").write_text(result.stdout, encoding="utf-8")
    yield data


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


def chunk_total(report: str) -> int:
    """The chunk count from `traindoc index`'s summary line ('...; N chunks embedded, M in the index')."""
    import re

    match = re.search(r"(\d+) chunks embedded, (\d+) in the index", report)
    assert match, f"no summary line in: {report!r}"
    return int(match.group(2))


def chunks_embedded(report: str) -> int:
    import re

    match = re.search(r"(\d+) chunks embedded", report)
    assert match, f"no summary line in: {report!r}"
    return int(match.group(1))
