"""Are traindoc's fixes right for real failed jobs? (not a timing benchmark: a measurement of answer quality)

For every real failed job log we hold (tests/jobs/data/gpu-real/*/, tests/jobs/data/ds-issues/*.log, and the CPU
fault jobs of tests/jobs/test_real_jobs.py, run here for real with torchrun on gloo/127.0.0.1), runs
``ask --log LOG --json --no-probes "why did my training job fail?"`` and judges the answer with the per-kind rules
of ``fix_rules.json`` (written from the failures, independently of traindoc's runbooks): is the diagnosis's category
and rank the expected ones, is the FIRST fix right for the failure, is ANY fix wrong for it (and by which rule).
A second figure: the share of the English answers' prose lines that are English (no CJK character).

    TRAINDOC_DATA_DIR=/tmp/td1 .venv/bin/python benchmarks/bench_job_fixes.py [--no-cpu-jobs] [--json]

Exit 0 whatever the verdicts; 2 when ``ask`` itself cannot run (a missing index: run ``traindoc index`` first).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "jobs" / "data"
RULES = Path(__file__).resolve().parent / "fix_rules.json"
QUESTION = "why did my training job fail?"
ASK = Path(sys.executable).parent / "ask"

FIXES_HEADING = re.compile(r"^###\s+(?:Fixes|解决方法)\s*$", re.M)
NEXT_HEADING = re.compile(r"^#{1,3}\s", re.M)
ITEM_START = re.compile(r"^(?:\d+\.\s|\*\*\d+\.\*\*)", re.M)  # runbook "1. text", document "**1.** from [n] ..."
SOURCE_LINK = re.compile(r"\s*\((?:\[source\]\([^)\s]*\)|source: [^)\s]*)\)")  # ([source](url)) or (source: url)
FENCE = re.compile(r"^[ \t]*```.*?^[ \t]*```[ \t]*$", re.M | re.S)
INLINE_CODE = re.compile(r"`[^`\n]*`")
SOURCE_LINE = re.compile(r"^\s*-\s*(\[\d+\]|\S+\.(md|txt|rst)\b)")  # "- [2] title", "- corpus/x.txt › title"
CITED_TITLE = re.compile(r"^(\*\*\d+\.\*\* from \[\d+\]|#{2,4} [^:：\n]+[:：]).*$", re.M)  # a cited section's own title
CJK = re.compile(r"[\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef]")


def fixes(answer_md: str) -> list[str]:
    """The items under the answer's "### Fixes" heading, each with its code blocks, source links removed."""
    start = FIXES_HEADING.search(answer_md)
    if not start:
        return []
    body = answer_md[start.end():]
    end = NEXT_HEADING.search(body)
    body = body[:end.start()] if end else body
    starts = [m.start() for m in ITEM_START.finditer(body)]
    return [SOURCE_LINK.sub("", body[a:b]).strip() for a, b in zip(starts, [*starts[1:], len(body)], strict=True)]


@dataclass
class Verdict:
    category: str | None
    rank: Any
    kind_ok: bool
    rank_ok: bool | None  # None: the expected rank is not known ("any")
    fixes: int
    first_right: bool
    wrong: list[str] = field(default_factory=list)  # "rule set: regex (fix N)"

    @property
    def diagnosis_ok(self) -> bool:
        return self.kind_ok and self.rank_ok is not False


def judge(rules: dict[str, Any], job: dict[str, Any], answer: dict[str, Any]) -> Verdict:
    """Judge one answer JSON against a job's expectation (a row of the rules file's "jobs" table)."""
    root = (answer.get("diagnosis") or {}).get("root_cause") or {}
    category, rank = root.get("category"), root.get("rank")
    rank_ok = None if job.get("rank") == "any" else rank == job.get("rank")
    items = fixes(answer.get("answer") or "")
    sets = [(name, rules["kinds"][name]) for name in dict.fromkeys(["global", *job["rules"]])]
    wrong = []
    for number, text in enumerate(items, 1):
        for name, kind in sets:
            patterns = kind.get("wrong_anywhere", []) + (kind.get("wrong_first", []) if number == 1 else [])
            wrong += [f"{name}: {p} (fix {number})" for p in patterns if re.search(p, text, re.I)]
    right = [p for _, kind in sets for p in kind.get("right_first", [])]
    first_right = bool(items) and any(re.search(p, items[0], re.I) for p in right) \
        and not any(w.endswith("(fix 1)") for w in wrong)
    return Verdict(category, rank, category == job["category"], rank_ok, len(items), first_right, wrong)


def english_lines(answer_md: str) -> tuple[int, int]:
    """(English lines, prose lines) of an answer, without code, inline code, quoted logs and cited titles."""
    text = INLINE_CODE.sub("", FENCE.sub("", SOURCE_LINK.sub("", answer_md)))
    text = CITED_TITLE.sub(lambda m: m.group(1), text)
    lines = [ln for ln in text.splitlines() if re.search(r"\w", ln) and not SOURCE_LINE.match(ln)]
    return sum(1 for ln in lines if not CJK.search(ln)), len(lines)


def ask(log: Path) -> dict[str, Any]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}  # the caller's TRAINDOC_DATA_DIR is kept
    done = subprocess.run([str(ASK), "--log", str(log), "--json", "--no-probes", QUESTION], env=env, cwd=REPO,
                          capture_output=True, text=True, timeout=300, check=False)
    if done.returncode != 0:
        raise SystemExit(f"ask failed on {log} (exit {done.returncode}); is there an index (traindoc index)?\n"
                         f"{done.stderr[-2000:]}")
    return json.loads(done.stdout)


