"""Benchmarks for the probe suite; prints the figures and the ratios against their targets.

(a) the whole probe sweep vs the target interpreter's `python -c "import torch"` (target <= 1.5x);
(b) log_grep over a generated log vs `grep -c -E` with the same anchor patterns (target <= 3x), and
    log_grep's peak memory measured in a subprocess (target < 200 MB).

    python benchmarks/bench_probes.py [--size-mb 1024] [--python PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tools.base import ProbeContext  # noqa: E402
from tools.log_grep import load_signatures, prefilter_anchors  # noqa: E402
from tools.registry import run_probes  # noqa: E402

ERROR_LINES = [
    "[rank{r}]:torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU {r} has 79.1 GiB",
    "[rank{r}]:[Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=77, OpType=ALLREDUCE)",
    "node3:1234:5678 [{r}] NCCL WARN NET/Socket : peer 10.0.0.{r} closed connection",
    "[rank{r}]:RuntimeError: CUDA error: an illegal memory access was encountered",
    "[rank{r}]:ValueError: bad shape {r}",
]
_ERE_META = re.compile(r"[\\.\[\](){}*+?|^$]")
_CHILD = """
import json, resource, sys, time
sys.path.insert(0, {root!r})
from tools.log_grep import grep_log
start = time.perf_counter()
scan = grep_log({path!r}, engine={engine!r}, timeout_s=3600)
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
try:  # ru_maxrss survives exec (it can be the forking parent's); VmHWM belongs to this address space
    rss = int(next(l for l in open("/proc/self/status") if l.startswith("VmHWM")).split()[1])
except (OSError, StopIteration):
    pass
print(json.dumps({{"seconds": time.perf_counter() - start, "maxrss_kb": rss,
                  "matches": sum(g.count for g in scan.groups), "candidates": scan.candidate_lines}}))
"""


def timed(args: list[str]) -> float:
    start = time.perf_counter()
    # A pipe, not /dev/null: GNU grep notices /dev/null and stops at the first match like -q.
    subprocess.run(args, check=False, capture_output=True)
    return time.perf_counter() - start


def bench_sweep(python: str) -> None:
    ctx = ProbeContext(python=python, timeout_s=60)
    run_probes(None, ctx)  # warm the page cache for both sides
    start = time.perf_counter()
    results = run_probes(None, ctx)
    sweep = time.perf_counter() - start
    torch_import = min(timed([python, "-c", "import torch"]) for _ in range(3))
    print(f"(a) probe sweep: {sweep:.2f} s ({', '.join(f'{r.probe}={r.status.value}' for r in results)})")
    print(f"    `{python} -c 'import torch'`: {torch_import:.2f} s")
    print(f"    ratio {sweep / torch_import:.2f}x (target <= 1.5x)")


def write_log(path: Path, size_mb: int) -> None:
    rng = random.Random(0)
    block = []
    for i in range(20000):
        r = i % 8
        if rng.random() < 0.001:
            block.append(rng.choice(ERROR_LINES).format(r=r))
        else:
            block.append(f"[rank{r}]:2025-01-01 12:00:{i % 60:02d} INFO step {i} loss {rng.random():.4f} "
                         f"lr 3.0e-04 grad_norm {rng.random() * 3:.2f} tokens/s {rng.randint(9000, 15000)}")
    data = ("\n".join(block) + "\n").encode()
    with open(path, "wb") as f:
        for _ in range(max(1, size_mb * 1024 * 1024 // len(data))):
            f.write(data)


def bench_log(size_mb: int) -> None:
    with tempfile.TemporaryDirectory(prefix="traindoc-bench-") as tmp:
        path = Path(tmp) / "big.log"
        write_log(path, size_mb)
        size = path.stat().st_size
        pattern = "|".join(_ERE_META.sub(r"\\\g<0>", a.decode()) for a in prefilter_anchors(load_signatures()))
        timed(["cat", str(path)])  # page cache warm for everyone
        grep_s = min(timed(["grep", "-c", "-E", pattern, str(path)]) for _ in range(2))
        count = subprocess.run(["grep", "-c", "-E", pattern, str(path)], capture_output=True, text=True).stdout.strip()
        print(f"(b) log of {size / 1e6:.0f} MB; `grep -c -E` ({len(pattern.split('|'))} anchors): {grep_s:.2f} s, "
              f"{count} lines")
        for engine in ("auto", "python"):
            out = subprocess.run([sys.executable, "-c", _CHILD.format(root=str(ROOT), path=str(path), engine=engine)],
                                 check=True, capture_output=True, text=True).stdout
            stats = json.loads(out)
            print(f"    log_grep engine={engine}: {stats['seconds']:.2f} s ({size / 1e6 / stats['seconds']:.0f} MB/s), "
                  f"ratio {stats['seconds'] / grep_s:.2f}x (target <= 3x); peak RSS {stats['maxrss_kb'] / 1024:.0f} MB "
                  f"(target < 200 MB); {stats['matches']} signature lines of {stats['candidates']} candidates")
    print(f"    temp log deleted: {not path.exists()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=1024)
    parser.add_argument("--python", default=os.environ.get("TRAINDOC_TARGET_PYTHON", sys.executable))
    parser.add_argument("--skip-sweep", action="store_true")
    args = parser.parse_args()
    if not args.skip_sweep:
        bench_sweep(args.python)
    bench_log(args.size_mb)


if __name__ == "__main__":
    main()
