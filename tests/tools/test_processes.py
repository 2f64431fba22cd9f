import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from hangkit import HungJob

from tools import processes
from tools.base import ProbeContext, Status
from tools.processes import Proc

SELF, PARENT = 500, 400
BASE = [Proc(1, 0, "/sbin/init", 9000), Proc(PARENT, 1, "bash", 100), Proc(SELF, PARENT, "python -m traindoc", 1)]
KILL_BY_NAME = re.compile(r"pkill|killall|kill\s+-9|kill\s+-KILL|xargs\s+kill", re.I)
KILL_TERM = re.compile(r"`kill -TERM ([\d ]+)`")


def _probe(table, self_pid=SELF):
    return processes.probe(ProbeContext(environ={}), reader=lambda: table, self_pid=self_pid)


def _codes(result):
    return {f.code: f for f in result.findings}


def _killed(result) -> set[int]:
    """The PIDs a leftover finding tells the user to stop."""
    return {int(pid) for f in result.findings if f.code == "LEFTOVER_TRAINING_PROCESS"
            for m in KILL_TERM.finditer(f.fix) for pid in m.group(1).split()}


@pytest.mark.parametrize(
    ("extra", "expected_pids", "leftover", "running"),
    [
        ([], [], [], []),
        # a launcher alone, for hours: its ranks are gone
        ([Proc(600, 1, "/usr/bin/python /opt/venv/bin/torchrun --nproc_per_node=8 train.py", 7200)], [600], [600], []),
        # a launcher alone, for seconds: still at rendezvous
        ([Proc(601, 1, "python -m torch.distributed.run --nproc_per_node 2 x.py", 50)], [601], [], [601]),
        # a script adopted by init long after boot: its parent (a shell, a launcher) is gone
        ([Proc(602, 1, "/usr/bin/python3 -u my_train_llm.py --lr 1e-4", 3600)], [602], [602], []),
        ([Proc(603, 1, "deepspeed --num_gpus 8 finetune.py", 10)], [603], [], [603]),
        ([Proc(604, 1, "/venv/bin/python /venv/bin/accelerate launch run.py", 10)], [604], [], [604]),
        ([Proc(605, 1, "python -m vllm.entrypoints.openai.api_server", 10), Proc(606, 1, "ray::IDLE", 10)],
         [605, 606], [605, 606], []),
        ([Proc(607, 1, "vim train.py", 10), Proc(608, 1, "python serve.py", 10)], [], [], []),
    ],
)
def test_rows(extra, expected_pids, leftover, running):
    result = _probe(BASE + extra)
    assert [p["pid"] for p in result.evidence["processes"]] == expected_pids
    assert result.status == (Status.PROBLEM if leftover else Status.OK)
    assert _killed(result) == set(leftover)
    jobs = {j["pid"]: j["verdict"] for j in result.evidence["jobs"]}
    assert jobs == {**{pid: "leftover" for pid in leftover}, **{pid: "running" for pid in running}}
    if leftover:
        assert result.findings[-1].code == "LEFTOVER_TRAINING_PROCESS"
        assert f"kill -TERM {leftover[0]}" in result.findings[-1].fix
    for pid in running:
        finding = _codes(result)["TRAINING_JOB_RUNNING"]
        assert finding.severity == "info" and f"kill -TERM {pid}`" in finding.fix and "not a leftover" in finding.summary
    assert not KILL_BY_NAME.search(json.dumps(result.to_dict()))


JOB = [Proc(10, PARENT, "/venv/bin/python /venv/bin/torchrun --nproc-per-node=3 train.py", 7200),
       Proc(11, 10, "/venv/bin/python -u train.py", 7190), Proc(12, 10, "/venv/bin/python -u train.py", 7190),
       Proc(13, 10, "/venv/bin/python -u train.py", 7190),
       Proc(14, 11, "/venv/bin/python -u train.py", 7000)]  # a forked data-loader worker: not a rank


@pytest.mark.parametrize(
    ("table", "leftover", "running"),
    [
        (JOB, set(), {10}),  # a long job with its ranks alive is running, however old
        ([Proc(10, 1, JOB[0].cmdline, 7200)] + JOB[1:], set(), {10}),  # nohup'd launcher
        # the launcher died: its ranks were adopted by init, each one stopped by its own PID
        ([Proc(11, 1, "/venv/bin/python -u train.py", 600), Proc(12, 1, "/venv/bin/python -u train.py", 600)], {11, 12}, set()),
        # every rank exited and nobody reaped them, for an hour: the launcher is a leftover
        ([JOB[0], Proc(11, 10, "[python] <defunct>", 7190, "Z"), Proc(12, 10, "[python] <defunct>", 7190, "Z")], {10}, set()),
        # started by a container's init as its main process: not adopted
        ([Proc(1, 0, "/usr/bin/tini -- bash", 300), Proc(20, 1, "python train.py", 299)], set(), {20}),
        # adopted by the user's systemd (a subreaper), long after it started
        ([Proc(30, 1, "/lib/systemd/systemd --user", 8000), Proc(31, 30, "python3 train.py", 60)], {31}, set()),
        # a shell script between the launcher and traindoc's user: still one running job
        ([Proc(40, PARENT, "bash run.sh", 60), Proc(41, 40, "torchrun train.py", 59), Proc(42, 41, "python -u train.py", 58)],
         set(), {41}),
    ],
)
def test_jobs(table, leftover, running):
    result = _probe(BASE + table)
    assert _killed(result) == leftover
    assert {j["pid"] for j in result.evidence["jobs"] if j["verdict"] == "running"} == running
    assert not KILL_BY_NAME.search(json.dumps(result.to_dict()))


