"""Real torchrun jobs on CPU/gloo, one fault each (tests/jobs/faults/), and the triage of their logs.

The jobs run once per session, three at a time (``jobs`` fixture); each test only reads a job's logs:
torchrun's console (``combined.log``), its ``--log-dir`` folder, or the per-rank files a shell glob names.
A triage that blames the wrong rank fails here: the guilty rank is rank 1 or 2 wherever the fault allows.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import jobkit
import pytest
from clikit import CliRunner, documents, runbook_of

Source = Literal["combined", "logdir", "files"]
WORKER_SOURCES: tuple[Source, ...] = ("combined", "logdir", "files")


@dataclass(frozen=True)
class Expect:
    job: str
    category: str
    rank: int | None  # None: no single rank (every rank, or the launcher)
    sources: tuple[Source, ...] = WORKER_SOURCES
    question: str = "why did my training job fail?"


HANG = "my torchrun job hangs at startup, nothing happens"
EXPECTED: tuple[Expect, ...] = (
    Expect("exception", "exception", 1),
    Expect("exception_plain", "exception", 1, ("combined",)),
    Expect("oom", "host_oom", 2),  # DefaultCPUAllocator: the host's RAM, not a GPU's
    Expect("segfault", "native_crash", 2, ("combined",)),  # the exit code is in the console only (see below)
    Expect("straggler", "straggler", 1),
    Expect("collective_mismatch", "collective_mismatch", 1),
    Expect("uneven_inputs", "collective_mismatch", 1),  # rank 1 calls all_reduce, the others the final barrier
    Expect("nan", "nan", 1),
    Expect("nan_plain", "nan", 1, ("combined",)),
    Expect("dataloader_worker", "dataloader_worker", 1),
    Expect("disk_full", "disk_full", 0),  # rank 0 is the one that saves
    Expect("disk_full_fileobj", "disk_full", 0),
    Expect("checkpoint", "checkpoint", None),  # every rank loads the same wrong checkpoint
    Expect("bad_arguments", "bad_arguments", None),  # every rank parses the same command line
    Expect("port_in_use", "port_in_use", None, ("combined",)),  # the launcher fails: no rank started
    Expect("rendezvous_static", "rendezvous", None, ("combined",)),
    Expect("rendezvous_c10d", "rendezvous", None, ("combined",)),
    Expect("rendezvous_hang", "rendezvous", None, ("combined",), HANG),
    Expect("rendezvous_hang_info", "rendezvous", None, ("combined",), HANG),
)
ROWS = [pytest.param(e, s, id=f"{e.job}-{s}") for e in EXPECTED for s in e.sources]


@pytest.fixture(scope="session")
def jobs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[jobkit.JobPool]:
    pool = jobkit.JobPool(tmp_path_factory.mktemp("fault-jobs"))
    try:
        yield pool
    finally:
        pool.close()


def _job(jobs: jobkit.JobPool, name: str) -> jobkit.JobResult:
    result = jobs.result(name)
    if result.skipped:
        pytest.skip(result.skipped)
    assert result.combined.stat().st_size > 0 or jobkit.SPECS[name].limit_s < 60, f"{name} printed nothing"
    return result


def _paths(result: jobkit.JobResult, source: Source) -> list[Path]:
    if source == "combined":
        return [result.combined]
    if source == "logdir":
        return [result.logdir]
    files = result.rank_files()
    assert files, f"no per-rank files under {result.logdir}"
    return files


def _diagnose(paths: list[Path], question: str) -> dict:
    from jobs.triage import triage_paths  # written alongside these tests; an ImportError names the missing piece

    diagnosis = triage_paths(paths, question)
    assert diagnosis is not None, f"no diagnosis for {paths}"
    return diagnosis.to_json()


def _show(diagnosis: dict) -> str:
    return json.dumps(diagnosis, indent=1)[:4000]


def _fault_line(script: str) -> int:
    """The line of the script marked ``# fault:`` (where the fault is raised)."""
    lines = (jobkit.FAULTS / script).read_text(encoding="utf-8").splitlines()
    return next(i for i, line in enumerate(lines, 1) if "# fault:" in line)


def _left_behind(out: Path) -> list[str]:
    """Processes whose working directory is in a job's folder, and mounts under it."""
    left = []
    for proc in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            if proc.name.isdigit() and Path(os.readlink(proc / "cwd")).is_relative_to(out):
                left.append(f"pid {proc.name}: {(proc / 'cmdline').read_bytes().replace(bytes(1), b' ')[:200]!r}")
    mounts = Path("/proc/mounts").read_text(encoding="utf-8") if Path("/proc/mounts").exists() else ""
    return left + [line for line in mounts.splitlines() if str(out) in line]


