"""benchmarks/data/fresh_reports.jsonl is a usable check: well formed, no dev thread, every gold heading a seed's."""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FRESH = ROOT / "benchmarks" / "data" / "fresh_reports.jsonl"
SHARED_EVAL = ROOT.parent / "shared" / "eval"


def _cases(path: Path) -> list[dict]:  # type: ignore[type-arg]
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_every_gold_heading_is_a_heading_of_its_seed_document_and_negatives_say_their_topic() -> None:
    cases = _cases(FRESH)
    assert len({c["id"] for c in cases}) == len(cases) >= 40
    for case in cases:
        assert case["lang"] in ("en", "zh") and case["query"].strip()
        if not case["gold"]:
            assert case.get("topic"), case["id"]
        for gold in case["gold"]:
            text = (ROOT / "corpus" / gold["file"]).read_text(encoding="utf-8")
            headings = {m.group(1).strip() for m in re.finditer(r"^#+\s+(.+)$", text, re.M)}
            assert gold["heading"] in headings, (case["id"], gold["heading"])


def test_no_report_comes_from_a_dev_thread() -> None:
    dev = {c.get("source") for name in ("dev.jsonl", "dev2.jsonl") if (SHARED_EVAL / name).exists()
           for c in _cases(SHARED_EVAL / name)}
    assert dev, "the dev sets are beside the repo (../shared/eval)"
    assert not {c["source"] for c in _cases(FRESH)} & dev