def held_logs(name: str) -> Path:
    source, job = name.split("/", 1)
    if source == "gpu-real":
        folder = DATA / "gpu-real" / job
        return folder / "logdir" if (folder / "logdir").is_dir() else next(folder.glob("console.log*"))
    return DATA / "ds-issues" / f"{job}.log"


def run_cpu_jobs(jobs: dict[str, dict[str, Any]], out: Path) -> dict[str, Path | str]:
    """Run the CPU fault jobs for real, as tests/jobs/jobkit.py runs them (own session, free port on 127.0.0.1, short
    timeouts, the whole process group SIGKILLed afterwards); returns each job's logs, or why it was skipped."""
    sys.path.insert(0, str(REPO / "tests" / "jobs"))
    import jobkit  # noqa: PLC0415 (the tests' launcher; imported only when CPU jobs run)

    names = [n.split("/", 1)[1] for n in jobs]
    pool = jobkit.JobPool(out, [jobkit.SPECS[n] for n in names])
    try:
        results = pool.results()
    finally:
        pool.close()  # cancels and kills whatever still runs, even on error
    logs: dict[str, Path | str] = {}
    for name, job in jobs.items():
        result = results[name.split("/", 1)[1]]
        logs[name] = f"skipped: {result.skipped}" if result.skipped else \
            (result.logdir if job.get("log") == "logdir" else result.combined)
    return logs


def row(name: str, job: dict[str, Any], log: Path | str, rules: dict[str, Any]) -> dict[str, Any]:
    base = {"job": name, "kind": job["kind"], "expected_category": job["category"], "expected_rank": job["rank"]}
    if isinstance(log, str):
        return {**base, "skipped": log}
    answer = ask(log)
    verdict = judge(rules, job, answer)
    english, lines = english_lines(answer.get("answer") or "")
    return {**base, **asdict(verdict), "diagnosis_ok": verdict.diagnosis_ok, "english_lines": english,
            "prose_lines": lines, "log": str(log)}


def mark(value: bool | None) -> str:
    return "-" if value is None else ("yes" if value else "NO")


def report(rows: list[dict[str, Any]]) -> dict[str, Any]:
    judged = [r for r in rows if "skipped" not in r]
    english, lines = sum(r["english_lines"] for r in judged), sum(r["prose_lines"] for r in judged)
    return {"jobs": len(judged), "skipped": [r["job"] for r in rows if "skipped" in r],
            "diagnosis_right": sum(r["diagnosis_ok"] for r in judged),
            "first_fix_right": sum(r["first_right"] for r in judged),
            "jobs_with_wrong_fix": sum(bool(r["wrong"]) for r in judged),
            "jobs_without_fixes": sum(r["fixes"] == 0 for r in judged),
            "english_line_share": round(english / lines, 4) if lines else None,
            "english_lines": english, "prose_lines": lines}


def print_table(rows: list[dict[str, Any]], totals: dict[str, Any]) -> None:
    head = f"{'job':<34} {'expected kind / rank':<42} {'diagnosed':<24} {'kind':<4} {'rank':<4} {'1st fix':<7} " \
           f"{'en%':>4}  wrong fixes"
    print(head)
    print("-" * len(head))
    for r in rows:
        expected = f"{r['expected_category']}:{r['kind']} / {r['expected_rank']}"
        if "skipped" in r:
            print(f"{r['job']:<34} {expected:<42} {r['skipped']}")
            continue
        share = f"{100 * r['english_lines'] / r['prose_lines']:.0f}" if r["prose_lines"] else "-"
        first = "none" if not r["fixes"] else mark(r["first_right"])
        print(f"{r['job']:<34} {expected:<42} {str(r['category']) + ' / ' + str(r['rank']):<24} "
              f"{mark(r['kind_ok']):<4} {mark(r['rank_ok']):<4} {first:<7} {share:>4}  {'; '.join(r['wrong']) or '-'}")
    n = totals["jobs"]
    print(f"\ndiagnosis right {totals['diagnosis_right']}/{n}, first fix right {totals['first_fix_right']}/{n}, "
          f"jobs with a wrong fix {totals['jobs_with_wrong_fix']} (jobs without any fix: {totals['jobs_without_fixes']})")
    if totals["skipped"]:
        print(f"skipped: {', '.join(totals['skipped'])}")
    share = totals["english_line_share"]
    print(f"English answers, English prose lines: {totals['english_lines']}/{totals['prose_lines']}"
          f" ({100 * share:.1f}%)" if share is not None else "English answers: no prose lines")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-cpu-jobs", action="store_true", help="skip running the CPU fault jobs")
    parser.add_argument("--json", action="store_true", help="print the rows and totals as JSON")
    args = parser.parse_args()
    if not ASK.exists():
        raise SystemExit(f"{ASK} is missing: install the project into this interpreter's venv")
    rules = json.loads(RULES.read_text(encoding="utf-8"))
    jobs: dict[str, dict[str, Any]] = rules["jobs"]
    logs: dict[str, Path | str] = {n: held_logs(n) for n in jobs if not n.startswith("cpu/")}
    cpu = {n: j for n, j in jobs.items() if n.startswith("cpu/")}
    with tempfile.TemporaryDirectory(prefix="bench-job-fixes-") as tmp:
        if cpu and not args.no_cpu_jobs:
            logs.update(run_cpu_jobs(cpu, Path(tmp)))
        rows = [row(name, jobs[name], log, rules) for name, log in logs.items()]
    totals = report(rows)
    if args.json:
        print(json.dumps({"rows": rows, "totals": totals}, indent=1, ensure_ascii=False))
    else:
        print_table(rows, totals)
    return 0


if __name__ == "__main__":
    sys.exit(main())