def test_jobs_ran_as_designed(jobs: jobkit.JobPool) -> None:
    """Each job failed (the healthy one did not), by itself or at its limit; nothing of it outlived it."""
    for name, result in jobs.results().items():
        if result.skipped:
            continue
        spec = jobkit.SPECS[name]
        expected = 0 if name == "healthy" else (None if spec.limit_s < 60 else 1)
        assert result.returncode == expected, f"{name}: exit {result.returncode}\n{result.combined.read_text()[-3000:]}"
    assert not _left_behind(jobs.out.resolve()), _left_behind(jobs.out.resolve())


# Faults whose own message is raised asynchronously (a DataLoader's SIGCHLD handler): on a loaded machine the
# run can end before the rank prints it. Then the logs hold no evidence of the cause, and no triage can name it.
FAULT_PRINTED = {"dataloader_worker": "DataLoader worker"}


@pytest.mark.parametrize(("expect", "source"), ROWS)
def test_triage_names_the_root_cause(jobs: jobkit.JobPool, expect: Expect, source: Source) -> None:
    result = _job(jobs, expect.job)
    marker = FAULT_PRINTED.get(expect.job)
    if marker and not any(marker in p.read_text(errors="replace") for p in _paths(result, "combined")):
        pytest.skip(f"this run of {expect.job} ended before the rank printed {marker!r}: no evidence to triage")
    diagnosis = _diagnose(_paths(result, source), expect.question)
    root = diagnosis["root_cause"]
    assert root is not None, _show(diagnosis)
    assert (root["category"], root["rank"]) == (expect.category, expect.rank), _show(diagnosis)


@pytest.mark.parametrize(("job", "source"), [("exception", "combined"), ("exception", "logdir"), ("exception", "files"),
                                             ("exception_plain", "combined")])
def test_exception_points_at_the_raise(jobs: jobkit.JobPool, job: str, source: Source) -> None:
    diagnosis = _diagnose(_paths(_job(jobs, job), source), "why did it crash?")
    root = diagnosis["root_cause"]
    assert root["where"] and root["where"].endswith(f"exception.py:{_fault_line('exception.py')}"), _show(diagnosis)
    assert "KeyError" in root["summary"], _show(diagnosis)
    consequences = {s["category"] for s in diagnosis["symptoms"]}
    assert consequences & {"peer_closed", "collective_timeout", "killed_by_launcher"}, _show(diagnosis)
    assert not any(1 in s["ranks"] for s in diagnosis["symptoms"]), _show(diagnosis)


def test_healthy_job_blames_nobody(jobs: jobkit.JobPool) -> None:
    result = _job(jobs, "healthy")
    from jobs.triage import triage_paths

    for paths in ([result.combined], [result.logdir]):
        diagnosis = triage_paths(paths, "did my job run fine?")
        assert diagnosis is None or diagnosis.root_cause is None, _show(diagnosis.to_json())


CLI_ROWS = [("exception", 1), ("straggler", 1), ("nan", 1)]
TIMEOUT_ADVICE = re.compile(r"(?i)NCCL_TIMEOUT|(?<!DUMP_ON_)timeout\s*=")  # TORCH_NCCL_DUMP_ON_TIMEOUT=1 is a flag, not a duration


@pytest.mark.usefixtures("use_shared_index")
@pytest.mark.parametrize(("job", "rank"), CLI_ROWS)
def test_cli_leads_with_the_root_cause(jobs: jobkit.JobPool, cli: CliRunner, job: str, rank: int) -> None:
    log = str(_job(jobs, job).combined)
    result = cli("ask", "--json", "--no-probes", "--log", log, "why did my distributed job fail?")
    assert result.returncode == 0, result.stderr
    diagnosis = json.loads(result.stdout)["diagnosis"]
    assert diagnosis["root_cause"]["rank"] == rank, _show(diagnosis)

    plain = cli("ask", "--no-probes", "--log", log, "why did my distributed job fail?")
    assert plain.returncode == 0, plain.stderr
    assert "Root cause" in plain.stdout, plain.stdout[:3000]
    before = plain.stdout.split("Root cause", 1)[0]
    assert not TIMEOUT_ADVICE.search(before), plain.stdout[:3000]
    first_fix = re.search(r"(?ms)^\s*Fixes\s*$(.*?)(?=^\s*2\.? |^\s*What not to do\s*$|\Z)", plain.stdout)
    assert not (first_fix and TIMEOUT_ADVICE.search(first_fix.group(1))), plain.stdout[:5000]


