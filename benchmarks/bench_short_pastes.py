"""Short pastes cut from real failed jobs' logs: does `ask` still name the cause? (answer quality, and time as a ratio)

What users paste into an issue or a chat is one chunk of a longer log, often cut mid-line. For every real failed
job log we hold (tests/jobs/data/gpu-real/*/, tests/jobs/data/ds-issues/*.log: the jobs of bench_job_fixes.py), this
cuts ``--per-log`` windows at random points (a fixed seed): each holds the line the whole log's diagnosis names as
the root cause, starts 0-12 lines before it with its first line cut at a random character, and ends 0-10 lines after
it. Each paste is asked as a user would (``ask --json --no-probes "why did my job fail?\\n<paste>"``) and judged with
bench_job_fixes' rules (benchmarks/fix_rules.json): verdict right (the category), rank right (where the paste still
shows the expected rank's tag and the rules name one), first fix right. Printed beside the same figures for the whole logs, and the
median time of a paste's answer as a ratio of the whole log's.

    TRAINDOC_DATA_DIR=/tmp/td1 .venv/bin/python benchmarks/bench_short_pastes.py [--per-log 3] [--seed 0] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_job_fixes import ASK, REPO, RULES, held_logs, judge  # noqa: E402

QUESTION = "why did my job fail?"


def _files(log: Path) -> list[Path]:
    return sorted(p for p in log.rglob("*") if p.is_file()) if log.is_dir() else [log]


def _root_line(log: Path) -> tuple[list[str], int] | None:
    """The lines of the file that shows the whole log's root-cause line, and that line's index."""
    from jobs.triage import triage_paths

    diagnosis = triage_paths([log], QUESTION)
    if diagnosis is None or diagnosis.root_cause is None or not diagnosis.root_cause.evidence:
        return None
    shown = diagnosis.root_cause.evidence[0].strip()[-120:]
    for path in _files(log):
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        for index, line in enumerate(lines):
            if shown and (shown in line or line.strip()[-120:] in shown and len(line.strip()) > 20):
                return lines, index
    return None


def cut(lines: list[str], at: int, rng: random.Random) -> str:
    """A window around line ``at``: 0-12 lines before, 0-10 after, the first line cut at a random character."""
    start = max(0, at - rng.randint(0, 12))
    end = min(len(lines), at + 1 + rng.randint(0, 10))
    window = lines[start:end]
    if window and start < at and len(window[0]) > 8:
        window[0] = window[0][rng.randint(1, len(window[0]) - 4):]
    return "\n".join(window)


def _ask(args: list[str]) -> tuple[dict[str, Any], float]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    started = time.perf_counter()
    done = subprocess.run([str(ASK), *args, "--json", "--no-probes"], env=env, cwd=REPO, capture_output=True, text=True,
                          timeout=300, check=False)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"ask failed (exit {done.returncode}); is there an index (traindoc index)?\n{done.stderr[-2000:]}")
    return json.loads(done.stdout), elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-log", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true")
    options = parser.parse_args()
    rules = json.loads(RULES.read_text(encoding="utf-8"))
    rng = random.Random(options.seed)
    rows: list[dict[str, Any]] = []
    whole_times: list[float] = []
    paste_times: list[float] = []
    for name, job in rules["jobs"].items():
        if name.startswith("cpu/"):
            continue
        log = held_logs(name)
        found = _root_line(log)
        if found is None:
            rows.append({"job": name, "skipped": "no root-cause line to cut around"})
            continue
        lines, at = found
        whole, seconds = _ask(["--log", str(log), QUESTION])
        whole_times.append(seconds)
        full = judge(rules, job, whole)
        for number in range(options.per_log):
            paste = cut(lines, at, rng)
            answer, seconds = _ask([f"{QUESTION}\n{paste}"])
            paste_times.append(seconds)
            verdict = judge(rules, job, answer)
            shows_rank = isinstance(job["rank"], int) and re.search(
                rf"(?i)\brank\s?{job['rank']}\b|\[rank{job['rank']}\]|\[default{job['rank']}\]|^{job['rank']}: ", paste, re.M)
            rows.append({"job": name, "paste": number, "lines": paste.count("\n") + 1, "expected": job["category"],
                         "got": verdict.category, "kind_ok": verdict.kind_ok,
                         "rank_ok": verdict.rank_ok if shows_rank else None,
                         "first_right": verdict.first_right, "whole_kind_ok": full.kind_ok,
                         "whole_first_right": full.first_right})
    judged = [r for r in rows if "skipped" not in r]
    ranked = [r for r in judged if r["rank_ok"] is not None]
    whole = {r["job"]: r for r in judged}
    totals = {
        "pastes": len(judged), "logs": len(whole), "skipped": [r["job"] for r in rows if "skipped" in r],
        "verdict_right": sum(r["kind_ok"] for r in judged), "rank_right": sum(bool(r["rank_ok"]) for r in ranked),
        "ranked": len(ranked), "first_fix_right": sum(r["first_right"] for r in judged),
        "whole_verdict_right": sum(r["whole_kind_ok"] for r in whole.values()),
        "whole_first_fix_right": sum(r["whole_first_right"] for r in whole.values()),
        "time_ratio": round(statistics.median(paste_times) / statistics.median(whole_times), 2) if whole_times else None,
    }
    if options.json:
        print(json.dumps({"rows": rows, "totals": totals}, indent=1))
        return 0
    for r in judged:
        print(f"{r['job']:40s} #{r['paste']} {r['lines']:2d} lines  expected {r['expected']:16s} got {str(r['got']):16s} "
              f"verdict {'yes' if r['kind_ok'] else 'NO '}  rank {'-' if r['rank_ok'] is None else 'yes' if r['rank_ok'] else 'NO'}"
              f"  first fix {'yes' if r['first_right'] else 'NO'}")
    for name in totals["skipped"]:
        print(f"{name:40s} skipped: no root-cause line to cut around")
    print(f"\npastes ({totals['pastes']} from {totals['logs']} logs, seed {options.seed}): verdict right "
          f"{totals['verdict_right']}/{totals['pastes']}, rank right {totals['rank_right']}/{totals['ranked']}, first fix "
          f"right {totals['first_fix_right']}/{totals['pastes']}")
    print(f"whole logs: verdict right {totals['whole_verdict_right']}/{totals['logs']}, first fix right "
          f"{totals['whole_first_fix_right']}/{totals['logs']}")
    print(f"time to an answer, paste / whole log (medians): {totals['time_ratio']}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
