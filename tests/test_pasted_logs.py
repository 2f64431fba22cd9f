"""A log pasted into the question is read as the job it shows when it shows a cascade (a root cause and its
consequences): the answer leads with the rank that failed first, as `ask --log` does. A lone error line or a
question in prose is answered as before. Real captured logs (tests/jobs/data/gpu-real/), pasted via the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from clikit import CliRunner, documents, runbook_of

GPU_REAL = Path(__file__).parent / "jobs" / "data" / "gpu-real"
pytestmark = pytest.mark.usefixtures("use_shared_index")


def _ask(cli: CliRunner, question: str) -> dict:  # type: ignore[type-arg]
    result = cli("ask", "--json", "--no-probes", question)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def test_a_pasted_cascade_names_the_rank_that_failed_first(cli: CliRunner) -> None:
    """OOM on rank 2 caught by a skip handler, then the loud timeouts on ranks 0 and 1: pasted whole. Not the timeout
    runbook: the rank that skipped its batch skipped that batch's collectives (its log says so), and skipping on
    every rank together comes first; the OOM section follows for the batch that did not fit."""
    console = (GPU_REAL / "oom_skip" / "console.log").read_text(encoding="utf-8")
    answer = _ask(cli, "why did my 4-GPU job die?\n" + console)
    root = answer["diagnosis"]["root_cause"]
    assert (root["category"], root["rank"]) == ("oom", 2), root
    assert any("OutOfMemoryError" in line for line in root["evidence"]), root
    assert runbook_of(answer["citations"]) == "collective_mismatch", answer["citations"][:2]
    assert "torch.distributed.all_reduce(failed)" in answer["verdict"]["fix"], answer["verdict"]
    assert "显存" in documents(answer["citations"])[0]["section"], answer["citations"][:3]  # then the OOM section


def test_a_pasted_timeout_of_one_rank_asks_for_every_ranks_log(cli: CliRunner) -> None:
    console = (GPU_REAL / "straggler_nccl_watchdog" / "console.log").read_text(encoding="utf-8").splitlines()
    watchdog = [line for line in console if "Watchdog caught" in line]  # rank 1's, the one rank that timed out
    assert len(watchdog) == 1
    answer = _ask(cli, "training died after a while:\n" + watchdog[0])
    diagnosis = answer["diagnosis"]
    assert diagnosis["root_cause"]["category"] == "unknown"
    assert "every rank" not in diagnosis["root_cause"]["summary"]  # the paste shows one rank alone
    assert diagnosis["next_evidence"][0].startswith("every rank's log"), diagnosis["next_evidence"]
    assert not answer["no_match"]  # retrieval is as before: the timeout sections
    assert runbook_of(answer["citations"]) == "collective_timeout"  # no cause named yet: find the rank first
    fixes = answer["answer"].split("### Fixes", 1)[1].split("### What not to do", 1)[0]
    first_fix = fixes.split("\n2. ", 1)[0]
    assert "timeout=" not in first_fix and "timeout=" in fixes  # a longer timeout comes later, not first
    assert "NCCL_TIMEOUT" not in fixes  # and never as the variable nothing reads


@pytest.mark.parametrize("question", [
    "RuntimeError: CUDA error: invalid device ordinal",
    "my torchrun job hangs after the first epoch\nwhat should I check first?",
    "NCCL 通信卡住怎么办？\n训练到一半就不动了",
])
def test_a_lone_error_or_prose_gets_no_job_diagnosis(cli: CliRunner, question: str) -> None:
    assert _ask(cli, question)["diagnosis"] is None


def test_a_question_with_control_bytes_is_still_answered_as_a_question(cli: CliRunner) -> None:
    """Read as a log, these bytes are "mostly binary" and refused; a question is never refused for that."""
    question = "why does my job die?\n" + "\x01\x02\x03\x04\x05\x06\x07\x08\x0e\x0f\x10\x11" * 40
    result = cli("ask", "--json", "--no-probes", question)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["diagnosis"] is None


def test_a_question_past_the_cap_is_read_as_the_log_it_is(cli: CliRunner) -> None:
    """A 60 KB paste (over corpus.errorlines.QUESTION_CAP): read through the job reader, never dropped; the asker's
    opening words stay the question and the OOM at its end is the diagnosis."""
    progress = "".join(f"[rank0]: step {i} loss 2.{i % 10} lr 1e-4 tokens/s 5321\n" for i in range(1200))
    question = ("why did my job die?\n" + progress
                + "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
                  "capacity of 79.11 GiB of which 1.19 GiB is free.\n")
    assert len(question) > 16 * 1024
    answer = _ask(cli, question)
    assert answer["question"] == "why did my job die?"
    assert answer["diagnosis"]["root_cause"]["category"] == "oom"
    assert runbook_of(answer["citations"]) == "cuda_oom", answer["citations"][:2]


def test_a_long_report_of_a_hang_at_deepspeed_init_cites_the_documents_on_that_hang(cli: CliRunner) -> None:
    """Prose no section's words answer (a team's own loader, tokenizer, versions) around a hang at a stage: the stage's
    runbook leads and the documents' sections retrieval found about that hang follow it."""
    report = ("Pretraining with our own mathcorpus loader and a sentencepiece tokenizer we trained ourselves: once the "
              "shards are tokenized, the launcher starts 4 processes on one node, prints the zero_optimization block, "
              "and then the job hangs in deepspeed init. Launching through accelerate instead gives the same hang. "
              "transformers 4.44, accelerate 0.33, python 3.10.")
    answer = _ask(cli, report)
    assert runbook_of(answer["citations"]) == "deepspeed_init_hang", answer["citations"][:2]
    assert any("初始化进程卡住" in c["section"] for c in documents(answer["citations"])), answer["citations"]