# The seed document that describes ranks which do not take part in the same collectives (a collective under
# `if rank == 0`, different code paths, a rank that failed first) and how to find the one that did not.
RANKS_APART = "DDP (分布式) 相关错误"


@pytest.mark.usefixtures("use_shared_index")
@pytest.mark.parametrize(("job", "first"), [("collective_mismatch", True), ("uneven_inputs", True), ("straggler", False)])
def test_a_coordination_failure_is_answered_by_the_section_on_ranks_apart(jobs: jobkit.JobPool, cli: CliRunner,
                                                                          job: str, first: bool) -> None:
    """Retrieval follows the diagnosis, not the loud lines: a mismatch's gloo message quotes no document (it was
    answered "not covered"), a straggler's timeouts alone bring only the timeout sections."""
    result = cli("ask", "--json", "--no-probes", "--log", str(_job(jobs, job).combined), "why did my job fail?")
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    assert not answer["no_match"], _show(answer["diagnosis"])
    assert runbook_of(answer["citations"]) == ("collective_mismatch" if first else "straggler"), answer["citations"]
    sections = [c["section"] for c in documents(answer["citations"])]  # then the documents, as retrieval ranked them
    assert any(RANKS_APART in s for s in (sections[:1] if first else sections[:3])), sections


def test_ranks_that_waited_in_different_places_are_told_apart(jobs: jobkit.JobPool) -> None:
    """Uneven inputs: rank 1 waits in the loop's all_reduce, ranks 0 and 2 in the final barrier. The consequences
    say each place with its own ranks (not "ranks 0, 1 and 2 ... in dist.barrier"), in English and in Chinese."""
    from jobs.triage import triage_paths

    diagnosis = triage_paths([_job(jobs, "uneven_inputs").combined], "why did my job fail?")
    assert diagnosis is not None and diagnosis.root_cause is not None
    waits = {s.summary.split(" timed out")[0]: s.summary for s in diagnosis.symptoms if s.category == "collective_timeout"}
    assert "ranks 0 and 2" in waits and "barrier" in waits["ranks 0 and 2"], _show(diagnosis.to_json())
    assert "rank 1" in waits and "all_reduce" in waits["rank 1"], _show(diagnosis.to_json())
    assert "rank 1's failure" not in diagnosis.why_consequences  # a mismatch: no rank failed first
    # The ranks in the barrier had left their loop: the summary says what that usually means.
    assert "uneven inputs" in diagnosis.root_cause.summary and "输入不均衡" in diagnosis.wording["zh"]["root"]
    chinese = diagnosis.wording["zh"]["symptoms"]
    assert "rank 0 和 2 在 dist.barrier" in chinese and "rank 1 在 dist.all_reduce" in chinese, chinese


def test_a_rank_that_died_without_a_word_is_named_from_its_peers_alone(jobs: jobkit.JobPool) -> None:
    """torchrun's --log-dir holds no exit codes: a segfaulted rank's own files end mid-training and its peers
    lost their connections. The rank is named as one that most likely died, not as a slow one that timed out."""
    diagnosis = _diagnose(_paths(_job(jobs, "segfault"), "logdir"), "why did my job fail?")
    root = diagnosis["root_cause"]
    assert root["rank"] == 2, _show(diagnosis)
    assert "most likely died" in root["summary"] and "timed out" not in root["summary"], root["summary"]
    assert "dist.all_reduce" in root["summary"], root["summary"]  # where the peers lost it


@pytest.mark.usefixtures("use_shared_index")
@pytest.mark.parametrize(("job", "first_fix"), [
    # ranks 0 and 2 in the final barrier while rank 1 is still in the loop's all_reduce: the ranks' batches differ
    ("uneven_inputs", "DistributedSampler(dataset, drop_last=True)"),
    # 40 TB asked of the CPU allocator: no machine has it, the size itself is wrong
    ("oom", "free -b"),
    # a KeyError in collate names no runbook's kind: the exception's own first check is the one fix
    ("exception", "which keys the data or config really has"),
])
def test_the_first_fix_is_the_one_the_jobs_own_lines_call_for(jobs: jobkit.JobPool, cli: CliRunner, job: str,
                                                              first_fix: str) -> None:
    result = cli("ask", "--json", "--no-probes", "--log", str(_job(jobs, job).logdir), "why did my training job fail?")
    assert result.returncode == 0, result.stderr
    verdict = json.loads(result.stdout)["verdict"]
    assert first_fix in verdict["fix"], verdict
