"""The fix follows the diagnosis: a job's failure kind is answered by its runbook, in the asker's language, with
the job's own facts; a straggler never gets network knobs; English askers read English, Chinese askers Chinese."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from clikit import ROOT

GPU = ROOT / "tests" / "jobs" / "data" / "gpu-real"
ISSUES = ROOT / "tests" / "jobs" / "data" / "ds-issues"
CJK = re.compile(r"[\u3400-\u9fff]")
NETWORK_KNOBS = re.compile(r"NCCL_SOCKET_IFNAME|NCCL_IB_DISABLE")


def _ask(cli, *args: str) -> dict:
    result = cli("ask", "--json", "--no-probes", *args)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def _fixes(answer: str, heading: str = "### Fixes") -> str:
    return answer.split(heading, 1)[1].split("\n### ", 1)[0] if heading in answer else ""


def _prose(answer: str) -> list[str]:
    """The answer's own lines: code blocks, inline code and quoted log lines left out."""
    text = re.sub(r"(`{3,})[\s\S]*?\1", "", answer)
    text = re.sub(r"`[^`\n]*`", "", text)
    return [line for line in text.splitlines() if line.strip()]


@pytest.mark.parametrize("log, kind", [
    (GPU / "straggler_nccl_watchdog" / "logdir", "straggler"),
    (GPU / "straggler_gloo_timeout" / "logdir", "straggler"),
    (GPU / "nccl_duplicate_gpu" / "logdir", "duplicate_gpu"),
    (GPU / "invalid_ordinal" / "logdir", "cuda_init_error"),
    (ISSUES / "batch_assert_prefixed.log", "deepspeed_batch_size"),
    (ISSUES / "jit_fused_adam.log", "op_build_failure"),
    (ISSUES / "nccl_shm_no_space.log", "dev_shm"),
    (ISSUES / "oom_killer_dmesg.log", "host_oom"),
    (ISSUES / "fp16_loss_scale_min.log", "fp16_loss_scale"),
    (ISSUES / "ckpt_invalid_resume.log", "deepspeed_resume"),
])
def test_a_diagnosed_job_is_answered_by_its_kinds_runbook(use_shared_index, cli, log: Path, kind: str):
    answer = _ask(cli, "--log", str(log), "why did my training job fail?")
    assert answer["no_match"] is False
    assert answer["citations"][0]["source"] == f"corpus/runbooks/en/{kind}.md", answer["citations"][:2]
    fixes = _fixes(answer["answer"])
    assert re.search(r"(?m)^1\. ", fixes), "the runbook's fixes are numbered in order"
    assert "NCCL_TIMEOUT" not in fixes and "pkill" not in fixes
    assert not [line for line in _prose(answer["answer"]) if CJK.search(line)], "an English question is answered in English"


def test_a_straggler_gets_its_ranks_facts_and_no_network_knob_as_a_fix(use_shared_index, cli):
    answer = _ask(cli, "--log", str(GPU / "straggler_nccl_watchdog" / "logdir"), "why did my training job fail?")
    body = answer["answer"]
    assert answer["diagnosis"]["root_cause"]["category"] == "straggler"
    assert "**In your job:** rank 1" in body and "straggler.py:35" in body
    assert not NETWORK_KNOBS.search(_fixes(body)), "network knobs are never a straggler's fix"
    assert "init_process_group" not in _fixes(body), "a named cause leaves the longer timeout out of the fixes"


def test_the_invalid_ordinal_fix_comes_before_the_other_init_failures(use_shared_index, cli):
    answer = _ask(cli, "--log", str(GPU / "invalid_ordinal" / "logdir"), "why did my training job fail?")
    fixes = _fixes(answer["answer"])
    assert "invalid device ordinal" in fixes.split("\n2. ", 1)[0]
    assert "fabric" not in fixes.lower() and "802" not in fixes, "another failure of the family is not this job's fix"


def test_a_chinese_question_gets_the_chinese_runbook(use_shared_index, cli):
    answer = _ask(cli, "--log", str(GPU / "straggler_nccl_watchdog" / "logdir"), "训练为什么挂了？")
    assert answer["citations"][0]["source"] == "corpus/runbooks/zh/straggler.md"
    assert "### 解决方法" in answer["answer"] and "掉队" in answer["answer"]


def test_why_is_nccl_hanging_is_answered_in_english_with_fixes(use_shared_index, cli):
    answer = _ask(cli, "why is NCCL hanging")
    body = answer["answer"]
    assert answer["no_match"] is False
    assert "### Fixes" in body and re.search(r"(?m)^1\. ", _fixes(body))
    assert not [line for line in _prose(body) if CJK.search(line)], body[:400]


def test_a_seed_section_is_shown_in_english_to_an_english_asker_and_cited_as_the_original(use_shared_index, cli):
    question = "NCCL error: unhandled system error during DeepSpeed init, how do I fix it?"
    english = _ask(cli, question)
    seeds = [c for c in english["citations"] if c["source"].startswith("corpus/00")]
    assert seeds, english["citations"]
    assert all(c["lang"] == "en" for c in seeds), "an English asker reads the English rendering"
    assert all(re.match(r"corpus/00\d_[0-9a-f]+\.txt$", c["source"]) for c in seeds), "cited by the original file"
    assert all(CJK.search(c["section"]) for c in seeds), "and by the original's heading"
    chinese = _ask(cli, "DeepSpeed 初始化时 NCCL 报 unhandled system error，怎么解决？")
    assert all(c["lang"] is None for c in chinese["citations"] if c["source"].startswith("corpus/00"))


def test_a_section_and_its_rendering_are_one_citation(use_shared_index, cli):
    answer = _ask(cli, "why is NCCL hanging")
    keys = [(c["source"], c["section"]) for c in answer["citations"]]
    assert len(keys) == len(set(keys)), keys
    assert not any("/renderings/" in c["source"] for c in answer["citations"])


def test_the_line_that_names_the_cause_picks_the_runbook(use_shared_index, cli, tmp_path):
    """NCCL's `invalid usage` says nothing by itself; the `Last error:` line under it names the cause. The real
    H100 log names two ranks on one GPU; the same log naming no usable interface (NCCL_SOCKET_IFNAME=ib0 on a
    machine without ib0) is an interface problem, and neither is answered with another GPU's advice."""
    real = (GPU / "nccl_duplicate_gpu" / "console.log").read_text(encoding="utf-8")
    answer = _ask(cli, "--log", str(GPU / "nccl_duplicate_gpu" / "console.log"), "why did my training job fail?")
    assert answer["citations"][0]["source"] == "corpus/runbooks/en/duplicate_gpu.md"
    assert "Duplicate GPU detected" in answer["answer"].split("### Checks", 1)[0]  # quoted where the fixes start
    interface = re.sub(r"(?m)(NCCL WARN |\]: )Duplicate GPU detected : rank \d and rank \d both on CUDA device \d+",
                       r"\1Bootstrap : no socket interface found", real)
    assert interface != real and "Duplicate GPU" not in interface
    log = tmp_path / "console.log"
    log.write_text(interface, encoding="utf-8")
    answer = _ask(cli, "--log", str(log), "why did my training job fail?")
    assert answer["citations"][0]["source"] == "corpus/runbooks/en/nccl_interface.md", answer["citations"][:2]
    assert "Blackwell" not in answer["answer"] and "sm_120" not in answer["answer"]