def test_a_log_holding_only_torchruns_start_up_banner_gives_retrieval_nothing_to_match() -> None:
    """torchrun prints its OMP_NUM_THREADS notice on every start (torch/distributed/run.py): its words ("overloaded",
    "optimal performance") are no evidence about the job, so they never reach retrieval as the log's head."""
    import io

    from agent.logs import read_stream

    banner = ("W1126 10:00:00.123000 4567 torch/distributed/run.py:793] \n"
              "W1126 10:00:00.123000 4567 torch/distributed/run.py:793] *****************************************\n"
              "W1126 10:00:00.123000 4567 torch/distributed/run.py:793] Setting OMP_NUM_THREADS environment variable "
              "for each process to be 1 in default, to avoid your system being overloaded, please further tune the "
              "variable for optimal performance in your application as needed. \n"
              "*****************************************\n"
              "WARNING:torch.distributed.run:\n"
              "WARNING:torch.distributed.run:Setting OMP_NUM_THREADS environment variable for each process to be 1\n"
              "[2024-05-01 10:00:00,000] torch.distributed.run: [WARNING] Setting OMP_NUM_THREADS environment "
              "variable for each process to be 1 in default\n")
    assert read_stream(io.BytesIO(banner.encode())).head.strip() == ""
    kept = read_stream(io.BytesIO((banner + "epoch 1 step 40 loss 2.31\n").encode())).head
    assert kept.strip() == "epoch 1 step 40 loss 2.31"


def test_a_deepspeed_hang_at_no_named_stage_with_no_error_gets_the_start_up_runbook_and_no_error_line(
        cli: CliRunner) -> None:
    """A Chinese DeepSpeed hang report whose prose says there was no error: "没有报错" is no error line to quote
    back, and a DeepSpeed job that hangs at no named stage is DeepSpeed's start-up hang (its first check finds where
    each rank waits)."""
    question = "我用 deepspeed 做四卡预训练，数据集读完以后程序就一直停着不动了，没有任何报错\n单卡跑是正常的，这是什么原因？"
    answer = _ask(cli, question)
    assert runbook_of(answer["citations"]) == "deepspeed_init_hang", answer["citations"][:2]
    assert "没有任何报错" not in answer["answer"], answer["answer"][:900]  # not quoted back as "the error line"
