"""`traindoc hang --json` on live, hung 3-rank torchrun jobs (CPU/gloo): wall time of the whole command, and the verdict.

Target: under 3 s (median of N runs), from spawning `traindoc` to its exit: CLI start, reading /proc,
py-spy on every rank at once, grouping, JSON. The jobs are the ones the tests use (tests/jobs/data/hang/train.py),
one per shape: plain dist.barrier (ranks 0 and 2 wait, rank 1 in load_shard), DDP (ranks 0 and 2 inside
loss.backward(), waiting for the gradients' all-reduce), FSDP2 (ranks 0 and 2 in the forward's all-gather) and a
collective mismatch (rank 1 in all_reduce, the others in barrier), and ranks 0 and 2 in init_process_group while
rank 1 has not reached it. Per shape: verdict right, rank right, the odd
rank's file:line right; each job must still be alive at the end (the snapshot is read-only). Also reported: the
straggler through torch's debug server when its optional dependencies (tabulate, jinja2) are installed.

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
from hangkit import HungJob, free_port, line_of  # noqa: E402

TARGET_S = 3.0


# shape -> (category, rank, the odd rank's line in train.py)
SHAPES = {
    "straggler": ("straggler", 1, "time.sleep(LIFETIME_S)  # straggler"),
    "ddp": ("straggler", 1, "time.sleep(LIFETIME_S)  # straggler"),
    "fsdp": ("straggler", 1, "time.sleep(LIFETIME_S)  # straggler"),
    "mismatch": ("collective_mismatch", 1, "dist.all_reduce(tensor)  # mismatch"),
    "init": ("straggler", 1, "time.sleep(LIFETIME_S)  # straggler"),
}


def _verdict(result_stdout: bytes, shape: str) -> tuple[bool, bool, bool]:
    """(category right, rank right, file:line right) of one `traindoc hang --json` answer."""
    category, rank, marker = SHAPES[shape]
    root = json.loads(result_stdout)["diagnosis"]["root_cause"] or {}
    return (root.get("category") == category, root.get("rank") == rank,
            root.get("where") == f"train.py:{line_of(marker)}")


def _shape(shape: str, runs: int, traindoc: str, debug: bool) -> tuple[list[float], tuple[bool, bool, bool], bool, list[float]]:
    with tempfile.TemporaryDirectory(prefix=f"bench-hang-{shape}-") as tmp:
        job = HungJob(Path(tmp), mode=shape, debug_port=free_port() if debug else None)
        try:
            job.start()
            env = clean_env()
            check(run_timed([traindoc, "hang", "--pid", str(job.pid), "--json"], env=env), "warm-up")
            times, right = [], (True, True, True)
            for _ in range(runs):
                result = check(run_timed([traindoc, "hang", "--pid", str(job.pid), "--json"], env=env), "traindoc hang")
                got = _verdict(result.stdout, shape)
                right = (right[0] and got[0], right[1] and got[1], right[2] and got[2])
                times.append(result.wall_s)
            server_times = []
            if debug:
                url = f"http://127.0.0.1:{job.debug_port}"
                for _ in range(max(1, runs // 2)):
                    result = check(run_timed([traindoc, "hang", "--debug-server", url, "--json", "--timeout", "30"], env=env),
                                   "traindoc hang --debug-server")
                    server_times.append(result.wall_s)
            alive = job.alive()
        finally:
            job.stop()
    return times, right, alive, server_times


def main() -> int:
    args = parser(__doc__.splitlines()[0]).parse_args()
    traindoc = script("traindoc")
    debug = all(importlib.util.find_spec(m) is not None for m in ("tabulate", "jinja2"))
    oks = []
    for shape in SHAPES:
        times, right, alive, server_times = _shape(shape, args.runs, traindoc, debug and shape == "straggler")
        best = median(times)
        print(f"{shape}: traindoc hang --json, 3 ranks: runs {fmt_s(times)} s; median {best:.2f} s (target {TARGET_S:.1f} s); "
              f"verdict {'right' if right[0] else 'WRONG'}, rank {'right' if right[1] else 'WRONG'}, "
              f"file:line {'right' if right[2] else 'WRONG'}")
        if server_times:
            print(f"{shape}: traindoc hang --debug-server (stacks + Flight Recorder analysis): runs {fmt_s(server_times)} s; "
                  f"median {median(server_times):.2f} s (no target)")
        ok = best < TARGET_S and alive and all(right)
        verdict(f"hang snapshot ({shape})", ok, f"median {best:.2f} s on 3 ranks ({best / TARGET_S:.2f}x of the "
                f"{TARGET_S:.0f} s target); job {'still running' if alive else 'NOT running'} afterwards")
        oks.append(ok)
    return finish(args.strict, oks)


if __name__ == "__main__":
    sys.exit(main())
