"""The blind report sets beside the visible ones (benchmarks/data/fresh_reports_{b,c,d,e}.jsonl): well formed, every
seed heading a heading of its seed, every runbook kind one the registry defines, and no thread in two sets or in the
shared dev sets (a report seen twice is no blind check)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from runbooks.registry import kinds

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "benchmarks" / "data"
SETS = sorted(DATA.glob("fresh_reports_*.jsonl"))
SHARED_EVAL = ROOT.parent / "shared" / "eval"


def _cases(path: Path) -> list[dict]:  # type: ignore[type-arg]
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _thread(url: str) -> str:
    return url.split("#", 1)[0].rstrip("/").lower()


@pytest.mark.parametrize("path", SETS, ids=lambda p: p.stem)
def test_each_report_is_labelled_with_what_exists(path: Path) -> None:
    cases = _cases(path)
    assert len({c["id"] for c in cases}) == len(cases) >= 30  # a set large enough to score (fresh_reports_m: 34)
    for case in cases:
        assert case["lang"] in ("en", "zh") and case["query"].strip() and case["source"].startswith("https://")
        assert set(case["runbook_gold"]) <= set(kinds()), (case["id"], case["runbook_gold"])
        for gold in case["gold"]:
            text = (ROOT / "corpus" / gold["file"]).read_text(encoding="utf-8")
            headings = {m.group(1).strip() for m in re.finditer(r"^#+\s+(.+)$", text, re.M)}
            assert gold["heading"] in headings, (case["id"], gold["heading"])


def test_no_thread_is_in_two_sets() -> None:
    assert len(SETS) >= 4
    seen: dict[str, str] = {}
    shared = [SHARED_EVAL / f"{name}.jsonl" for name in ("dev", "dev2", "dev3")]
    for path in [*SETS, DATA / "fresh_reports.jsonl", *(p for p in shared if p.exists())]:
        for case in _cases(path):
            thread = _thread(case["source"])
            assert seen.setdefault(thread, path.name) == path.name, (thread, seen[thread], path.name)
