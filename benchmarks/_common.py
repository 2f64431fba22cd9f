"""Shared helpers for the benchmark scripts (timing child processes, statistics, verdict lines).

Not a benchmark itself: ``run_all.py`` only runs files named ``bench_*.py``.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BENCH_DIR = REPO / "benchmarks"
CACHE_DIR = BENCH_DIR / ".cache"
PYTHON = sys.executable
BIN = Path(sys.executable).parent  # the venv's bin: ask, traindoc


def script(name: str) -> str:
    """A console script of this venv (ask, traindoc), by absolute path."""
    path = BIN / name
    if not path.exists():
        raise SystemExit(f"{path} is missing: install the project into this interpreter's venv (pip install -e .)")
    return str(path)


def clean_env(**overrides: str) -> dict[str, str]:
    """The current environment without any TRAINDOC_* setting, plus ``overrides``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINDOC_")}
    env.update(overrides)
    return env


@dataclass
class ProcResult:
    wall_s: float
    max_rss_mb: float
    returncode: int
    stdout: bytes
    stderr: bytes


def run_timed(cmd: Sequence[str], env: Mapping[str, str] | None = None, cwd: Path | None = None) -> ProcResult:
    """Run ``cmd`` to completion: wall time from spawn to reaped exit, and the child's own peak RSS.

    ``os.wait4`` gives the rusage of exactly this child (``ru_maxrss``, KiB on Linux), unlike
    ``RUSAGE_CHILDREN`` which is a running maximum over every child ever reaped.
    """
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        proc = subprocess.Popen(
            list(cmd), env=dict(env) if env is not None else None, cwd=cwd,
            stdin=subprocess.DEVNULL, stdout=out, stderr=err,
        )
        _, status, usage = os.wait4(proc.pid, 0)  # not proc.wait(): wait4 returns this child's rusage
        wall = time.perf_counter() - started
        code = os.waitstatus_to_exitcode(status)
        proc.returncode = code
        rss_kib = usage.ru_maxrss
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    scale = 1024 if sys.platform != "darwin" else 1  # macOS reports bytes
    return ProcResult(wall, rss_kib * scale / 2**20, code, stdout, stderr)


def check(result: ProcResult, what: str) -> ProcResult:
    if result.returncode != 0:
        tail = result.stderr.decode(errors="replace")[-2000:]
        raise SystemExit(f"{what} failed with exit code {result.returncode}:\n{tail}")
    return result


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def percentile(values: Sequence[float], pct: float) -> float:
    """Nearest-rank percentile (p95 of 150 samples is the 143rd smallest)."""
    ordered = sorted(values)
    rank = max(1, math.ceil(pct / 100 * len(ordered)))
    return ordered[rank - 1]


def fmt_s(values: Sequence[float]) -> str:
    return ", ".join(f"{v:.2f}" for v in values)


def verdict(name: str, ok: bool, detail: str) -> str:
    line = f"{'PASS' if ok else 'FAIL'}: {name}: {detail}"
    print(line, flush=True)
    return line


def parser(description: str, runs: int | None = 5) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    if runs is not None:
        p.add_argument("-n", "--runs", type=int, default=runs, help=f"timed runs per command (default {runs})")
    p.add_argument("--strict", action="store_true", help="exit 1 when a target is missed (default: always exit 0)")
    return p


def finish(strict: bool, results: Sequence[bool]) -> int:
    return 1 if strict and not all(results) else 0
