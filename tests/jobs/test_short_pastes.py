"""Short pastes, as users paste them into an issue or a chat: a few lines of a longer log, often cut mid-line, from
many launchers (tests/jobs/data/pastes/, written from the launchers' and libraries' own sources: torchrun's
elastic agent and ChildFailedError table, DeepSpeed's launch.py, srun's and slurmstepd's messages, Lightning's
subprocess launcher, accelerate's CalledProcessError, NCCL's socket.cc/bootstrap.cc/net_socket.cc, gloo's
tcp/device.cc, vLLM's custom_all_reduce.cuh and CudaRTLibrary, TensorRT-LLM's check_cuda_error, argparse).

Each names its root cause's category, the rank and host where the paste shows them, and what the line means; a
launcher's report and reaction alone (its SIGTERMs, "Killing subprocess", srun's task exits, Slurm cancelling the
step) are never read as "every rank timed out": the verdict names the rank the launcher reports and asks for the
lines above the paste.
"""

from __future__ import annotations

import io
import json
import re
from dataclasses import dataclass
from pathlib import Path

import pytest
from clikit import CliRunner

from agent.logs import pasted_job
from jobs.codes import meanings
from jobs.diagnosis import JobDiagnosis
from jobs.reader import read_job
from jobs.signatures import exit_report, exit_shapes, meaning, signatures
from jobs.triage import triage_lines

PASTES = Path(__file__).resolve().parent / "data" / "pastes"
ANY = object()  # the paste names no single rank, or it does not matter here
CONSEQUENCES = {"collective_timeout", "peer_closed", "killed_by_launcher", "process_abort", "launcher_summary"}


@dataclass(frozen=True)
class Paste:
    file: str
    category: str
    says: str  # a regex the root cause's summary matches (what the line means, not only the line)
    rank: object = ANY
    host: str | None | object = ANY
    launcher_only: bool = False  # only the launcher's report and reaction: the cause is above the paste


EXPECTED = (
    # torchrun's failure table: the rank and host from the table, SIGKILL read as the host's OOM killer
    Paste("torchrun_sigkill_cut", "host_oom", r"OOM killer", rank=5, host="gpu-node-2.cluster.local"),
    Paste("srun_torchrun_sigsegv", "native_crash", r"SIGSEGV", rank=10, host="dgx-b07"),
    Paste("torchrun_exit1_summary", "exception", r"first observed failure.*exited with code 1.*above", rank=1,
          host="node-a", launcher_only=True),
    Paste("torchtune_sigabrt", "unknown", r"SIGABRT.*watchdog.*above", rank=3, launcher_only=True),
    # other launchers' reports of an exit
    Paste("lightning_child_sigkill", "host_oom", r"SIGKILL.*OOM killer", rank=1),
    Paste("accelerate_died_sigkill", "host_oom", r"SIGKILL.*OOM killer", rank=None),
    Paste("srun_task_exit", "exception", r"Slurm task 6 on gpu-a17 failed first.*exit(?:ed with)? code 1.*above",
          rank=6, host="gpu-a17", launcher_only=True),
    # a launcher's reaction alone
    Paste("torchrun_sigterm_only", "unknown", r"launcher stopped.*SIGTERM.*above", rank=None, launcher_only=True),
    Paste("deepspeed_killing_subprocess", "exception", r"DeepSpeed launcher.*exited with code 1.*above", rank=None,
          launcher_only=True),
    Paste("slurm_time_limit", "unknown", r"TIME LIMIT.*--time", rank=None, launcher_only=True),
    # network set-up, not a rendezvous wait
    Paste("nccl_bootstrap_no_interface", "network", r"no network interface.*NCCL_SOCKET_IFNAME", rank=0),
    Paste("nccl_socket_warns", "network", r"NCCL_SOCKET_IFNAME", host="gpu-c03"),
    Paste("nccl_socket_creation", "network", r"could not create a socket.*NCCL_SOCKET_FAMILY", host="node7"),
    Paste("gloo_no_address", "network", r"GLOO_SOCKET_IFNAME", rank=1),
    # CUDA errors in the words of libraries built on torch
    Paste("vllm_custom_allreduce_p2p", "cuda_error", r"peer-to-peer.*NCCL_P2P_DISABLE=1.*--disable-custom-all-reduce"),
    Paste("trtllm_peer_access", "cuda_error", r"peer-to-peer"),
    Paste("flash_attn_illegal_access", "cuda_error", r"700 \(cudaErrorIllegalAddress\)", rank=2),
    Paste("flash_attn_checkcuda", "cuda_error", r"CUDA error \(", rank=0),
    # argparse: whose parser, and what to declare
    Paste("launch_local_rank_dash", "bad_arguments", r'--local-rank=N.*"--local-rank", "--local_rank"'),
    Paste("deepspeed_local_rank_underscore", "bad_arguments", r"DeepSpeed.*--no_local_rank"),
    Paste("torchrun_required_args", "bad_arguments", r"launcher's own argparse"),
    Paste("accelerate_invalid_choice", "bad_arguments", r"invalid choice.*argparse", rank=None),
)


