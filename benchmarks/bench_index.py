"""`traindoc index` wall time: full index of the seeds < 5 s, incremental re-index (nothing changed) < 1 s.

Each round (N rounds, default 5, interleaved): `traindoc --help` (the baseline: process start of the
same console script, interpreter + argparse, no index work), a full `traindoc index` into a fresh temp
data dir, then `traindoc index` again on that dir with nothing changed. All are subprocesses of this
venv with TRAINDOC_* settings of the caller dropped (seeds only). One untimed full index first warms
the OS page cache. Medians are compared with the targets; ratios are against the baseline median.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import check, clean_env, finish, fmt_s, median, parser, run_timed, script, verdict  # noqa: E402

TARGET_FULL_S = 5.0
TARGET_INCREMENTAL_S = 1.0


def main() -> int:
    args = parser(__doc__.splitlines()[0]).parse_args()
    print(f"== traindoc index (N={args.runs}, interleaved; targets full < {TARGET_FULL_S:.0f} s, "
          f"incremental < {TARGET_INCREMENTAL_S:.0f} s)")
    traindoc = script("traindoc")
    scratch = Path(tempfile.mkdtemp(prefix="traindoc-bench-index-"))
    try:
        warm = check(run_timed([traindoc, "index"], clean_env(TRAINDOC_DATA_DIR=str(scratch / "warmup"))), "index")
        print(f"setup: warm-up full index {warm.wall_s:.2f} s: {warm.stdout.decode().strip()}")
        base_s, full_s, incr_s, full_rss, incr_rss = [], [], [], [], []
        summary_full = summary_incr = ""
        for i in range(args.runs):
            env = clean_env(TRAINDOC_DATA_DIR=str(scratch / f"run{i}"))
            base_s.append(check(run_timed([traindoc, "--help"], env), "traindoc --help").wall_s)
            full = check(run_timed([traindoc, "index"], env), "traindoc index (full)")
            incr = check(run_timed([traindoc, "index"], env), "traindoc index (incremental)")
            full_s.append(full.wall_s)
            incr_s.append(incr.wall_s)
            full_rss.append(full.max_rss_mb)
            incr_rss.append(incr.max_rss_mb)
            summary_full, summary_incr = full.stdout.decode().strip(), incr.stdout.decode().strip()
        base, full_m, incr_m = median(base_s), median(full_s), median(incr_s)
        print(f"baseline traindoc --help : median {base:.2f} s  [{fmt_s(base_s)}]")
        print(f"full index (seeds)       : median {full_m:.2f} s  [{fmt_s(full_s)}]  = {full_m / base:.1f}x baseline, "
              f"peak RSS {median(full_rss):.0f} MiB")
        print(f"    {summary_full}")
        print(f"incremental, no change   : median {incr_m:.2f} s  [{fmt_s(incr_s)}]  = {incr_m / base:.1f}x baseline, "
              f"peak RSS {median(incr_rss):.0f} MiB")
        print(f"    {summary_incr}")
        ok_full = full_m < TARGET_FULL_S
        ok_incr = incr_m < TARGET_INCREMENTAL_S
        verdict("full index", ok_full,
                f"{full_m:.2f} s vs target < {TARGET_FULL_S:.0f} s ({full_m / base:.1f}x --help)")
        verdict("incremental index", ok_incr,
                f"{incr_m:.2f} s vs target < {TARGET_INCREMENTAL_S:.0f} s ({incr_m / base:.1f}x --help)")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return finish(args.strict, [ok_full, ok_incr])


if __name__ == "__main__":
    sys.exit(main())
