"""Run every benchmark (benchmarks/bench_*.py) one after another and summarise their PASS/FAIL lines.

Usage: .venv/bin/python benchmarks/run_all.py [--strict] [--only NAME ...] [-- extra args for each bench]

Benchmarks run sequentially (never in parallel: they measure wall time on a shared CPU), each with the
interpreter running this script. Exit status 0 unless --strict and a target was missed or a bench
crashed.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ORDER = ["bench_index.py", "bench_cold_ask.py", "bench_warm_query.py", "bench_probes.py"]


def discover() -> list[Path]:
    found = sorted(HERE.glob("bench_*.py"))
    rank = {name: i for i, name in enumerate(ORDER)}
    return sorted(found, key=lambda p: (rank.get(p.name, len(ORDER)), p.name))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--strict", action="store_true", help="exit 1 if any target is missed or any bench fails")
    p.add_argument("--only", nargs="+", metavar="NAME", help="run only these (e.g. cold_ask warm_query)")
    p.add_argument("extra", nargs="*", help="arguments passed to every bench (after --)")
    args = p.parse_args()

    benches = discover()
    if args.only:
        wanted = {n.removeprefix("bench_").removesuffix(".py") for n in args.only}
        benches = [b for b in benches if b.stem.removeprefix("bench_") in wanted]
    if not benches:
        print("no benchmarks selected", file=sys.stderr)
        return 2

    verdicts: list[tuple[str, str]] = []
    crashed: list[str] = []
    for bench in benches:
        print(f"\n##### {bench.name}", flush=True)
        started = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, str(bench), *args.extra], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )
        assert proc.stdout is not None
        for line in proc.stdout:  # stream, and keep the verdict lines
            print(line, end="", flush=True)
            if line.startswith(("PASS", "FAIL")):
                verdicts.append((bench.name, line.strip()))
        code = proc.wait()
        print(f"##### {bench.name}: exit {code} after {time.perf_counter() - started:.0f} s", flush=True)
        if code != 0:
            crashed.append(f"{bench.name} (exit {code})")

    print("\n===== summary")
    for name, line in verdicts:
        print(f"{name:24s} {line}")
    for name in crashed:
        print(f"{name:24s} ERROR: exited non-zero")
    failed = any(line.startswith("FAIL") for _, line in verdicts) or bool(crashed)
    return 1 if args.strict and failed else 0


if __name__ == "__main__":
    sys.exit(main())
