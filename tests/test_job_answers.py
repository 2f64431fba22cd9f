"""Answers to a job's logs: an exception no signature knows (the user's own code) is answered only by a section
that quotes it, so a real KeyError job is told the documents do not cover it instead of being sent to a section
that shares its generic words; a known kind (a real H100 OOM) and a quoted error are still answered."""

from __future__ import annotations

import json
from pathlib import Path

from clikit import ROOT

KEYERROR_JOB = ROOT / "benchmarks" / "data" / "three-rank-keyerror.log"  # real torchrun output, 3 ranks on gloo
OOM_JOB = ROOT / "tests" / "jobs" / "data" / "gpu-real" / "oom_crash" / "console.log"  # real, an H100


def _ask(cli, log: Path, question: str) -> dict:
    result = cli("ask", "--json", "--no-probes", "--log", str(log), question)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_a_user_code_exception_is_not_answered_with_a_section_that_only_shares_words(use_shared_index, cli):
    for question in ("训练为什么挂了？", "why did my training job crash?"):
        answer = _ask(cli, KEYERROR_JOB, question)
        assert answer["diagnosis"]["root_cause"]["category"] == "exception"
        assert answer["diagnosis"]["root_cause"]["rank"] == 1
        assert answer["no_match"] is True and answer["citations"] == [], answer["citations"]


def test_an_uncatalogued_exception_a_section_quotes_is_answered(use_shared_index, cli, tmp_path):
    log = tmp_path / "job.log"
    log.write_text(KEYERROR_JOB.read_text(encoding="utf-8").replace(
        "KeyError: 'target'", "ModuleNotFoundError: No module named 'lightrft'"), encoding="utf-8")
    answer = _ask(cli, log, "why did my training job crash?")
    assert answer["diagnosis"]["root_cause"]["rank"] == 1
    assert answer["no_match"] is False
    assert "包导入错误" in answer["citations"][0]["section"]


def test_a_known_failure_kind_is_answered(use_shared_index, cli):
    answer = _ask(cli, OOM_JOB, "why did my training job crash?")
    assert answer["diagnosis"]["root_cause"]["category"] == "oom"
    assert answer["no_match"] is False
    assert any("显存" in c["section"] or "memory" in c["section"].lower() for c in answer["citations"][:2])
