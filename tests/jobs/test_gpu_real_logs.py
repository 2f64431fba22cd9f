"""Real failure logs of distributed GPU jobs (one H100, tests/jobs/data/gpu-real/): the triage names the rank
and the failure that started the cascade, never the timeouts, lost peers and SIGTERMs that followed.

Each job was run once by tests/jobs/gpu_faults/run_all.sh; what a user hands over is read two ways: torchrun's
console (``--tee 3``) and its ``--log-dir`` folder. The README there says what each job did.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import pytest
from clikit import CliRunner, documents, runbook_of

from jobs.diagnosis import JobDiagnosis
from jobs.triage import triage_paths

DATA = Path(__file__).resolve().parent / "data" / "gpu-real"
QUESTION = "why did my distributed training job fail?"
CONSEQUENCES = {"collective_timeout", "peer_closed", "killed_by_launcher", "process_abort", "launcher_summary"}


@dataclass(frozen=True)
class Expect:
    job: str
    category: str
    rank: int | None  # None: every rank failed alike (no single culprit)
    says: str  # a regex the root cause's summary matches
    waited: frozenset[int] = frozenset()  # ranks that must show up as consequences (timeouts, lost peers)


EXPECTED = (
    Expect("oom_crash", "oom", 1, r"CUDA out of memory\. Tried to allocate 149\.01 GiB", frozenset({0})),
    Expect("oom_skip", "oom", 2, r"OutOfMemoryError: CUDA out of memory", frozenset({0, 1})),
    Expect("device_assert", "cuda_error", 1, r"device-side assert triggered", frozenset({0, 2})),
    Expect("illegal_access", "cuda_error", 1, r"an illegal memory access was encountered", frozenset({0})),
    Expect("invalid_ordinal", "cuda_error", 1, r"invalid device ordinal"),
    Expect("nccl_duplicate_gpu", "config", None, r"Duplicate GPU detected|invalid usage"),
    Expect("nan_anomaly", "nan", 1, r"returned nan values", frozenset({0})),
    Expect("shape_mismatch_detail", "collective_mismatch", None, r"Detected mismatch between collectives"),
    Expect("wrong_device", "exception", 0, r"Expected all tensors to be on the same device", frozenset({1})),
    Expect("straggler_gloo_timeout", "straggler", 1, r"rank 1 never reached dist\.all_reduce", frozenset({0})),
    Expect("straggler_nccl_watchdog", "straggler", 1, r"rank 1 timed out first.*rank 0 was still waiting", frozenset({0})),
)
SOURCES = ("console", "logdir")


def _paths(job: str, source: str) -> list[Path]:
    folder = DATA / job
    return [next(folder.glob("console.log*"))] if source == "console" else [folder / "logdir"]


def _show(diagnosis: JobDiagnosis | dict | None) -> str:
    data = diagnosis.to_json() if isinstance(diagnosis, JobDiagnosis) else diagnosis
    return json.dumps(data, indent=1, default=str)[:4000]


def test_every_job_has_a_fixture() -> None:
    folders = {p.name for p in DATA.iterdir() if p.is_dir()}
    assert folders == {e.job for e in EXPECTED}
    for folder in folders:
        assert list((DATA / folder / "logdir").glob("*/attempt_0/*/stderr.log*")), folder


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("expect", EXPECTED, ids=[e.job for e in EXPECTED])
def test_triage_names_the_root_cause(expect: Expect, source: str) -> None:
    diagnosis = triage_paths(_paths(expect.job, source), QUESTION)
    assert diagnosis is not None and diagnosis.root_cause is not None
    root = diagnosis.root_cause
    assert (root.category, root.rank) == (expect.category, expect.rank), _show(diagnosis)
    assert root.category not in CONSEQUENCES
    assert re.search(expect.says, root.summary), _show(diagnosis)
    waited = {r for s in diagnosis.symptoms if s.category in ("collective_timeout", "peer_closed") for r in s.ranks}
    assert expect.waited <= waited, _show(diagnosis)
    if expect.rank is not None:
        assert expect.rank not in waited, _show(diagnosis)


def test_oom_hidden_by_a_skip_handler_leads_over_the_loud_timeouts() -> None:
    """Rank 2 logged its OOM and went on; ranks 0 and 1 timed out 20 s later: the OOM's traceback is the evidence."""
    diagnosis = triage_paths(_paths("oom_skip", "console"), QUESTION)
    assert diagnosis is not None and diagnosis.root_cause is not None
    assert diagnosis.root_cause.where == "oom_skip.py:16", _show(diagnosis)
    assert [s.ranks for s in diagnosis.symptoms if s.category == "collective_timeout"] == [[0, 1]]


