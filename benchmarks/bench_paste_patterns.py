"""The launcher and library line shapes (jobs/data/signatures.json) on hostile lines: time per line from 200 to 2,000
characters (jobs.lines.MAX_LINE), as a ratio. A line of one shape's beginning repeated 10x longer should cost about
10x; a pattern that rescans from every occurrence would cost about 100x. Target: every ratio under 40.

    .venv/bin/python benchmarks/bench_paste_patterns.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from jobs.signatures import exit_report, meaning  # noqa: E402

HOSTILE = ("srun: error: a", "Failed: Cuda error a", "subprocess.CalledProcessError: Command '", "x: error: unrecognized "
           "arguments: --local", "no device found matching a", "Unable to find address for", "  rank      : 1 (local_r",
           "*** STEP 1 ON a CANCELLED AT ", "[rank: 1] Child process with PID 1 terminated with code ", "CUDART error: ",
           "noticed that process rank 1 with PID 1 on node a", "Bootstrap : no socket interface fou", "error: argument -")
TARGET = 40.0


def per_line(unit: str, size: int, repeat: int) -> float:
    line = (unit * (size // len(unit) + 1))[:size]
    started = time.perf_counter()
    for _ in range(repeat):
        meaning(line)
        exit_report(line)
    return (time.perf_counter() - started) / repeat


def main() -> int:
    worst = 0.0
    for unit in HOSTILE:
        short, long = per_line(unit, 200, 200), per_line(unit, 2000, 20)
        ratio = long / max(short, 1e-7)
        worst = max(worst, ratio)
        print(f"{unit[:40]!r:44s} 200 chars {short * 1e6:8.1f} us   2000 chars {long * 1e6:8.1f} us   {ratio:5.1f}x")
    print(f"{'PASS' if worst < TARGET else 'FAIL'}: worst ratio {worst:.1f}x (target under {TARGET:.0f}x: linear)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
