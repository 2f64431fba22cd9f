"""`traindoc check` as a user runs it: the installed command, real processes, its JSON, Ctrl-C, the job's log as the
source of its settings, the multi-node commands, and bad input in one line."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
from pathlib import Path

import pytest
from checkkit import WAIT_S, processes_holding, wait_for
from clikit import BIN, ROOT

from checks import collectives


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NCCL_", "GLOO_", "TORCH_NCCL_"))
           and k != collectives.FAULT_VARIABLE}
    env.update(extra)
    return env


def test_json_output_of_a_healthy_run(cli) -> None:
    result = cli("traindoc", "check", "nccl", "--json", "--sizes", "1K,64K", "--iters", "2", env=_clean_env(),
                 timeout=WAIT_S * 2)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["passed"] is True and data["backend"] == "gloo" and data["world"] == 2
    assert data["outcome"]["kind"] is None and "every operation completed" in data["outcome"]["message"]
    assert [(o["op"], o["bytes"], o["status"]) for o in data["ops"]][:3] == [("barrier", 0, "done"),
                                                                            ("all_reduce", 1024, "done"),
                                                                            ("all_reduce", 65536, "done")]
    assert all(o["busbw_gbps"] is not None for o in data["ops"])
    assert [r["rank"] for r in data["ranks"]] == [0, 1] and all(r["pid"] for r in data["ranks"])
    assert "starts one torchrun job" in result.stderr  # what it starts is said first, on stderr beside --json
    assert processes_holding(data["run_id"]) == []


def test_the_job_logs_variables_are_used_and_a_wrong_interface_is_named(cli, tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_text("node1:123:456 [0] NCCL INFO NCCL_DEBUG set by environment to INFO.\n"
                   "+ export GLOO_SOCKET_IFNAME=nosuch0\n"
                   "[rank0]: RuntimeError: something later\n")
    result = cli("traindoc", "check", "nccl", "--log", str(log), "--sizes", "1K", "--timeout", "20",
                 env=_clean_env(), timeout=WAIT_S * 2)
    assert result.returncode == 1, result.stderr
    out = result.stdout
    assert f"GLOO_SOCKET_IFNAME=nosuch0 ({log})" in out and f"NCCL_DEBUG=INFO ({log})" in out
    assert "FAIL: GLOO_SOCKET_IFNAME=nosuch0 matches no network interface here" in out
    assert "kind: nccl_interface: NCCL or gloo finds no usable network interface" in out


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 130), (signal.SIGKILL, -9)],
                         ids=["ctrl-c", "sigterm", "traindoc-killed"])
def test_an_interrupted_check_leaves_no_process(sig: int, code: int) -> None:
    """Ctrl-C and SIGTERM: traindoc stops everything it started. SIGKILL to traindoc itself: its workers see it gone
    and exit, and torchrun with them."""
    # rank 1 stops answering (the test hook), so the check is still running when the signal comes
    env = _clean_env(**{collectives.FAULT_VARIABLE: "hang:rank=1:op=all_reduce"})
    check = subprocess.Popen([str(BIN / "traindoc"), "check", "nccl", "--timeout", "300"], cwd=ROOT, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        command = ""
        while "command:" not in command:
            command = check.stdout.readline()  # type: ignore[union-attr]
            assert command, check.stderr.read()  # type: ignore[union-attr]
        folder = shlex.split(command.split("command:", 1)[1])[-1]
        wait_for(lambda: (Path(folder) / "rank-1.jsonl").exists() and "done" in (Path(folder) / "rank-1.jsonl").read_text(),
                 "rank 1's barrier")
        assert len(processes_holding(folder)) >= 3  # torchrun and its two workers
        check.send_signal(sig)
        assert check.wait(timeout=WAIT_S) == code
        if code == 130:
            assert "interrupted" in check.stderr.read()  # type: ignore[union-attr]
            assert processes_holding(folder) == []
        else:
            wait_for(lambda: processes_holding(folder) == [], "the workers and torchrun to exit on their own")
    finally:
        if check.poll() is None:
            check.kill()
        check.wait()
        for pid, _ in processes_holding(folder) if "folder" in locals() else []:  # a failed test leaves nothing either
            os.kill(pid, signal.SIGKILL)
        if "folder" in locals():
            shutil.rmtree(Path(folder).parent, ignore_errors=True)  # a killed traindoc could not remove its temp folder


def test_several_nodes_print_the_command_for_each_and_the_srun_form(cli) -> None:
    result = cli("traindoc", "check", "nccl", "--nodes", "2", "--master-addr", "node0", "--json",
                 env=_clean_env(NCCL_SOCKET_IFNAME="eth0 x", NCCL_IB_DISABLE="1"))
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    first, second = data["commands"]
    for node, line in enumerate((first, second)):
        words = shlex.split(line.split("&&", 1)[1])
        assert "--nnodes=2" in words and f"--node-rank={node}" in words and "--master-addr=node0" in words
        assert "NCCL_SOCKET_IFNAME=eth0 x" in words and "NCCL_IB_DISABLE=1" in words  # quoted for the shell
        assert words[words.index("--backend") + 1] == "nccl"
    assert data["srun"].startswith("srun --nodes=2 --ntasks-per-node=1 bash -c ")
    inner = shlex.split(data["srun"])[-1]
    assert "--rdzv-backend=c10d" in inner and "$SLURM_NNODES" in inner and "SLURM_JOB_NODELIST" in inner
    text = cli("traindoc", "check", "nccl", "--nodes", "2", "--master-addr", "node0", env=_clean_env())
    assert "node 0:" in text.stdout and "node 1:" in text.stdout and "srun" in text.stdout


def test_a_bundles_variables_are_used(cli, tmp_path: Path) -> None:
    made = cli("traindoc", "probe", "--json", "--timeout", "3", env=_clean_env(NCCL_SOCKET_IFNAME="eth9"))
    assert made.returncode in (0, 1), made.stderr
    bundle = tmp_path / "node3.json"
    bundle.write_text(made.stdout)
    result = cli("traindoc", "check", "nccl", "--bundle", str(bundle), "--print-commands", env=_clean_env())
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[1].split()[0] == "NCCL_SOCKET_IFNAME=eth9"


def test_print_commands_starts_nothing(cli) -> None:
    result = cli("traindoc", "check", "nccl", "--print-commands", env=_clean_env())
    assert result.returncode == 0 and "torch.distributed.run" in result.stdout and "--master-addr=127.0.0.1" in result.stdout


def test_bad_input_gets_one_line_and_a_non_zero_exit(cli, tmp_path: Path) -> None:
    from traindoc_cli.check import visible_gpus

    cases = [(["--sizes", "1X"], 2), (["--timeout", "0"], 2), (["--nproc", "0"], 2),
             (["--log", str(tmp_path / "missing.log")], 1), (["--bundle", str(tmp_path / "bad.json")], 1)]
    (tmp_path / "bad.json").write_text("not a bundle")
    if not visible_gpus():
        cases.append((["--backend", "nccl"], 1))  # NCCL needs a GPU: one line says so
    for args, code in cases:
        result = cli("traindoc", "check", "nccl", *args, env=_clean_env())
        assert result.returncode == code, (args, result.stderr)
        assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr, result.stderr
        assert result.stdout == ""


def test_traindoc_help_names_the_check(cli) -> None:
    result = cli("traindoc", "--help")
    assert "check" in result.stdout and "starts processes" in result.stdout
