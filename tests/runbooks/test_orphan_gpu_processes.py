"""GPU memory held by leftovers of an earlier run is its own kind (runbook orphan_gpu_processes), told apart from a
plain CUDA OOM by what only it shows: nvidia-smi's "No running processes found" beside memory in use, zombie or
defunct entries, a killed run whose memory stays. A plain OOM, a port still held by a leftover launcher and a GPU
hardware fault keep their own runbooks. What the runbook says of torchrun is reproduced on the CPU: a launcher
killed with SIGKILL leaves its rank running in a session of its own, a signal to the rank's process group stops it
and its children, and SIGTERM to a live launcher stops every rank."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from runbook_messages import assert_a_line_per_message, assert_picks

from agent.leads import LeadEvidence, decide
from runbooks.choose import related_kinds
from runbooks.registry import kinds, signalled

KIND = "orphan_gpu_processes"

# One real-shaped line per message in the runbook's front matter (the same order).
LINES = [
    "RuntimeError: CUDA error: CUDA-capable device(s) is/are busy or unavailable",
    "|  No running processes found                                                             |",
    " 184470  184467  184467 Z          00:00 [python] <defunct>",
]

PLAIN_OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
             "79.11 GiB of which 1.10 GiB is free. Including non-PyTorch memory, this process has 77.90 GiB memory in "
             "use. Of the allocated memory 75.20 GiB is allocated by PyTorch, and 1.20 GiB is reserved by PyTorch but "
             "unallocated.")

NEIGHBOURS = {
    "cuda_oom": PLAIN_OOM,
    "port_in_use": "RuntimeError: The server socket has failed to listen on any local network address. port: 29500, "
                   "useIpv6: false, code: -98, name: EADDRINUSE, message: address already in use",
    "gpu_hardware_fault": "NVRM: Xid (PCI:0000:18:00): 79, pid=4242, name=python, GPU has fallen off the bus.",
}

REPORTS = [  # the report's own words beside nvidia-smi's line: the signal that names this kind
    "nvidia-smi shows 71245MiB / 81559MiB used but No running processes found after I killed my previous run",
    "容器里 nvidia-smi 显示显存被占满，No running processes found，新任务一启动就 OOM",
    "上次训练被 kill 之后显存一直被占，nvidia-smi 显示 No running processes found",
    "GPU memory is still used after the job crashed; ps shows [python] <defunct>",
]


def test_every_message_has_a_line_here_and_both_languages_list_the_same_ones() -> None:
    assert_a_line_per_message(KIND, LINES)


@pytest.mark.parametrize("line", LINES)
def test_each_line_alone_points_at_the_runbook(line: str) -> None:
    assert_picks(KIND, [line])


def test_nvidia_smi_s_empty_table_needs_the_kind_s_signal_and_the_busy_error_does_not() -> None:
    assert kinds()[KIND].generic == {"No running processes found"}  # an idle GPU prints the same table
    assert decide(LeadEvidence(LINES[1], None, [LINES[1]], "en")) is None
    busy = decide(LeadEvidence(LINES[0], None, [LINES[0]], "en"))  # another process holds a GPU in Exclusive_Process mode
    assert busy is not None and busy.kind == KIND and busy.rule == "quoted", busy


@pytest.mark.parametrize("report", REPORTS)
def test_a_report_with_the_kind_s_signal_leads_with_it(report: str) -> None:
    lead = decide(LeadEvidence(report, None, [], "en"))
    assert lead is not None and lead.kind == KIND and lead.rule == "quoted", lead


@pytest.mark.parametrize(("kind", "line"), NEIGHBOURS.items())
def test_a_neighbouring_failure_keeps_its_own_runbook(kind: str, line: str) -> None:
    lead = decide(LeadEvidence(line, None, [line], "en"))
    assert lead is not None and lead.kind == kind, (line, lead)


def test_a_plain_cuda_oom_shows_no_signal_of_this_kind() -> None:
    assert signalled(KIND, PLAIN_OOM) is None
    assert signalled(KIND, "CUDA out of memory with batch size 1 on an A100, what should I lower?") is None
    # the same failure family: this runbook's sections are read beside cuda_oom's
    assert KIND in related_kinds("cuda_oom")


# --- torchrun's leftovers, on the CPU ------------------------------------------------------------------------------

_RANK = textwrap.dedent("""
    import multiprocessing as mp, os, sys, time

    def child():
        time.sleep(300)

    if __name__ == "__main__":
        c = mp.get_context("fork").Process(target=child)
        c.start()
        with open(sys.argv[1] + ".tmp", "w") as out:
            out.write(f"{os.getpid()} {os.getpgid(0)} {c.pid}")
        os.replace(sys.argv[1] + ".tmp", sys.argv[1])
        time.sleep(300)
""")


def _gone(pid: int) -> bool:
    """No process, or a zombie (it has exited: nothing it held is held any more)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat[stat.rfind(")") + 2] == "Z"


def _wait(check, seconds: float) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if check():
            return True
        time.sleep(0.2)
    return check()


@pytest.fixture
def torchrun_job(tmp_path: Path):
    """Start torchrun with one rank that forks a child; yield (torchrun, rank pid, rank pgid, child pid)."""
    pytest.importorskip("torch")
    if not sys.platform.startswith("linux"):
        pytest.skip("sessions and /proc: Linux")
    script, info = tmp_path / "rank.py", tmp_path / "rank.txt"
    script.write_text(_RANK, encoding="utf-8")
    launcher = subprocess.Popen(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=1", str(script), str(info)],
        cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    pids: list[int] = []
    try:
        assert _wait(info.exists, 120), "the rank did not start"
        pids = [int(n) for n in info.read_text().split()]
        yield launcher, *pids
    finally:
        for pid in [launcher.pid, *pids]:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        launcher.wait(timeout=30)


def test_a_launcher_killed_with_sigkill_leaves_its_rank_and_the_rank_s_group_signal_stops_both(torchrun_job) -> None:
    launcher, rank, pgid, child = torchrun_job
    assert pgid == rank and os.getsid(rank) == rank  # each rank leads a session and a process group of its own
    os.kill(launcher.pid, signal.SIGKILL)
    launcher.wait(timeout=30)
    time.sleep(1)
    assert not _gone(rank) and not _gone(child)  # the leftovers: nothing passed the signal on
    if shutil.which("ps"):
        row = subprocess.run(["ps", "-o", "pid=,ppid=,pgid=", "-p", str(rank)], capture_output=True, text=True).stdout
        pid, ppid, group = (int(n) for n in row.split())
        assert pid == group == rank and ppid != launcher.pid  # what check 2 shows: adopted, its own group leader
    os.killpg(pgid, signal.SIGTERM)  # fix 1: kill -TERM -- -<PGID>
    assert _wait(lambda: _gone(rank) and _gone(child), 30)


def test_sigterm_to_a_live_launcher_stops_every_rank_and_its_children(torchrun_job) -> None:
    launcher, rank, _pgid, child = torchrun_job
    os.kill(launcher.pid, signal.SIGTERM)  # fix 2
    launcher.wait(timeout=60)
    assert _wait(lambda: _gone(rank) and _gone(child), 30)


@pytest.mark.parametrize("said", [
    "将后台任务杀掉之后gpu并没有得到释放",  # memory not freed after the job was killed, as askers write it
    "我就去kill所有进程，接着查看我的gpu发现还在被占用",
])
def test_memory_held_after_a_kill_said_in_chinese_is_this_kind_s_signal(said: str) -> None:
    assert signalled(KIND, said)
    assert signalled(KIND, "显存不够，batch size 已经是 1 了") is None