def _text(name: str) -> str:
    return (PASTES / f"{name}.log").read_text(encoding="utf-8")


def _triage(text: str) -> JobDiagnosis | None:
    return triage_lines(read_job([Path("-")], io.BytesIO(text.encode("utf-8"))))


def _show(diagnosis: JobDiagnosis | None) -> str:
    return json.dumps(diagnosis.to_json() if diagnosis else None, indent=1)


CUT = {  # pastes that begin or end in the middle of a line, and the fragment that shows it
    "torchrun_sigkill_cut": "me      : 2026-03-02_14:07:51",
    "torchrun_sigterm_only": "ocess 7731 closing signal SIGTERM",
    "nccl_socket_warns": "gpu-c03:2234:22",
    "vllm_custom_allreduce_p2p": "'peer access is not supp",
    "flash_attn_checkcuda": "an illegal memory acc",
}


def test_every_paste_is_short_and_has_a_row() -> None:
    files = sorted(p.stem for p in PASTES.glob("*.log"))
    assert files == sorted(e.file for e in EXPECTED)
    for name in files:
        assert 3 <= len(_text(name).splitlines()) <= 15, name
    for name, fragment in CUT.items():
        lines = _text(name).splitlines()
        assert lines[0].startswith(fragment) or any(line.endswith(fragment) for line in lines), name


@pytest.mark.parametrize("paste", EXPECTED, ids=[e.file for e in EXPECTED])
def test_a_short_paste_names_its_root_cause(paste: Paste) -> None:
    diagnosis = _triage(_text(paste.file))
    assert diagnosis is not None and diagnosis.root_cause is not None, paste.file
    root = diagnosis.root_cause
    assert root.category == paste.category, _show(diagnosis)
    assert root.category not in CONSEQUENCES
    assert re.search(paste.says, root.summary, re.S), root.summary
    if paste.rank is not ANY:
        assert root.rank == paste.rank, _show(diagnosis)
    if paste.host is not ANY:
        assert root.host == paste.host, _show(diagnosis)


@pytest.mark.parametrize("paste", [e for e in EXPECTED if e.launcher_only], ids=lambda e: e.file)
def test_a_launchers_reaction_alone_is_not_called_a_timeout(paste: Paste) -> None:
    diagnosis = _triage(_text(paste.file))
    assert diagnosis is not None and diagnosis.root_cause is not None
    summary = diagnosis.root_cause.summary
    assert not re.search(r"timed out (?:in|waiting)|every rank|none stands out", summary), summary
    assert not any(s.category == "collective_timeout" for s in diagnosis.symptoms), diagnosis.symptoms
    assert "not a timeout" in summary
    assert "above" in diagnosis.next_evidence[0], diagnosis.next_evidence  # what to paste next
    assert diagnosis.wording["zh"]["root"], diagnosis.wording  # a Chinese question gets it in Chinese
    assert pasted_job("why did it fail?\n" + _text(paste.file)) is not None  # read as the job it shows


def test_srun_killing_the_other_tasks_is_no_oom() -> None:
    """srun --kill-on-bad-exit kills the other tasks once one exits with an error: their "Killed" is srun's doing."""
    text = ("srun: error: node01: task 2: Exited with exit code 1\n"
            "srun: error: node01: tasks 0-1,3: Killed\n"
            "srun: Force Terminated StepId=1234.0\n")
    root = _triage(text).root_cause  # type: ignore[union-attr]
    assert root is not None and (root.category, root.rank, root.host) == ("exception", 2, "node01"), root


def test_the_c10d_wrapper_takes_the_meaning_of_the_line_that_names_its_cause() -> None:
    """ncclInvalidUsage is "two ranks on one GPU" unless its "Last error:" says otherwise."""
    diagnosis = _triage(_text("nccl_bootstrap_no_interface"))
    assert diagnosis is not None and diagnosis.root_cause is not None
    assert any("Bootstrap : no socket interface found" in line for line in diagnosis.root_cause.evidence)


@pytest.mark.parametrize(("line", "launcher", "ranks", "code", "host"), [
    ("srun: error: gpu-a17: task 6: Exited with exit code 1", "srun", (6,), 1, "gpu-a17"),
    ("srun: error: gpu[01-02]: tasks 0-2,5: Segmentation fault (core dumped)", "srun", (0, 1, 2, 5), -11, "gpu[01-02]"),
    ("srun: error: node9: task 3: Out Of Memory", "srun", (3,), -9, "node9"),
    ("srun: error: node9: task 3: Exited with exit code 137", "srun", (3,), -9, "node9"),  # 128 + SIGKILL
    ("[rank: 1] Child process with PID 2977 terminated with code -6. Forcefully terminating all other processes",
     "lightning", (1,), -6, None),
    ("subprocess.CalledProcessError: Command '['/usr/bin/python', 'train.py']' returned non-zero exit status 1.",
     "accelerate", (), 1, None),
    ("mpirun noticed that process rank 3 with PID 4242 on node gpu-07 exited on signal 9 (Killed).", "mpirun", (3,), -9,
     "gpu-07"),
    ("torch.multiprocessing.spawn.ProcessExitedException: process 1 terminated with signal SIGSEGV", "spawn", (), -11, None),
    ("failed (exitcode: -9) local_rank: 1 (pid: 123", "torchrun", (), -9, None),  # cut mid-line
    ("] exits with return code = -7", "deepspeed", (), -7, None),
])
def test_launchers_report_exits_in_their_own_words(line: str, launcher: str, ranks: tuple[int, ...], code: int,
                                                     host: str | None) -> None:
    report = exit_report(line)
    assert report is not None and (report.launcher, report.ranks, report.code, report.host) == (launcher, ranks, code, host)


