"""Finds and runs the user's Python interpreter (the one their training job uses), never traindoc's own."""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
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


def guessed(ctx: ProbeContext) -> bool:
    """The interpreter is only the first python on PATH: nothing says it is the one the job runs with."""
    return not ctx.python and not any(ctx.environ.get(var) for var in ("CONDA_PREFIX", "VIRTUAL_ENV"))


def interpreter_available(ctx: ProbeContext) -> tuple[bool, str]:
    if find_python(ctx) is None:
        where = ctx.python or "CONDA_PREFIX/VIRTUAL_ENV/PATH"
        return False, f"target Python interpreter not found ({where})"
    return True, ""


TARGET_SCRIPT = "torch_report.py"  # torch/CUDA facts and package versions, from one interpreter start


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


@dataclass
class _Shared:
    future: Future[dict[str, Any]]
    usable_until: float
    consumers: set[str] = field(default_factory=set)


_memo: dict[tuple[Any, ...], _Shared] = {}
_memo_lock = threading.Lock()


def shared_report(
    python: str, script: str, ctx: ProbeContext, run: RunCommand, timeout_s: float, consumer: str
) -> dict[str, Any]:
    """``run_script`` once per sweep for every probe that reads the same report: the first caller runs it, the
    others (other ``consumer`` names, within ctx.timeout_s of its start) wait for that run and get its report,
    or its ScriptError. A consumer that already had this run's report is asking again (a new sweep) and
    starts a fresh run, so results are never older than one sweep."""
    key = (python, script, ctx.timeout_s, run, tuple(sorted(ctx.environ.items())))
    now = time.monotonic()
    with _memo_lock:
        for stale in [k for k, e in _memo.items() if e.usable_until < now]:
            del _memo[stale]
        entry = _memo.get(key)
        owner = entry is None or consumer in entry.consumers
        if owner:
            entry = _memo[key] = _Shared(Future(), now + ctx.timeout_s + 1.0)
        assert entry is not None
        entry.consumers.add(consumer)
    if owner:
        try:
            entry.future.set_result(run_script(python, script, ctx, run, timeout_s))
        except ScriptError as exc:
            entry.future.set_exception(exc)
        except BaseException as exc:  # never leave waiters hanging on a crashed run
            entry.future.set_exception(exc)
            raise
    try:
        return entry.future.result(timeout=timeout_s + 5.0)
    except TimeoutError as exc:  # the run we waited for outlived its own deadline (it kills itself at timeout_s)
        args = (python, os.fspath(data_path(script)))
        raise ScriptError(CommandResult(args, None, "", "", timed_out=True),
                          f"timed out after {timeout_s:.1f}s waiting for the shared run") from exc


def target_report(python: str, ctx: ProbeContext, run: RunCommand, timeout_s: float, section: str) -> dict[str, Any]:
    """One section ("torch" or "versions") of tools/data/torch_report.py's report, run once per sweep."""
    report = shared_report(python, TARGET_SCRIPT, ctx, run, timeout_s, consumer=section)
    part = report.get(section)
    if not isinstance(part, dict):
        args = (python, os.fspath(data_path(TARGET_SCRIPT)))
        raise ScriptError(CommandResult(args, 0, json.dumps(report)[-500:], ""),
                          f"no {section!r} section in the report: {json.dumps(report)[-500:]!r}")
    return part


def report_for_probe(probe: str, section: str, ctx: ProbeContext, run: RunCommand, clock: Any) -> dict[str, Any] | Any:
    """The ``section`` of the target interpreter's report, or the finished ProbeResult that says why there
    is none (no interpreter: unavailable; the script failed or hung: error / timed_out with the exact call)."""
    from tools.base import Status, failed

    python = find_python(ctx)
    if python is None:
        return failed(probe, clock, Status.UNAVAILABLE, interpreter_available(ctx)[1])
    try:
        report = target_report(python, ctx, run, clock.left(), section)
    except ScriptError as exc:
        status = Status.TIMED_OUT if exc.result.timed_out else Status.ERROR
        return failed(probe, clock, status, f"`{exc.result.call}` failed: {exc.message}",
                      call=exc.result.call, message=exc.message)
    return {"python": python, "report": report}
