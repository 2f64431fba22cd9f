"""`traindoc hang --json` on a live, hung 3-rank torchrun job (CPU/gloo): wall time of the whole command.

Target: under 3 s (median of N runs), from spawning `traindoc` to its exit: CLI start, reading /proc,
py-spy on every rank at once, grouping, JSON. The job is the one the tests use (tests/jobs/data/hang/train.py:
ranks 0 and 2 in dist.barrier, rank 1 in load_shard); every run must name rank 1 as the straggler, and the
job must still be alive at the end (the snapshot is read-only). Also reported: the same through torch's
debug server when its optional dependencies (tabulate, jinja2) are installed.

    python benchmarks/bench_hang.py [-n 5] [--strict]
"""

from __future__ import annotations

import importlib.util
import json
import sys
import tempfile
from pathlib import Path

from _common import REPO, check, clean_env, finish, fmt_s, median, parser, run_timed, script, verdict

sys.path.insert(0, str(REPO / "tests" / "jobs"))
from hangkit import HungJob, free_port  # noqa: E402

TARGET_S = 3.0


def _straggler(result_stdout: bytes) -> bool:
    root = json.loads(result_stdout)["diagnosis"]["root_cause"]
    return bool(root and root["category"] == "straggler" and root["rank"] == 1)


def main() -> int:
    args = parser(__doc__.splitlines()[0]).parse_args()
    traindoc = script("traindoc")
    debug = all(importlib.util.find_spec(m) is not None for m in ("tabulate", "jinja2"))
    with tempfile.TemporaryDirectory(prefix="bench-hang-") as tmp:
        job = HungJob(Path(tmp), debug_port=free_port() if debug else None)
        try:
            job.start()
            env = clean_env()
            check(run_timed([traindoc, "hang", "--pid", str(job.pid), "--json"], env=env), "warm-up")
            times = []
            for _ in range(args.runs):
                result = check(run_timed([traindoc, "hang", "--pid", str(job.pid), "--json"], env=env), "traindoc hang")
                if not _straggler(result.stdout):
                    raise SystemExit(f"traindoc hang did not name rank 1: {result.stdout[:500]!r}")
                times.append(result.wall_s)
            server_times = []
            if debug:
                url = f"http://127.0.0.1:{job.debug_port}"
                for _ in range(max(1, args.runs // 2)):
                    result = check(run_timed([traindoc, "hang", "--debug-server", url, "--json", "--timeout", "30"], env=env),
                                   "traindoc hang --debug-server")
                    server_times.append(result.wall_s)
            alive = job.alive()
        finally:
            job.stop()
    best = median(times)
    print(f"traindoc hang --json, 3 ranks: runs {fmt_s(times)} s; median {best:.2f} s (target {TARGET_S:.1f} s)")
    if server_times:
        print(f"traindoc hang --debug-server (stacks + Flight Recorder analysis): runs {fmt_s(server_times)} s; "
              f"median {median(server_times):.2f} s (no target)")
    ok = best < TARGET_S and alive
    verdict("hang snapshot", ok, f"median {best:.2f} s on 3 ranks ({best / TARGET_S:.2f}x of the {TARGET_S:.0f} s target); "
            f"job {'still running' if alive else 'NOT running'} afterwards")
    return finish(args.strict, [ok])


if __name__ == "__main__":
    sys.exit(main())
