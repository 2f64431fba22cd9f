"""Triage of a combined 64-rank torchrun log of ~1 GB: time against `grep -c` over the same file, peak memory.

Targets: triage (a fresh process: read, classify, decide) within 2x the wall time of `grep -c Error FILE`
(median of N runs each, interleaved, warm page cache), and peak RSS under 300 MB. The log is synthetic
but shaped like a real one: 64 ranks' interleaved training lines with torchrun's `[defaultN]:` prefixes,
Python-logging timestamps, warnings, one rank's KeyError half-way, then every other rank's gloo timeout
and torchrun's failure summary. The diagnosis must name that rank, or the run fails.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import sys
from pathlib import Path

from _common import CACHE_DIR, PYTHON, REPO, run_timed, verdict

RANKS = 64
CULPRIT = 37
TRIAGE = (
    "import json, sys; from pathlib import Path; from jobs.triage import triage_paths; "
    "d = triage_paths([Path(sys.argv[1])]); print(json.dumps(d.to_json() if d else None))"
)


def write_log(path: Path, size_mb: int) -> None:
    rng = random.Random(7)
    target = size_mb * 1024 * 1024
    written = 0
    step = 0
    with path.open("w", encoding="utf-8") as out:
        out.write("W1122 15:00:00.000000 100 torch/distributed/run.py:792] Setting OMP_NUM_THREADS environment "
                  "variable for each process to be 1 in default\n")
        while written < target:
            step += 1
            lines = []
            for rank in range(RANKS):
                loss = 2.5 / (1 + step / 1000) + rng.random() / 100
                lines.append(f"[default{rank}]:2026-11-22 15:{(step // 600) % 60:02d}:{(step // 10) % 60:02d},"
                             f"{rng.randrange(1000):03d} INFO train.py:88 step {step} loss {loss:.4f} lr 3.0e-04 "
                             f"tokens/s {rng.randrange(9000, 11000)} grad_norm {rng.random() * 2:.3f}\n")
            if step % 5000 == 0:
                lines.append(f"[default{rng.randrange(RANKS)}]:/venv/lib/python3.11/site-packages/torch/utils/data/"
                             "dataloader.py:617: UserWarning: This DataLoader will create 8 worker processes\n")
            if abs(written - target // 2) < 16_000 and step % 2 == 0 and not getattr(write_log, "done", False):
                write_log.done = True  # type: ignore[attr-defined]
                lines += [f"[default{CULPRIT}]:Traceback (most recent call last):\n",
                          f'[default{CULPRIT}]:  File "/job/train.py", line 120, in <module>\n',
                          f'[default{CULPRIT}]:  File "/job/train.py", line 35, in collate\n',
                          f"[default{CULPRIT}]:KeyError: 'target'\n"]
            chunk = "".join(lines)
            out.write(chunk)
            written += len(chunk)
        for rank in range(RANKS):
            if rank == CULPRIT:
                continue
            out.write(f"[default{rank}]:RuntimeError: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] "
                      "Timed out waiting 600000ms for recv operation to complete\n")
        out.write("torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=3, help="timed runs of each command (default 3)")
    parser.add_argument("--size-mb", type=int, default=1024, help="log size (default 1024)")
    parser.add_argument("--strict", action="store_true")
    args = parser.parse_args()
    grep = shutil.which("grep")
    if grep is None:
        print("SKIP: GNU grep not found")
        return 0
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    log = CACHE_DIR / f"combined-{RANKS}ranks-{args.size_mb}mb.log"
    if not log.exists():
        print(f"writing {log} ...", flush=True)
        write_log(log, args.size_mb)
    size_mb = log.stat().st_size / 1e6
    greps, triages, peaks = [], [], []
    run_timed([grep, "-c", "Error", str(log)])  # warm the page cache
    for _ in range(args.n):
        greps.append(run_timed([grep, "-c", "Error", str(log)]).wall_s)
        result = run_timed([PYTHON, "-c", TRIAGE, str(log)], cwd=REPO)
        if result.returncode != 0:
            print(result.stderr.decode()[-2000:])
            return 1
        diagnosis = json.loads(result.stdout)
        root = (diagnosis or {}).get("root_cause") or {}
        if (root.get("category"), root.get("rank")) != ("exception", CULPRIT):
            print(f"FAIL: wrong diagnosis: {json.dumps(root)[:400]}")
            return 1
        triages.append(result.wall_s)
        peaks.append(result.max_rss_mb)
    grep_s, triage_s = statistics.median(greps), statistics.median(triages)
    print(f"log: {size_mb:.0f} MB, {RANKS} ranks; grep -c: {grep_s:.2f} s; triage: {triage_s:.2f} s "
          f"({size_mb / triage_s:.0f} MB/s); peak RSS {max(peaks):.0f} MB")
    lines = [verdict("triage time", triage_s / grep_s <= 2.0, f"{triage_s / grep_s:.2f}x grep -c (target <= 2x)"),
             verdict("triage memory", max(peaks) < 300, f"peak RSS {max(peaks):.0f} MB (target < 300 MB)")]
    return 1 if args.strict and any(line.startswith("FAIL") for line in lines) else 0


if __name__ == "__main__":
    sys.exit(main())
