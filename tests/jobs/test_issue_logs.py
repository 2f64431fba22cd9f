"""Real logs of failed DeepSpeed / NCCL jobs that users pasted in public GitHub issues (tests/jobs/data/ds-issues/):
the triage names the failure the thread established, on the rank or node the log shows, and never a consequence
(the launcher's "Killing subprocess", SIGTERM, timeouts, its failure summary). The README there gives each
file's source and root cause.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import pytest
from clikit import CliRunner

from jobs.diagnosis import JobDiagnosis
from jobs.lines import parse_line
from jobs.triage import triage_paths

DATA = Path(__file__).resolve().parent / "data" / "ds-issues"
QUESTION = "why did my deepspeed training job fail?"
CONSEQUENCES = {"collective_timeout", "peer_closed", "killed_by_launcher", "process_abort", "launcher_summary"}
ANY = object()  # the log does not say which rank


@dataclass(frozen=True)
class Expect:
    log: str
    category: str
    says: str  # a regex the root cause's summary matches
    rank: object = ANY
    host: str | None = None


EXPECTED = (
    Expect("fp16_loss_scale_min", "nan", r"Current loss scale already at minimum"),
    Expect("jit_fused_adam", "config", r"ninja", rank=1),
    Expect("nccl_cuda_init_node", "cuda_error", r"ncclUnhandledCudaError|Cuda failure", rank=None,
           host="rdma-test-gpu-worker-1"),
    Expect("ckpt_invalid_resume", "checkpoint", r"Can't find a valid checkpoint"),
    Expect("batch_assert_prefixed", "config", r"train_batch_size is not equal to micro_batch_per_gpu", rank=0),
    Expect("batch_assert_rich", "config", r"AssertionError: Check batch related parameters"),
    Expect("oom_killer_dmesg", "host_oom", r"Out of memory: Killed process 410126"),
    Expect("oom_sigkill_minus9", "host_oom", r"SIGKILL.*OOM killer", rank=None),
    Expect("cuda_oom_multinode", "oom", r"CUDA out of memory", rank=15),
    Expect("cuda_802_b200", "cuda_error", r"ncclUnhandledCudaError|802"),
    Expect("nccl_shm_no_space", "config", r"Error while creating shared memory segment"),
)


def _show(diagnosis: JobDiagnosis | dict | None) -> str:
    data = diagnosis.to_json() if isinstance(diagnosis, JobDiagnosis) else diagnosis
    return json.dumps(data, indent=1, default=str)[:4000]


def test_every_log_has_a_row_and_a_source() -> None:
    logs = {p.stem for p in DATA.glob("*.log")}
    assert logs == {e.log for e in EXPECTED}
    readme = (DATA / "README.md").read_text(encoding="utf-8")
    for log in logs:
        row = next((line for line in readme.splitlines() if line.startswith(f"| `{log}.log`")), "")
        assert re.search(r"https://github\.com/[\w.-]+/[\w.-]+/issues/\d+", row), log


def test_no_source_is_an_eval_case() -> None:
    dev = Path(__file__).resolve().parents[2].parent / "shared" / "eval" / "dev.jsonl"
    if not dev.exists():
        pytest.skip("no shared eval set here")
    sources = {json.loads(line).get("source") for line in dev.read_text(encoding="utf-8").splitlines() if line.strip()}
    ours = set(re.findall(r"https://github\.com/\S+?/issues/\d+", (DATA / "README.md").read_text(encoding="utf-8")))
    assert not ours & sources


@pytest.mark.parametrize("expect", EXPECTED, ids=[e.log for e in EXPECTED])
def test_triage_names_the_root_cause(expect: Expect) -> None:
    diagnosis = triage_paths([DATA / f"{expect.log}.log"], QUESTION)
    assert diagnosis is not None and diagnosis.root_cause is not None, expect.log
    root = diagnosis.root_cause
    assert root.category == expect.category, _show(diagnosis)
    assert root.category not in CONSEQUENCES
    assert re.search(expect.says, root.summary), _show(diagnosis)
    if expect.rank is not ANY:
        assert root.rank == expect.rank, _show(diagnosis)
    if expect.host is not None:
        assert root.host == expect.host, _show(diagnosis)
    for line in root.evidence[:1]:
        assert not re.search(r"Killing subprocess|SIGTERM|ChildFailedError|Watchdog caught", line), _show(diagnosis)


def test_deepspeed_launcher_kills_are_consequences() -> None:
    """DeepSpeed's launcher prints "Killing subprocess N" for every rank once one failed: symptoms, never the cause."""
    diagnosis = triage_paths([DATA / "fp16_loss_scale_min.log"], QUESTION)
    assert diagnosis is not None
    assert "killed_by_launcher" in {s.category for s in diagnosis.symptoms}, _show(diagnosis)


