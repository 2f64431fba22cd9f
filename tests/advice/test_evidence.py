"""Evidence read right: a source location is never a port, a well-known error code means what NVIDIA documents, and
an error message that goes on below its own line ("Error(s) in loading state_dict for X:") keeps those lines."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.diagnose import job_python, ports_in
from jobs.codes import meanings
from jobs.triage import triage_paths

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("text", "ports"), [
    ("[rank0]:[E ProcessGroupNCCL.cpp:2271] Timeout at NCCL work: 1858", (29500,)),
    ('File "train.py", line 1858 in main; gloo/transport/tcp/pair.cc:537', (29500,)),
    ("The server socket has failed to listen on any local network address. port: 29501", (29501, 29500)),
    ("connect to 10.0.0.2:23456 failed; node-1.cluster:29400 too", (23456, 29400, 29500)),
    ("--master_port=29600", (29600, 29500)),
])
def test_ports_are_read_only_where_a_port_is_named(text: str, ports: tuple[int, ...]) -> None:
    assert ports_in(text, {}) == ports


def test_master_port_replaces_the_default() -> None:
    assert ports_in("torchrun failed", {"MASTER_PORT": "12355"}) == (12355,)


def test_error_codes_mean_what_nvidia_documents() -> None:
    lines = ["misc/cudawrap.cc:123 NCCL WARN Cuda failure 802 'system not yet initialized'",
             "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled cuda error",
             "[ 1234.5678] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus."]
    found = meanings(lines)
    assert [(m.family, m.code) for m in found] == [("xid", "79"), ("cuda_error", "802"), ("nccl_result", "1")]
    assert "Fabric Manager" in found[1].meaning["en"] and found[1].name == "cudaErrorSystemNotReady"
    assert meanings(["[E ProcessGroupNCCL.cpp:2271] Timeout at NCCL work: 1858", 'File "x.py", line 802']) == []


def test_a_message_that_continues_below_keeps_its_lines(tmp_path: Path) -> None:
    log = tmp_path / "load.log"
    log.write_text('RuntimeError: Error(s) in loading state_dict for Net:\n\tMissing key(s) in state_dict: "fc.weight".\n'
                   '\tUnexpected key(s) in state_dict: "_fsdp_wrapped_module.fc.weight".\n', encoding="utf-8")
    diagnosis = triage_paths([log], "why?")
    assert diagnosis is not None and diagnosis.root_cause is not None
    assert any("_fsdp_wrapped_module.fc.weight" in line for line in diagnosis.root_cause.evidence), diagnosis.root_cause


def test_the_jobs_interpreter_is_read_from_its_traceback(tmp_path: Path) -> None:
    site = ROOT / ".venv" / "lib" / "python3.11" / "site-packages" / "torch" / "__init__.py"
    log = tmp_path / "rank0.log"
    log.write_text(f'  File "{site}", line 1, in <module>\n', encoding="utf-8")
    assert job_python([log]) == str(ROOT / ".venv" / "bin" / "python")
    log.write_text('  File "/no/such/env/lib/python3.10/site-packages/torch/__init__.py", line 1\n', encoding="utf-8")
    assert job_python([log]) is None  # an interpreter that does not exist here is not probed


def test_the_error_lines_quoted_back_are_the_pasted_ones() -> None:
    from corpus.errorlines import error_lines, pasted_first

    question = ("deepspeed 一直在等，最后启动失败，日志停在：\n"
                "[2024-05-01 10:00:00,123] [INFO] [comm.py:637:init_distributed] Initializing TorchBackend\n"
                "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled system error\n")
    assert pasted_first(error_lines(question.splitlines())) == [
        "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled system error"]
    prose_only = ["my job failed with an error, why?"]
    assert pasted_first(prose_only) == prose_only  # nothing pasted: the person's words are all there is


def test_the_interpreter_of_the_one_running_job_is_probed(tmp_path: Path) -> None:
    """A real process a launcher would have started (RANK/LOCAL_RANK in its environment, the venv's python as its
    argv[0]); it is stopped by its process group whatever happens."""
    import os
    import signal
    import subprocess
    import time

    from agent.diagnose import running_job_python

    python = ROOT / ".venv" / "bin" / "python"
    env = {"PATH": os.environ.get("PATH", ""), "RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1",
           "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29511", "TORCHELASTIC_RUN_ID": f"probe-{os.getpid()}"}
    rank = subprocess.Popen([str(python), "-c", "import time; time.sleep(60)"], env=env, cwd=tmp_path,
                            start_new_session=True, stdin=subprocess.DEVNULL)
    # The process table as this test's own: /proc's entry of its rank alone (other tests of a parallel run start
    # real torchrun jobs of their own, and several jobs name no interpreter).
    own = tmp_path / "proc"
    own.mkdir()
    (own / str(rank.pid)).symlink_to(Path("/proc") / str(rank.pid))
    try:
        deadline = time.monotonic() + 10
        found = None
        while time.monotonic() < deadline and found is None:
            found = running_job_python(own)
            time.sleep(0.2)
        assert found == str(python)
    finally:
        os.killpg(rank.pid, signal.SIGKILL)
        rank.wait()
    assert running_job_python(own) is None  # no job running: nothing is guessed from it
