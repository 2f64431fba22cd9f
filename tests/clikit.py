"""Helpers the tests share: run the installed console scripts as a user would, in an isolated environment."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BIN = ROOT / ".venv" / "bin" if (ROOT / ".venv" / "bin" / "ask").exists() else Path(sys.executable).parent


def isolated_env(base: Path, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """An environment whose every store and cache lives under ``base``."""
    # Every TRAINDOC_* setting goes, not just the known ones: a variable leaked by an in-process test
    # (a model backend, a probe timeout) must not change what a CLI run does.
    # The user's locale goes too (`traindoc hang` speaks Chinese under zh_*): a test that wants one sets it.
    env = {k: v for k, v in (os.environ if environ is None else environ).items()
           if not k.startswith("TRAINDOC_") and k not in ("LC_ALL", "LC_MESSAGES", "LANGUAGE")}
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
        LANG="C.UTF-8",
    )
    return env


CliRunner = Callable[..., subprocess.CompletedProcess[str]]


def run_cli(prog: str, *args: str, env: Mapping[str, str] | None = None, input: str | bytes | None = None,
            timeout: float = 420, cwd: Path | None = None) -> subprocess.CompletedProcess:
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


def chunk_total(report: str) -> int:
    """The chunk count from `traindoc index`'s summary line ('...; N chunks embedded, M in the index')."""
    match = re.search(r"(\d+) chunks embedded, (\d+) in the index", report)
    assert match, f"no summary line in: {report!r}"
    return int(match.group(2))


def chunks_embedded(report: str) -> int:
    match = re.search(r"(\d+) chunks embedded", report)
    assert match, f"no summary line in: {report!r}"
    return int(match.group(1))


def builtin_corpus() -> tuple[int, int]:
    """(files, chunks) of the built-in corpus (seeds, renderings, runbooks), as `traindoc index` reads it."""
    from common.settings import BUILTIN_DIR, Settings
    from corpus.indexer import discover, document_chunks

    return len(discover([BUILTIN_DIR])), len(document_chunks([BUILTIN_DIR], Settings()))


def runbook_of(citations: list[dict]) -> str | None:
    """The kind of the runbook cited first, when one leads the answer (corpus/runbooks/<lang>/<kind>.md)."""
    match = re.search(r"runbooks/[a-z]{2}/([\w-]+)\.md$", citations[0]["source"]) if citations else None
    return match.group(1) if match else None


def documents(citations: list[dict]) -> list[dict]:
    """The cited sections of documents (seeds, user runbooks), traindoc's own runbooks left out."""
    return [c for c in citations if "/runbooks/en/" not in c["source"] and "/runbooks/zh/" not in c["source"]]


def ask_json(cli: Any, question: str) -> dict[str, Any]:
    """`ask --json --no-probes QUESTION` through the ``cli`` fixture: its answer, the run asserted to succeed."""
    done = cli("ask", "--json", "--no-probes", question)
    assert done.returncode == 0, done.stderr[-800:]
    return dict(json.loads(done.stdout))


def lead_kind(answer: dict[str, Any]) -> str | None:
    """The kind of the runbook that leads an ``ask --json`` answer, if one does."""
    return (answer["lead"] or {}).get("kind")
