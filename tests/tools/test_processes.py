import pytest

from tools import processes
from tools.base import ProbeContext, Status
from tools.processes import Proc

SELF, PARENT = 500, 400
BASE = [Proc(1, 0, "/sbin/init", 9000), Proc(PARENT, 1, "bash", 100), Proc(SELF, PARENT, "python -m traindoc", 1)]


@pytest.mark.parametrize(
    ("extra", "expected_pids"),
    [
        ([], []),
        ([Proc(600, 1, "/usr/bin/python /opt/venv/bin/torchrun --nproc_per_node=8 train.py", 7200)], [600]),
        ([Proc(601, 1, "python -m torch.distributed.run --nproc_per_node 2 x.py", 50)], [601]),
        ([Proc(602, 1, "/usr/bin/python3 -u my_train_llm.py --lr 1e-4", 3600)], [602]),
        ([Proc(603, 1, "deepspeed --num_gpus 8 finetune.py", 10)], [603]),
        ([Proc(604, 1, "/venv/bin/python /venv/bin/accelerate launch run.py", 10)], [604]),
        ([Proc(605, 1, "python -m vllm.entrypoints.openai.api_server", 10), Proc(606, 1, "ray::IDLE", 10)], [605, 606]),
        ([Proc(607, 1, "vim train.py", 10), Proc(608, 1, "python serve.py", 10)], []),
    ],
)
def test_rows(extra, expected_pids):
    result = processes.probe(ProbeContext(environ={}), reader=lambda: BASE + extra, self_pid=SELF)
    assert [p["pid"] for p in result.evidence["processes"]] == expected_pids
    assert result.status == (Status.PROBLEM if expected_pids else Status.OK)
    if expected_pids:
        finding = result.findings[0]
        assert finding.code == "LEFTOVER_TRAINING_PROCESS"
        assert f"kill {expected_pids[0]}" in finding.fix


def test_self_and_ancestors_excluded_and_cmdline_masked():
    table = [Proc(10, 1, "torchrun --nproc_per_node 2 train.py", 5),
             Proc(11, 10, "python train.py --hf_token hf_abcdefghijklmnopqrstuvwxyz", 5),
             Proc(12, 11, "python -m traindoc probe", 1),
             Proc(20, 1, "torchrun train.py --wandb-api-key sekrit", 99)]
    result = processes.probe(ProbeContext(environ={}), reader=lambda: table, self_pid=12)
    assert [p["pid"] for p in result.evidence["processes"]] == [20]
    assert "sekrit" not in repr(result)


def test_children_of_listed_launcher_not_suggested_for_kill():
    table = [Proc(10, 1, "torchrun train.py", 5), Proc(11, 10, "python train.py", 5)]
    result = processes.probe(ProbeContext(environ={}), reader=lambda: table, self_pid=999)
    assert "kill 10`" in result.findings[0].fix


def test_real_proc_reader_finds_this_process():
    import os

    procs = processes.read_procs()
    assert any(p.pid == os.getpid() for p in procs)
