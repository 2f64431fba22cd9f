"""The fix-judging rules of benchmarks/bench_job_fixes.py, on hand-made answers (fast: no index, no jobs run)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
RULES: dict[str, Any] = json.loads((ROOT / "benchmarks" / "fix_rules.json").read_text(encoding="utf-8"))


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_job_fixes", ROOT / "benchmarks" / "bench_job_fixes.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, module)  # dataclasses resolve their module by name
    spec.loader.exec_module(module)
    return module


bench = _bench()
STRAGGLER = RULES["jobs"]["gpu-real/straggler_gloo_timeout"]


def _answer(*fixes: str, category: str = "straggler", rank: int | None = 1) -> dict[str, Any]:
    items = "\n\n".join(fixes)
    markdown = (f"### What the job's logs say\n\n**Root cause ({category}, rank {rank}):** ...\n\n"
                f"### Fixes\n\n> A longer timeout is left out of these fixes.\n\n{items}\n\n"
                "### What not to do\n\n- Do not set `NCCL_SOCKET_IFNAME` or `export NCCL_TIMEOUT=1800`.\n")
    return {"answer": markdown, "citations": [], "no_match": False,
            "diagnosis": {"root_cause": {"category": category, "rank": rank}}}


WORKS_ON_LATE_RANK = ("1. Fix what the late rank was doing, at the file and line its stack shows: move slow reads off "
                      "the critical path. (source: https://docs.pytorch.org/docs/stable/distributed.html) [1]")
NETWORK_KNOB = ("1. Pin NCCL to the right interface. [1]\n\n   ```bash\n   export NCCL_SOCKET_IFNAME=eth0\n   ```")


def test_a_straggler_whose_first_fix_is_a_network_knob_is_judged_wrong() -> None:
    verdict = bench.judge(RULES, STRAGGLER, _answer(NETWORK_KNOB, "2. " + WORKS_ON_LATE_RANK[3:]))
    assert not verdict.first_right
    assert any("NCCL_SOCKET_IFNAME" in w and "(fix 1)" in w for w in verdict.wrong), verdict.wrong


def test_a_straggler_whose_first_fix_works_on_the_late_rank_is_judged_right() -> None:
    verdict = bench.judge(RULES, STRAGGLER, _answer(WORKS_ON_LATE_RANK))
    assert verdict.first_right and not verdict.wrong, verdict
    assert verdict.kind_ok and verdict.rank_ok and verdict.diagnosis_ok
    assert verdict.fixes == 1  # the blockquote before item 1 and "What not to do" are not fixes


def test_a_timeout_knob_first_is_wrong_for_a_straggler() -> None:
    verdict = bench.judge(RULES, STRAGGLER, _answer("1. Raise the timeout.\n\n   ```python\n   "
                                                    "dist.init_process_group('nccl', timeout=timedelta(minutes=60))\n   ```"))
    assert not verdict.first_right and verdict.wrong


@pytest.mark.parametrize("job", sorted(RULES["jobs"]))
def test_nccl_timeout_in_any_fix_is_wrong(job: str) -> None:
    verdict = bench.judge(RULES, RULES["jobs"][job], _answer(WORKS_ON_LATE_RANK, "2. Or: `export NCCL_TIMEOUT=1800`."))
    assert any("global: NCCL_TIMEOUT (fix 2)" == w for w in verdict.wrong), verdict.wrong


def test_document_led_fixes_are_read_too() -> None:
    answer = _answer("**1.** from [1] 问题：Loss 或梯度值为 NaN:\n\n```bash\n--bf16\n```", category="nan", rank=None)
    verdict = bench.judge(RULES, RULES["jobs"]["ds-issues/fp16_loss_scale_min"], answer)
    assert verdict.first_right and verdict.rank_ok is None and verdict.fixes == 1, verdict


def test_wrong_rank_and_no_fixes() -> None:
    answer = {"answer": "### What the job's logs say\n\nnothing to fix", "diagnosis": {"root_cause": {"category": "straggler", "rank": 0}}}
    verdict = bench.judge(RULES, STRAGGLER, answer)
    assert verdict.kind_ok and verdict.rank_ok is False and not verdict.diagnosis_ok and not verdict.first_right


def test_english_share_ignores_code_and_cited_titles() -> None:
    markdown = ("### Likely cause: 问题：Loss 或梯度值为 NaN [1]\n\nPlain English.\n\n```text\n日志 line\n```\n\n"
                "Quoted `错误` inline.\n\n### See also\n- [2] 问题：NCCL 超时\n\n中文的一行\n")
    assert bench.english_lines(markdown) == (4, 5)  # headings, two prose lines; the Chinese one


def test_every_rule_set_and_job_is_sound() -> None:
    import re

    for name, kind in RULES["kinds"].items():
        assert kind.get("why"), name
        for key in ("right_first", "wrong_first", "wrong_anywhere"):
            for pattern in kind.get(key, []):
                re.compile(pattern, re.I)
    for name, job in RULES["jobs"].items():
        assert job["kind"] in job["rules"] and all(r in RULES["kinds"] for r in job["rules"]), name
        assert any("right_first" in RULES["kinds"][r] for r in job["rules"]), name


@pytest.mark.parametrize("job", sorted(RULES["jobs"]))
def test_every_job_in_the_table_exists_on_disk(job: str) -> None:
    source, name = job.split("/", 1)
    data = ROOT / "tests" / "jobs" / "data"
    if source == "gpu-real":
        folder = data / "gpu-real" / name
        assert (folder / "logdir").is_dir() or list(folder.glob("console.log*")), folder
    elif source == "ds-issues":
        assert (data / "ds-issues" / f"{name}.log").is_file()
    else:
        assert source == "cpu", job
        import jobkit  # tests/jobs/jobkit.py (pyproject.toml's pythonpath)

        spec = jobkit.SPECS[name]
        assert (jobkit.FAULTS / spec.script).is_file(), spec
        assert RULES["jobs"][job]["log"] in ("logdir", "console")