def test_nccl_watchdog_stack_is_attached_to_the_straggler() -> None:
    """c10's "Stack trace of the failed collective" (frames without a [rankN] prefix) gives the straggler's line."""
    diagnosis = triage_paths(_paths("straggler_nccl_watchdog", "console"), QUESTION)
    assert diagnosis is not None and diagnosis.root_cause is not None
    assert diagnosis.root_cause.where == "straggler.py:35", _show(diagnosis)
    assert "Watchdog caught collective operation timeout" in diagnosis.root_cause.evidence[0]


def test_ncclwarn_names_the_duplicate_gpu_in_the_console() -> None:
    diagnosis = triage_paths(_paths("nccl_duplicate_gpu", "console"), QUESTION)
    assert diagnosis is not None and diagnosis.root_cause is not None
    assert "Duplicate GPU detected" in diagnosis.root_cause.summary, _show(diagnosis)


CLI_ROWS = [e for e in EXPECTED if e.job in ("oom_skip", "device_assert", "straggler_nccl_watchdog", "nan_anomaly")]


@pytest.mark.usefixtures("use_shared_index")
@pytest.mark.parametrize("expect", CLI_ROWS, ids=[e.job for e in CLI_ROWS])
def test_cli_leads_with_the_root_cause(cli: CliRunner, expect: Expect) -> None:
    log = str(_paths(expect.job, "console")[0])
    result = cli("ask", "--json", "--no-probes", "--log", log, QUESTION)
    assert result.returncode == 0, result.stderr
    root = json.loads(result.stdout)["diagnosis"]["root_cause"]
    assert (root["category"], root["rank"]) == (expect.category, expect.rank), _show(root)


@pytest.mark.usefixtures("use_shared_index")
def test_a_collective_fingerprint_mismatch_is_answered_not_refused(cli: CliRunner) -> None:
    """TORCH_DISTRIBUTED_DEBUG=DETAIL's fingerprint message quotes no document, yet the documents describe the
    failure: ranks that call different collectives."""
    log = str(_paths("shape_mismatch_detail", "console")[0])
    answer = json.loads(cli("ask", "--json", "--no-probes", "--log", log, QUESTION).stdout)
    assert answer["diagnosis"]["root_cause"]["category"] == "collective_mismatch"
    assert not answer["no_match"] and runbook_of(answer["citations"]) == "collective_mismatch", answer["citations"]
    assert "DDP (分布式) 相关错误" in documents(answer["citations"])[0]["section"], answer["citations"]


@pytest.mark.usefixtures("use_shared_index")
@pytest.mark.parametrize(("job", "kind", "first_fix"), [
    # rank 2 logged that it skipped the batch its OOM came in: it skipped that batch's collectives, and the others
    # waited for it; skipping on every rank together comes first
    ("oom_skip", "collective_mismatch", "torch.distributed.all_reduce(failed)"),
    # the same OOM, not caught: the memory runbook
    ("oom_crash", "cuda_oom", ""),
])
def test_an_oom_a_rank_skipped_is_the_collective_it_skipped(cli: CliRunner, job: str, kind: str, first_fix: str) -> None:
    result = cli("ask", "--json", "--no-probes", "--log", str(DATA / job / "logdir"), QUESTION)
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    assert (answer["lead"] or {}).get("kind") == kind, answer["lead"]
    assert first_fix in answer["verdict"]["fix"], answer["verdict"]
