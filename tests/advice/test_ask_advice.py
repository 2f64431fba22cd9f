"""What a user pastes from an answer, run as a user would (`ask`, `traindoc index`): no wrong or harmful command
in any code block, evidence before a generic section (a CPU-only torch, an error code's meaning), no source line
number read as a port, and a team document's invented names flagged when it is indexed and when it is shown."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from clikit import ROOT, CliRunner

FENCED = re.compile(r"```[^\n]*\n(.*?)```", re.S)
NEVER_IN_CODE = re.compile(r"NCCL_TIMEOUT=|NCCL_BACKEND=|NCCL_SOCKET_IFNAME=lo\b|pkill\b|killall\b|xargs\s+kill|"
                           r"fuser\s+-k|^\s*export\s+(?:RANK|WORLD_SIZE)=", re.M)
QUESTIONS = [
    "NCCL timeout during training, how do I fix it?",
    "DeepSpeed is stuck at initialization",
    "训练卡住了怎么办",
    "torchrun fails: address already in use on port 29500",
    "NCCL 超时怎么办",
    "my distributed training hangs, how do I kill it and restart?",
]


def _ask(cli: CliRunner, *args: str) -> dict:
    result = cli("ask", "--json", *args)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.mark.usefixtures("use_shared_index")
@pytest.mark.parametrize("question", QUESTIONS)
def test_no_answer_puts_a_wrong_or_harmful_command_in_code(cli: CliRunner, question: str) -> None:
    answer = _ask(cli, "--no-probes", question)
    code = "\n".join(FENCED.findall(answer["answer"]))
    assert not NEVER_IN_CODE.search(code), (question, NEVER_IN_CODE.search(code), answer["answer"][:4000])
    for flag in answer["advice"]:  # what was corrected is listed with its reason and source
        assert flag["verdict"] and flag["reason"] and flag["citation"] >= 1, flag


@pytest.mark.usefixtures("use_shared_index")
def test_the_json_lists_what_was_corrected(cli: CliRunner) -> None:
    answer = _ask(cli, "--no-probes", "export NCCL_TIMEOUT=1800 did not help, NCCL still times out with DeepSpeed")
    shown = {f["id"] for f in answer["advice"]}
    assert answer["advice"], answer["answer"][:3000]
    assert all(f["sources"] or f["verdict"] in ("unverifiable", "unknown", "project") for f in answer["advice"]), shown


@pytest.mark.usefixtures("use_shared_index")
def test_a_source_line_number_is_never_read_as_a_port(cli: CliRunner, tmp_path: Path) -> None:
    log = tmp_path / "rank0.log"
    log.write_text("[rank0]:[E ProcessGroupNCCL.cpp:2271] [PG 0 Rank 0] Timeout at NCCL work: 1858, last enqueued\n"
                   "RuntimeError: ProcessGroupNCCL.cpp:1858 watchdog thread terminated with exception\n", encoding="utf-8")
    answer = _ask(cli, "--log", str(log), "my job hangs, is the port in use?")
    ports = [f for f in answer["findings"] if f["probe"] == "port_check"]
    assert ports, answer["findings"]
    said = " ".join(f["summary"] + " " + f["evidence"] for f in ports)
    assert "2271" not in said and "1858" not in said and "29500" in said, said


@pytest.mark.usefixtures("use_shared_index")
def test_a_cpu_only_torch_leads_the_answer_to_cuda_unavailable(cli: CliRunner) -> None:
    """The job's interpreter (this venv's torch 2.13.0+cpu, no NVIDIA driver here): that is why CUDA is unavailable."""
    answer = _ask(cli, "--python", str(ROOT / ".venv" / "bin" / "python"),
                  "torch.cuda.is_available() returns False inside my docker container")
    problems = [f for f in answer["findings"] if f["status"] == "problem"]
    assert any(f["code"] == "TORCH_CPU_ONLY" for f in problems), answer["findings"]
    verdict, detail = answer["answer"].split("\n### ", 1)  # the verdict first (agent.summary), then the detail
    assert "CPU-only" in verdict and "the probes measured it" in verdict, verdict
    first_heading = detail.splitlines()[0]
    assert "Probe" in first_heading or "probe" in first_heading, answer["answer"][:1500]
    assert "CPU-only" in detail.split("###", 1)[0], answer["answer"][:1500]
    # the probe is the verdict; what may follow it is the runbook about that very problem, never a seed section
    assert not answer["citations"] or answer["citations"][0]["source"] == "corpus/runbooks/en/gpu_not_usable.md", \
        answer["citations"][:2]
    assert any(f["explains"] for f in problems), problems


@pytest.mark.usefixtures("use_shared_index")
def test_an_error_code_is_explained_and_not_answered_as_blackwell(cli: CliRunner) -> None:
    log = ROOT / "tests" / "jobs" / "data" / "ds-issues" / "cuda_802_b200.log"
    answer = _ask(cli, "--no-probes", "--log", str(log), "why did my job fail?")
    text = answer["answer"]
    assert "cudaErrorSystemNotReady" in text and "fabricmanager" in text.replace("-", "").lower(), text[:3000]
    fixes = text.split("Fixes", 1)[-1]
    assert "sm_120" not in fixes and "cu128" not in fixes, fixes[:2000]


def test_a_team_documents_flagged_names_are_reported_when_indexed_and_shown(cli: CliRunner, index_copy: Path,
                                                                          tmp_path: Path) -> None:
    team = tmp_path / "team"
    team.mkdir()
    (team / "nccl-notes.md").write_text(
        "# Cluster NCCL notes\n\n## All-reduce hangs on the new InfiniBand nodes\n\nWhen all-reduce hangs on the "
        "new nodes, set these before torchrun:\n\n```bash\nexport NCCL_FAST_RING_MODE=1\n"
        "export TORCH_NCCL_TRACE_BUFFER_SIZE=2000\nexport NCCL_DEBUG=INFO\n```\n", encoding="utf-8")
    indexed = cli("traindoc", "index", str(team))
    assert indexed.returncode == 0, indexed.stderr
    assert "NCCL_FAST_RING_MODE" in indexed.stderr and "unknown" in indexed.stderr, indexed.stderr
    assert "TORCH_NCCL_TRACE_BUFFER_SIZE" in indexed.stderr and "deprecated" in indexed.stderr, indexed.stderr
    assert "NCCL_DEBUG`" not in indexed.stderr
    answer = _ask(cli, "--no-probes", "all-reduce hangs on the new InfiniBand nodes, what should I set before torchrun?")
    flagged = {f["id"]: f["verdict"] for f in answer["advice"]}
    if any("nccl-notes" in c["source"] for c in answer["citations"]):
        assert flagged.get("NCCL_FAST_RING_MODE") == "unknown", answer["advice"]


@pytest.mark.usefixtures("use_shared_index")
def test_the_interpreter_probed_is_the_one_the_logs_traceback_ran_in(cli: CliRunner, tmp_path: Path) -> None:
    site = ROOT / ".venv" / "lib" / "python3.11" / "site-packages" / "torch" / "cuda" / "__init__.py"
    log = tmp_path / "train.log"
    log.write_text(f'Traceback (most recent call last):\n  File "{site}", line 412, in _lazy_init\n'
                   "    torch._C._cuda_init()\nRuntimeError: No CUDA GPUs are available\n", encoding="utf-8")
    answer = _ask(cli, "--log", str(log), "torch.cuda.is_available() returns False in my job")
    compat = [f for f in answer["findings"] if f["probe"] == "torch_cuda_compat"]
    assert any(f["code"] == "TORCH_CPU_ONLY" and f["status"] == "problem" for f in compat), compat


@pytest.mark.usefixtures("use_shared_index")
def test_a_guessed_interpreter_is_named_and_does_not_lead(cli: CliRunner) -> None:
    """No --python, no log, no conda or venv: the first python on PATH is only a guess at the job's."""
    from jobs.procs import find_jobs

    if any(job.workers for job in find_jobs(timeout_s=1.0)):  # another test's torchrun job, in a parallel run
        pytest.skip("a training job runs on this machine: its interpreter, not a guess, would be probed")
    result = cli("ask", "--json", "torch.cuda.is_available() returns False", env={"VIRTUAL_ENV": "", "CONDA_PREFIX": ""})
    if any(job.workers for job in find_jobs(timeout_s=1.0)):
        pytest.skip("a training job started on this machine meanwhile: its interpreter, not a guess, was probed")
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    compat = [f for f in answer["findings"] if f["probe"] == "torch_cuda_compat"]
    assert compat and all(f["status"] != "problem" for f in compat), compat
    assert any("first python on PATH" in f["summary"] for f in compat) or any(f["status"] == "unavailable" for f in compat)


@pytest.mark.usefixtures("use_shared_index")
def test_a_runbook_answer_cites_no_document_section_about_another_failure(cli: CliRunner) -> None:
    """A bf16 error is answered by its runbook; the seed sections about a CUDA arch mismatch read alike (a GPU, a
    PyTorch version) but are about another failure: they are not cited after it. A JAX job's NCCL interface error
    is answered from the documents: JAX named in the prose is no veto."""
    answer = _ask(cli, "--no-probes", "ValueError: Your setup doesn't support bf16/gpu. You need torch>=1.10, "
                  "using Ampere GPU with cuda>=11.0")
    assert Path(answer["citations"][0]["source"]).name == "bf16_unsupported.md", answer["citations"]
    assert not any("CUDA兼容性问题" in c["section"] for c in answer["citations"]), answer["citations"]
    jax = _ask(cli, "--no-probes", "Multi-node training with JAX fails on the second node\n"
               "NCCL WARN Bootstrap : no socket interface found")
    seeds = [c for c in jax["citations"] if re.match(r"00\d_", Path(c["source"]).name)]
    assert not jax["no_match"] and seeds, jax["citations"]