def test_launcher_return_code_is_read_without_a_rank() -> None:
    """`[...'--local_rank=1'...] exits with return code = -9`: launch.py prints the last command it started, not the
    failed rank's, so the code counts (SIGKILL: the OOM killer, most often) and the rank it names does not."""
    diagnosis = triage_paths([DATA / "oom_sigkill_minus9.log"], QUESTION)
    assert diagnosis is not None and diagnosis.root_cause is not None
    assert diagnosis.root_cause.rank is None and "exitcode -9" in diagnosis.root_cause.evidence[0], _show(diagnosis)


@pytest.mark.parametrize(
    ("raw", "host", "text"),
    [
        ('rdma-test-gpu-worker-1:   File "/src/train_bash.py", line 14, in <module>', "rdma-test-gpu-worker-1",
         '  File "/src/train_bash.py", line 14, in <module>'),
        ("rdma-test-gpu-worker-1: ", "rdma-test-gpu-worker-1", ""),
        ("node-7:2874:7128 [3] include/shm.h:48 NCCL WARN Error while creating shared memory segment", "node-7",
         "NCCL WARN Error while creating shared memory segment"),
        ("host-a:2921:2921 [7] misc/cudawrap.cc:33 NCCL WARN Cuda failure 'initialization error'", "host-a",
         "NCCL WARN Cuda failure 'initialization error'"),
    ],
)
def test_pdsh_and_nccl_prefixes(raw: str, host: str, text: str) -> None:
    line = parse_line(raw, "x", 1)
    assert (line.host, line.text) == (host, text)


CLI_ROWS = [e for e in EXPECTED if e.log in ("oom_sigkill_minus9", "jit_fused_adam", "nccl_cuda_init_node")]


@pytest.mark.usefixtures("use_shared_index")
@pytest.mark.parametrize("expect", CLI_ROWS, ids=[e.log for e in CLI_ROWS])
def test_cli_leads_with_the_root_cause(cli: CliRunner, expect: Expect) -> None:
    result = cli("ask", "--json", "--no-probes", "--log", str(DATA / f"{expect.log}.log"), QUESTION)
    assert result.returncode == 0, result.stderr
    root = json.loads(result.stdout)["diagnosis"]["root_cause"]
    assert root["category"] == expect.category, _show(root)
    if expect.rank is not ANY:
        assert root["rank"] == expect.rank, _show(root)


GPU_MEMORY = ("显存", "CUDA out of memory", "GPU内存")


@pytest.mark.usefixtures("use_shared_index")
@pytest.mark.parametrize("log", ["oom_sigkill_minus9", "oom_killer_dmesg"])
def test_the_hosts_ram_running_out_is_not_answered_by_a_gpu_memory_section(cli: CliRunner, log: str) -> None:
    """Host RAM and a GPU's memory share every word ("memory", "OOM", "killed"): the GPU sections' fixes (CPU
    offload among them) would make a host OOM worse. Only a section quoting the host's own signal answers."""
    answer = json.loads(cli("ask", "--json", "--no-probes", "--log", str(DATA / f"{log}.log"), QUESTION).stdout)
    assert answer["diagnosis"]["root_cause"]["category"] == "host_oom"
    checks = answer["diagnosis"]["next_evidence"]  # what to look at on the machine, since no section answers
    assert any("dmesg" in c for c in checks) and any("memory.max" in c for c in checks), checks
    cited = [c["section"] for c in answer["citations"]]
    assert not any(word in section for section in cited for word in GPU_MEMORY), cited


@pytest.mark.usefixtures("use_shared_index")
def test_cuda_that_could_not_start_on_one_node_is_that_nodes_fault(cli: CliRunner) -> None:
    """NCCL's 'Cuda failure 'initialization error'' on worker-1: CUDA itself could not start there. The runbook on
    CUDA start-up leads (not a section about Blackwell wheels), with its fix for one node's driver or container first."""
    answer = json.loads(cli("ask", "--json", "--no-probes", "--log", str(DATA / "nccl_cuda_init_node.log"), QUESTION).stdout)
    assert (answer["lead"] or {}).get("kind") == "cuda_init_error", answer["lead"]
    assert "initialization error" in answer["verdict"]["fix"] and "node" in answer["verdict"]["fix"], answer["verdict"]
