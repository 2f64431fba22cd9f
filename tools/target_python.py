"""Finds and runs the user's Python interpreter (the one their training job uses), never traindoc's own."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from tools.base import CommandResult, ProbeContext, RunCommand, data_path


def find_python(ctx: ProbeContext) -> str | None:
    """ctx.python, else $CONDA_PREFIX/bin/python, else $VIRTUAL_ENV/bin/python, else python on PATH."""
    candidates: list[str] = []
    if ctx.python:
        candidates.append(ctx.python)
    for var in ("CONDA_PREFIX", "VIRTUAL_ENV"):
        if ctx.environ.get(var):
            candidates.append(str(Path(ctx.environ[var]) / "bin" / "python"))
    for candidate in candidates:
        found = shutil.which(candidate, path=ctx.environ.get("PATH"))
        if found:
            return found
        if ctx.python and candidate == ctx.python:
            return None  # an explicitly named interpreter that is missing is not silently replaced
    for name in ("python", "python3"):
        found = shutil.which(name, path=ctx.environ.get("PATH"))
        if found:
            return found
    return None


def interpreter_available(ctx: ProbeContext) -> tuple[bool, str]:
    if find_python(ctx) is None:
        where = ctx.python or "CONDA_PREFIX/VIRTUAL_ENV/PATH"
        return False, f"target Python interpreter not found ({where})"
    return True, ""


class ScriptError(Exception):
    def __init__(self, result: CommandResult, message: str) -> None:
        super().__init__(message)
        self.result, self.message = result, message


def run_script(python: str, script: str, ctx: ProbeContext, run: RunCommand, timeout_s: float) -> dict[str, Any]:
    """Runs ``tools/data/<script>`` with the user's interpreter and environment (PYTHONPATH honoured) and
    returns its JSON report. Raises ScriptError with the exact call and raw output on failure."""
    env = dict(ctx.environ)
    env.pop("PYTHONSAFEPATH", None)
    env["PYTHONDONTWRITEBYTECODE"] = "1"  # read-only: no __pycache__ written into user envs
    result = run([python, os.fspath(data_path(script))], timeout_s, env)
    if result.timed_out:
        raise ScriptError(result, f"timed out after {timeout_s:.1f}s (killed)")
    if result.returncode != 0:
        raise ScriptError(result, (result.error or result.stderr.strip()[-2000:] or f"exit {result.returncode}"))
    try:
        data = json.loads(result.stdout.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError) as exc:
        raise ScriptError(result, f"unparseable output: {result.stdout[-500:]!r}") from exc
    if not isinstance(data, dict):
        raise ScriptError(result, f"unexpected output: {result.stdout[-500:]!r}")
    return data