def test_a_ninja_build_failure_is_no_launchers_report() -> None:
    line = "subprocess.CalledProcessError: Command '['ninja', '-v']' returned non-zero exit status 1."
    assert exit_report(line) is None
    found = meaning(line)
    assert found is not None and found.category == "config"


@pytest.mark.parametrize(("line", "code"), [
    ("Failed: Cuda error /workspace/csrc/custom_all_reduce.cuh:336 'peer access is not supported between these two devices'", "217"),
    ("[TensorRT-LLM][ERROR] CUDA runtime error in cudaDeviceEnablePeerAccess(peerDeviceId, 0): peer access is not "
     "supported between these two devices (/src/allreducePlugin.cpp:143)", "217"),
    ("RuntimeError: CUDART error: invalid resource handle", "400"),
    ("CUDA error (/tmp/flash-attention/hopper/flash_fwd_launch_template.h:188): an illegal memory access was encountered", "700"),
    ("Got cudaErrorPeerAccessUnsupported from cudaDeviceEnablePeerAccess", "217"),
])
def test_cuda_codes_are_read_in_the_words_of_libraries_built_on_torch(line: str, code: str) -> None:
    assert [m.code for m in meanings([line])][:1] == [code]
    found = meaning(line)
    assert found is not None and found.category == "cuda_error", found


def test_every_shape_keeps_its_literal() -> None:
    """Each row's literal is the fast prefilter: a line without it is never matched by the row."""
    for row in [*signatures(), *exit_shapes()]:
        assert row.literal and row.literal.strip(), row


@pytest.mark.usefixtures("use_shared_index")
def test_cli_names_the_cause_of_a_pasted_cut_table(cli: CliRunner) -> None:
    """End to end: torchrun's failure table, its header cut off, pasted as the question."""
    result = cli("ask", "--json", "--no-probes", "why did my 8-GPU job on two nodes die?\n" + _text("torchrun_sigkill_cut"))
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    root = answer["diagnosis"]["root_cause"]
    assert (root["category"], root["rank"], root["host"]) == ("host_oom", 5, "gpu-node-2.cluster.local"), root
    assert "OOM killer" in root["summary"]
    assert "OOM killer" in answer["answer"] and "rank 5" in answer["answer"], answer["answer"][:600]


@pytest.mark.usefixtures("use_shared_index")
@pytest.mark.parametrize("paste", ["torchrun_sigterm_only.log", "deepspeed_killing_subprocess.log", "slurm_time_limit.log"])
def test_a_launchers_reaction_alone_is_not_answered_as_a_timeout(cli, paste: str) -> None:
    """Only the launcher stopping its ranks is pasted: the answer asks for the lines above, and no timeout runbook
    (with its "raise the timeout") leads it."""
    text = (PASTES / paste).read_text(encoding="utf-8")
    result = cli("ask", "--json", "--no-probes", f"my job died, what happened?\n{text}")
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    first = answer["citations"][0]["source"] if answer["citations"] else ""
    assert not first.endswith("collective_timeout.md"), answer["citations"]
    assert "timeout=datetime.timedelta" not in answer["answer"], answer["answer"][:3000]


@pytest.mark.usefixtures("use_shared_index")
@pytest.mark.parametrize(("paste", "category", "runbook"), [
    ("nccl_socket_warns.log", "network", "nccl_interface.md"),
    ("torchrun_required_args.log", "bad_arguments", "bad_arguments.md"),
    ("vllm_custom_allreduce_p2p.log", "cuda_error", None),
])
def test_a_root_cause_of_a_named_kind_is_diagnosed_even_with_nothing_after_it(cli, paste: str, category: str,
                                                                              runbook: str | None) -> None:
    text = (PASTES / paste).read_text(encoding="utf-8")
    answer = json.loads(cli("ask", "--json", "--no-probes", f"what is wrong?\n{text}").stdout)
    assert answer["diagnosis"] is not None and answer["diagnosis"]["root_cause"]["category"] == category, answer["diagnosis"]
    if runbook is not None:
        assert answer["citations"][0]["source"].endswith(runbook), answer["citations"]
