"""Run every fault job and keep its logs: ``python tests/jobs/capture_fault_logs.py OUTDIR [NAME ...]``.

Writes OUTDIR/<fault>/combined.log (torchrun's console, ``--tee 3``) and OUTDIR/<fault>/logdir/
(torchrun's ``--log-dir``), and OUTDIR/summary.json (exit code and wall time of each job).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import jobkit  # beside this script: run as a script, its folder is on sys.path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("outdir", type=Path)
    parser.add_argument("names", nargs="*", help=f"only these jobs (of: {', '.join(jobkit.SPECS)})")
    parser.add_argument("--workers", type=int, default=3)
    args = parser.parse_args()
    unknown = [n for n in args.names if n not in jobkit.SPECS]
    if unknown:
        parser.error(f"unknown job(s): {', '.join(unknown)}")
    specs = [jobkit.SPECS[n] for n in args.names] or list(jobkit.JOBS)
    args.outdir.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    pool = jobkit.JobPool(args.outdir, specs, workers=args.workers)
    try:
        results = pool.results()
    finally:
        pool.close()
    for result in results.values():
        state = f"skipped: {result.skipped}" if result.skipped else \
            f"exit {result.returncode if result.returncode is not None else 'killed at limit'}"
        print(f"{result.name:22} {result.wall_s:6.1f} s  {state}  {result.folder}")
    jobkit.write_summary(results, args.outdir / "summary.json")
    print(f"all jobs: {time.monotonic() - start:.1f} s wall")
    return 0


if __name__ == "__main__":
    sys.exit(main())