def test_running_job_names_its_launcher_and_ranks():
    result = _probe(BASE + JOB)
    assert result.status == Status.OK and "1 training job(s) running" in result.summary
    finding = _codes(result)["TRAINING_JOB_RUNNING"]
    assert "torchrun job running" in finding.summary and "launcher pid 10" in finding.summary
    assert "pids 11, 12, 13" in finding.summary and "14" not in finding.summary
    assert "`traindoc hang --pid 10`" in finding.fix and "`kill -TERM 10`" in finding.fix
    assert finding.fix.index("traindoc hang") < finding.fix.index("kill -TERM"), "the evidence first"
    roles = {p["pid"]: p["role"] for p in result.evidence["processes"]}
    assert roles == {10: "launcher", 11: "rank", 12: "rank", 13: "rank", 14: "process"}


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
    assert "kill -TERM 10`" in result.findings[0].fix
    assert "11" not in result.findings[0].fix


def test_real_proc_reader_finds_this_process():
    procs = processes.read_procs()
    assert any(p.pid == os.getpid() and p.state in "RS" for p in procs)


# -- real processes --------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def hung_job(tmp_path_factory: pytest.TempPathFactory):
    job = HungJob(tmp_path_factory.mktemp("hung"), lifetime_s=120.0)
    try:
        job.start()
        yield job
    finally:
        job.stop()


def test_a_hung_job_is_the_running_job_not_a_leftover(hung_job: HungJob) -> None:
    ranks = set(hung_job.worker_pids().values())
    assert len(ranks) == 3 and hung_job.alive()
    result = processes.probe(ProbeContext(environ={}))  # what `ask` runs (tools.registry)
    assert not KILL_BY_NAME.search(json.dumps(result.to_dict()))
    job = next(j for j in result.evidence["jobs"] if j["pid"] == hung_job.pid)
    assert job["verdict"] == "running" and job["launcher"] == hung_job.pid and set(job["ranks"]) == ranks, job
    finding = next(f for f in result.findings if f.code == "TRAINING_JOB_RUNNING" and f"launcher pid {hung_job.pid}," in f.summary)
    assert finding.severity == "info" and all(str(pid) in finding.summary for pid in ranks), finding
    assert f"`traindoc hang --pid {hung_job.pid}`" in finding.fix and f"`kill -TERM {hung_job.pid}`" in finding.fix
    assert not (_killed(result) & (ranks | {hung_job.pid})), result.findings
    for finding in result.findings:
        if finding.code == "LEFTOVER_TRAINING_PROCESS":
            assert not any(f"pid {pid} " in finding.evidence for pid in ranks | {hung_job.pid}), finding
    assert hung_job.alive(), "the probe only reads"


@pytest.fixture
def orphan(tmp_path: Path):
    """A training-looking script whose parent exits at once, so init (or a subreaper) adopts it."""
    script = tmp_path / "train_leftover.py"
    script.write_text("import time\ntime.sleep(60)\n")
    spawn = ("import subprocess, sys; print(subprocess.Popen([sys.executable, sys.argv[1]], stdin=subprocess.DEVNULL, "
             "stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).pid)")
    done = subprocess.run([sys.executable, "-c", spawn, str(script)], capture_output=True, text=True, timeout=30, check=True)
    pid = int(done.stdout)  # its parent has exited: the kernel has already handed it to its adopter
    try:
        yield pid
    finally:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass


def _ppid(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat[stat.rfind(")") + 2 :].split()[1])


def test_an_orphaned_training_process_is_a_leftover(orphan: int) -> None:
    adopter = _ppid(orphan)
    adopter_cmd = Path(f"/proc/{adopter}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    if adopter != 1 and not processes.is_subreaper(adopter_cmd):
        pytest.skip(f"adopted by pid {adopter} ({adopter_cmd[:80]}), a subreaper traindoc does not know")
    result = processes.probe(ProbeContext(environ={}))
    assert not KILL_BY_NAME.search(json.dumps(result.to_dict()))
    assert result.status == Status.PROBLEM
    assert orphan in _killed(result), result.findings
    leftover = _codes(result)["LEFTOVER_TRAINING_PROCESS"]
    assert f"pid {orphan} " in leftover.evidence or len(_killed(result)) > 5
    job = next(j for j in result.evidence["jobs"] if j["pid"] == orphan)
    assert job["verdict"] == "leftover" and "parent exited" in job["reason"], job
