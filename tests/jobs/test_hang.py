"""`traindoc hang`: real hung torchrun jobs (3 ranks, CPU/gloo) snapshotted read-only through py-spy, torch's
debug server and Flight Recorder dumps; the parsers on real py-spy / faulthandler / H100 samples; the
process-selection rules on a /proc built from a table; ptrace refusal through a stand-in py-spy."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hangkit import FakeProc, HungJob, fake_proc_root, free_port, line_of

from common.errors import ConfigError, InputError, UsageError
from jobs import procs, pyspy
from jobs.hang import RankStack, analyse_flight_recorder, analyse_stacks, locate, snapshot_job, take_snapshot
from jobs.pyspy import Frame, classify, parse_text, parse_traceback

DATA = Path(__file__).resolve().parent / "data"
H100_FR = DATA / "flight-recorder" / "h100"
BARRIER = line_of("dist.barrier()  # straggler")
SLEEP = line_of("time.sleep(LIFETIME_S)  # straggler")
HAS_DEBUG_SERVER = all(importlib.util.find_spec(m) is not None for m in ("tabulate", "jinja2"))
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


@pytest.fixture(scope="module")
def straggler(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HungJob]:
    """Ranks 0 and 2 in dist.barrier, rank 1 in load_shard; with the debug server (when torch's optional
    dependencies are here) and Flight Recorder dumps written once the ranks hang."""
    workdir = tmp_path_factory.mktemp("straggler")
    fr_dir = workdir / "fr"
    fr_dir.mkdir()
    job = HungJob(workdir, debug_port=free_port() if HAS_DEBUG_SERVER else None,
                  extra_env={"HANG_FR_DIR": str(fr_dir), "TORCH_FR_BUFFER_SIZE": "2000"})
    try:
        job.start()
        yield job
    finally:
        job.stop()


def _snapshot_summary() -> str:
    return f"ranks 0 and 2 wait in dist.barrier (train.py:{BARRIER}); rank 1 is in load_shard (train.py:{SLEEP})"


# -- a real hung job, through py-spy ---------------------------------------------------------------------------

def test_snapshot_names_the_straggler_and_leaves_the_job_running(straggler: HungJob) -> None:
    started = time.monotonic()
    snapshot = take_snapshot(straggler.pid, timeout_s=20)
    elapsed = time.monotonic() - started
    assert snapshot is not None
    root = snapshot.diagnosis.root_cause
    assert root is not None
    assert (root.category, root.rank) == ("straggler", 1)
    assert root.summary == _snapshot_summary()
    assert root.where == f"train.py:{SLEEP}"
    assert root.evidence[0] == f"rank 1: load_shard (train.py:{SLEEP})"
    assert snapshot.diagnosis.ranks == [0, 1, 2]
    assert snapshot.diagnosis.collective == f"dist.barrier (train.py:{BARRIER})"
    assert [g.ranks for g in snapshot.groups] == [[0, 2], [1]]
    pids = straggler.worker_pids()
    assert snapshot.groups[0].pids == [pids[0], pids[2]] and snapshot.groups[1].pids == [pids[1]]
    assert snapshot.groups[0].frames[0].startswith("barrier (torch/distributed/distributed_c10d.py:")
    assert snapshot.job == f"torchrun (pid {straggler.pid})"
    assert elapsed < 10, elapsed
    assert straggler.alive(), "the snapshot must not stop or kill anything"
    again = take_snapshot(pids[1], timeout_s=20)  # still hung where it was: nothing changed its course
    assert again is not None and again.diagnosis.root_cause == root


def test_snapshot_job_from_a_worker_pid_returns_the_diagnosis(straggler: HungJob) -> None:
    diagnosis = snapshot_job(straggler.worker_pids()[2], timeout_s=20)
    assert diagnosis is not None and diagnosis.kind == "hang"
    assert diagnosis.root_cause is not None and diagnosis.root_cause.rank == 1
    assert [s.ranks for s in diagnosis.symptoms] == [[0, 2]]
    assert "rank 1" in diagnosis.why_consequences


def test_cli_json_with_the_launcher_pid(straggler: HungJob, cli) -> None:
    result = cli("traindoc", "hang", "--pid", str(straggler.pid), "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    root = data["diagnosis"]["root_cause"]
    assert (root["category"], root["rank"], root["summary"]) == ("straggler", 1, _snapshot_summary())
    assert data["diagnosis"]["kind"] == "hang" and data["diagnosis"]["timeline"] == []
    assert [g["ranks"] for g in data["groups"]] == [[0, 2], [1]]
    assert data["groups"][1]["where"] == f"load_shard (train.py:{SLEEP})"
    assert straggler.alive()


def test_cli_timeline_writes_the_snapshot_as_a_picture(straggler: HungJob, cli, tmp_path: Path) -> None:
    import xml.etree.ElementTree as ET

    out = tmp_path / "hang.svg"
    result = cli("traindoc", "hang", "--pid", str(straggler.pid), "--timeline", str(out))
    assert result.returncode == 0, result.stderr
    root = ET.fromstring(out.read_text(encoding="utf-8"))
    lanes = {g.get("data-rank"): set(g.get("class", "").split()) for g in root.iter("{http://www.w3.org/2000/svg}g")
             if "lane" in g.get("class", "").split() and g.get("data-rank")}
    assert sorted(lanes) == ["0", "1", "2"] and "first-failure" in lanes["1"]  # the straggler in load_shard
    assert straggler.alive()


def test_cli_text_leads_with_the_summary_then_one_block_per_group(straggler: HungJob, cli) -> None:
    result = cli("traindoc", "hang", "--pid", str(straggler.worker_pids()[0]))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"traindoc hang: torchrun (pid {straggler.pid}), 3 ranks, via py-spy")
    assert lines[2] == f"straggler (rank 1, confidence 0.8): {_snapshot_summary()}"
    assert any(line.startswith("ranks 0, 2 (pids ") and line.endswith(f": dist.barrier (train.py:{BARRIER})") for line in lines)
    assert any(line.startswith("rank 1 (pid ") and line.endswith(f": load_shard (train.py:{SLEEP})") for line in lines)
    assert "What would tell more:" in lines


def test_native_frames_on_request(straggler: HungJob) -> None:
    snapshot = take_snapshot(straggler.pid, native=True, timeout_s=20)
    assert snapshot is not None and snapshot.diagnosis.root_cause is not None
    assert snapshot.diagnosis.root_cause.rank == 1
    waiting = snapshot.groups[0].frames
    assert any("libc" in f or "libtorch" in f for f in waiting), waiting  # C/C++ frames under the Python ones
    assert straggler.alive()


# -- the same job through torch's debug server, and its Flight Recorder dumps --------------------------------------

@pytest.mark.skipif(not HAS_DEBUG_SERVER, reason="torch's debug server needs tabulate and jinja2")
def test_debug_server_gives_every_rank_and_the_flight_recorder(straggler: HungJob, cli) -> None:
    url = f"http://127.0.0.1:{straggler.debug_port}"
    result = cli("traindoc", "hang", "--debug-server", url, "--json", "--timeout", "30")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    root = data["diagnosis"]["root_cause"]
    assert (root["category"], root["rank"], root["summary"]) == ("straggler", 1, _snapshot_summary())
    assert [g["ranks"] for g in data["groups"]] == [[0, 2], [1]]
    assert data["source"] == f"debug server {url}"
    pids = straggler.worker_pids()
    assert data["groups"][1]["pids"] == [pids[1]]  # py-spy's page (the workers have py-spy on their PATH)
    fr = data["flight_recorder"]
    assert fr["missing_ranks"] == [1] and fr["seq"] == 4 and fr["collective"].startswith("gloo:barrier #4")
    assert "gloo:barrier #4" in data["diagnosis"]["collective"]
    assert straggler.alive()


def test_debug_server_unreachable_is_one_line(cli) -> None:
    result = cli("traindoc", "hang", "--debug-server", f"127.0.0.1:{free_port()}", "--timeout", "3")
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1 and "cannot reach it" in result.stderr and "start_debug_server" in result.stderr


def test_flight_recorder_dumps_of_the_hung_job(straggler: HungJob, cli) -> None:
    fr_dir = straggler.workdir / "fr"
    deadline = time.monotonic() + 30
    while len(list(fr_dir.glob("nccl_trace_rank_*"))) < 3:
        assert time.monotonic() < deadline, list(fr_dir.iterdir())
        time.sleep(0.2)
    snapshot = analyse_flight_recorder(fr_dir)
    root = snapshot.diagnosis.root_cause
    assert root is not None and (root.category, root.rank) == ("straggler", 1)
    assert root.summary.startswith("ranks 0 and 2 entered gloo:barrier #4") and "rank 1 never joined it" in root.summary
    assert root.where == f"train.py:{line_of('dist.all_reduce(tensor)')}"  # rank 1's last call: the all_reduce loop
    result = cli("traindoc", "hang", "--fr-dir", str(fr_dir))
    assert result.returncode == 0, result.stderr
    assert "rank 1: last gloo:all_reduce #3" in result.stdout


def test_flight_recorder_on_the_real_h100_dump() -> None:
    snapshot = analyse_flight_recorder(H100_FR)
    finding = snapshot.flight_recorder
    assert finding is not None and finding.ranks == [0]
    assert finding.collective == "nccl:all_reduce #4 (default_pg)" and finding.state == "scheduled"
    assert finding.where == "train.py:18"
    assert "never started" in finding.summary
    # the same last entry as torch's own `fr_trace -j` printed on that machine
    printed = (DATA / "flight-recorder" / "fr_trace-j-output.txt").read_text().splitlines()
    assert printed[-1] == "all_reduce(input_sizes=[[1048576]], state=scheduled)"
    assert [(o.seq, o.state) for o in finding.last_ops] == [(4, "scheduled")]
    root = snapshot.diagnosis.root_cause
    assert root is not None and root.category == "unknown" and root.rank is None


def test_fr_dir_errors_are_one_line(tmp_path: Path, cli) -> None:
    (tmp_path / "nccl_trace_rank_0").write_bytes(b"not a pickle")
    result = cli("traindoc", "hang", "--fr-dir", str(tmp_path))
    assert result.returncode == 1
    assert result.stderr.startswith(f"traindoc: error: --fr-dir {tmp_path}: the Flight Recorder analyzer failed")
    assert result.stderr.count("\n") == 1


# -- other hangs ---------------------------------------------------------------------------------------------------

def test_collective_mismatch(tmp_path: Path) -> None:
    job = HungJob(tmp_path, mode="mismatch")
    try:
        job.start()
        snapshot = take_snapshot(job.pid, timeout_s=20)
        assert snapshot is not None and snapshot.diagnosis.root_cause is not None
        root = snapshot.diagnosis.root_cause
        assert (root.category, root.rank) == ("collective_mismatch", 1)
        assert root.summary == (f"ranks 0 and 2 wait in dist.barrier (train.py:{line_of('# mismatch: ranks 0 and 2')}); "
                                f"rank 1 waits in dist.all_reduce (train.py:{line_of('# mismatch: rank 1')})")
        assert job.alive()
    finally:
        job.stop()


def test_launcher_without_workers_waits_in_the_rendezvous(tmp_path: Path, cli) -> None:
    job = HungJob(tmp_path, nnodes=2)  # the second node never comes
    try:
        job.start()
        result = cli("traindoc", "hang", "--pid", str(job.pid), "--json")
        assert result.returncode == 0, result.stderr
        root = json.loads(result.stdout)["diagnosis"]["root_cause"]
        assert root["category"] == "rendezvous" and root["rank"] is None
        assert f"torchrun (pid {job.pid}) runs but has started no workers" in root["summary"]
        assert "--nnodes 2" in root["summary"] and "rendezvous" in root["summary"]
        assert job.proc is not None and job.proc.poll() is None
    finally:
        job.stop()


# -- failures: one clear line ------------------------------------------------------------------------------------

PTRACE_MESSAGE = "Error: Failed to open process - check if it is running.\nReason: Operation not permitted (os error 1)\n"


def _fake_pyspy(tmp_path: Path, stderr: str) -> str:
    """A stand-in for py-spy that fails the way a container without SYS_PTRACE makes it fail."""
    path = tmp_path / "py-spy"
    path.write_text(f"#!{sys.executable}\nimport sys\nsys.stderr.write({stderr!r})\nsys.exit(1)\n")
    path.chmod(0o755)
    return str(path)


def test_ptrace_refusal_is_one_line_with_the_fix(tmp_path: Path) -> None:
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        result = pyspy.dump(sleeper.pid, binary=_fake_pyspy(tmp_path, PTRACE_MESSAGE), timeout_s=20)
    finally:
        sleeper.kill()
        sleeper.wait()
    assert result.reason == "ptrace_denied"
    assert result.error.startswith(f"cannot read process {sleeper.pid}'s stack: ptrace is not permitted (")
    assert "--cap-add SYS_PTRACE" in result.error and "ptrace_scope" in result.error and "\n" not in result.error
    for message in ("Permission Denied: Try running again with elevated permissions by going 'sudo env \"PATH=$PATH\" !!'",
                    "Error: Permission denied (os error 13)"):
        assert pyspy._reason(message, os.getpid()) == "ptrace_denied"


def test_ptrace_refusal_on_every_rank_raises_that_line(straggler: HungJob, tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        take_snapshot(straggler.pid, pyspy=_fake_pyspy(tmp_path, PTRACE_MESSAGE), timeout_s=20)
    assert "ptrace is not permitted" in str(caught.value) and "\n" not in str(caught.value)
    assert straggler.alive()


def test_bad_pids_are_one_line(tmp_path: Path, cli) -> None:
    unused = next(p for p in range(4_000_000, 4_100_000) if not Path(f"/proc/{p}").exists())
    result = cli("traindoc", "hang", "--pid", str(unused))
    assert (result.returncode, result.stderr) == (1, f"traindoc: error: --pid {unused}: no such process\n")
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        result = cli("traindoc", "hang", "--pid", str(sleeper.pid))
    finally:
        sleeper.kill()
        sleeper.wait()
    assert result.returncode == 1 and "is not part of a training job" in result.stderr and result.stderr.count("\n") == 1


def test_no_training_process_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    from traindoc_cli.main import traindoc_main

    monkeypatch.setattr(procs, "PROC", fake_proc_root(tmp_path, [FakeProc(10, 1, ("/bin/bash",), exe="/bin/bash")]))
    assert traindoc_main(["hang"]) == 1
    assert capsys.readouterr().err.startswith("traindoc: error: no training processes found on this machine (")
    assert snapshot_job(None) is None


# -- which processes are a job's ranks (a /proc built from a table) -------------------------------------------------

PY = "/opt/venv/bin/python"
TORCHRUN = (PY, "/opt/venv/bin/torchrun", "--nnodes=1", "--nproc-per-node=2", "train.py")


def _rank(rank: int, port: str = "29500") -> dict[str, str]:
    return {"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port,
            "TORCHELASTIC_RUN_ID": "none"}


def test_workers_are_the_launchers_ranks_not_their_children(tmp_path: Path) -> None:
    root = fake_proc_root(tmp_path, [
        FakeProc(100, 1, TORCHRUN),
        FakeProc(101, 100, (PY, "-u", "train.py"), _rank(0)),
        FakeProc(102, 100, (PY, "-u", "train.py"), _rank(1)),
        FakeProc(103, 101, (PY, "-u", "train.py"), _rank(0)),  # a DataLoader worker / the debug server's frontend
        FakeProc(200, 1, ("/usr/bin/sleep", "100"), exe="/usr/bin/sleep"),
    ])
    job = procs.select_job(None, root)
    assert job is not None and job.launcher is not None and job.launcher.pid == 100
    assert [(w.rank, w.pid) for w in job.workers] == [(0, 101), (1, 102)]
    assert job.world_size == 2 and job.master == "127.0.0.1:29500"
    for pid in (100, 102, 103):
        selected = procs.select_job(pid, root)
        assert selected is not None and selected.launcher is not None and selected.launcher.pid == 100
    with pytest.raises(InputError, match="--pid 200 .* is not part of a training job"):
        procs.select_job(200, root)
    with pytest.raises(InputError, match="--pid 999: no such process"):
        procs.select_job(999, root)


def test_deepspeed_runner_shell_wrappers_and_several_jobs(tmp_path: Path) -> None:
    root = fake_proc_root(tmp_path, [
        FakeProc(10, 1, (PY, "/opt/venv/bin/deepspeed", "train.py")),
        FakeProc(11, 10, (PY, "-u", "-m", "deepspeed.launcher.launch", "--world_info=e30=", "train.py")),
        FakeProc(12, 11, ("/bin/bash", "run.sh"), _rank(0, "29600"), exe="/bin/bash"),
        FakeProc(13, 12, (PY, "train.py"), _rank(0, "29600")),
        FakeProc(14, 11, (PY, "train.py"), _rank(1, "29600")),
        FakeProc(20, 1, (PY, "-m", "torch.distributed.run", "--nnodes", "2", "train.py")),  # waits for its peers
    ])
    jobs = procs.find_jobs(root)
    assert [(j.launcher.kind, j.launcher.pid, [w.pid for w in j.workers]) for j in jobs if j.launcher] == [
        ("deepspeed", 11, [13, 14]), ("torchrun", 20, [])]
    assert jobs[1].launcher is not None and jobs[1].launcher.option("--nnodes") == "2"
    with pytest.raises(UsageError, match="2 training jobs run on this machine"):
        procs.select_job(None, root)
    selected = procs.select_job(10, root)  # the runner above launch.py names the same job
    assert selected is not None and selected.launcher is not None and selected.launcher.pid == 11


# -- the grouping rules, on stacks built by hand ------------------------------------------------------------------

def _frames(*spec: tuple[str, str, int]) -> tuple[Frame, ...]:
    return tuple(Frame(name, path, line, classify(path)) for name, path, line in spec)


C10D = "/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py"


def _in(collective: str, line: int) -> tuple[Frame, ...]:
    return _frames((collective, C10D, 100), ("train_step", "/job/train.py", line), ("<module>", "/job/train.py", 90))


def test_all_ranks_in_the_same_collective_on_one_node_point_at_the_transport() -> None:
    stacks = [RankStack(r, _in("all_reduce", 40), pid=10 + r) for r in range(4)]
    root = analyse_stacks(stacks, world_size=4).diagnosis.root_cause
    assert root is not None and (root.category, root.rank) == ("network", None)
    assert root.summary.startswith("ranks 0-3 wait in dist.all_reduce (train.py:40)")
    remote = analyse_stacks(stacks, world_size=16).diagnosis
    assert remote.root_cause is not None and remote.root_cause.category == "unknown"
    assert any("--debug-server" in e for e in remote.next_evidence)


def test_ranks_inside_init_process_group_wait_for_the_rendezvous() -> None:
    stacks = [RankStack(r, _in("init_process_group", 12)) for r in range(2)]
    root = analyse_stacks(stacks, world_size=4).diagnosis.root_cause
    assert root is not None and root.category == "rendezvous"
    assert "ranks 2-3 are not here" in root.summary


def test_an_unreadable_rank_may_be_the_one_the_others_wait_for() -> None:
    stacks = [RankStack(0, _in("barrier", 58)), RankStack(1, error="process 11 exited before its stack could be read"),
              RankStack(2, _in("barrier", 58))]
    root = analyse_stacks(stacks, world_size=3).diagnosis.root_cause
    assert root is not None and (root.category, root.rank) == ("unknown", None)
    assert "rank 1: stack not read (process 11 exited" in root.summary


# -- the formats: py-spy (JSON and text), faulthandler, the H100 native sample -------------------------------------

def test_the_h100_native_dump_of_a_rank_waiting_on_the_gpu() -> None:
    parsed = parse_text((DATA / "py-spy-dump-native-waiting-on-gpu.txt").read_text())
    assert list(parsed) == [767]
    thread = pyspy.main_thread(parsed[767])
    assert thread is not None and thread.name == "MainThread" and thread.active is True
    kinds = [f.kind for f in thread.frames]
    assert kinds[:9] == ["native"] * 9 and "user" in kinds
    place = locate(thread.frames)
    assert place.kind == "device"  # waiting on the GPU: its own kernel or a peer's collective (tests/jobs/test_framework_waits.py)
    assert place.text() == "a CUDA synchronisation (waiting on the GPU) (train.py:19)"


def test_faulthandler_form_from_the_debug_server() -> None:
    text = """Current thread 0x00007fe997fff6c0 (most recent call first):
  <no Python frame>

Thread 0x00007fe9c7025b80 (most recent call first):
  File "/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py", line 5356 in barrier
  File "/venv/lib/python3.11/site-packages/torch/distributed/c10d_logger.py", line 83 in wrapper
  File "/job/train.py", line 57 in main
  File "/job/train.py", line 61 in <module>
"""
    threads = parse_traceback(text)
    main = pyspy.main_thread(threads)
    assert main is not None and [f.where for f in main.frames] == [
        "distributed_c10d.py:5356", "c10d_logger.py:83", "train.py:57", "train.py:61"]
    assert locate(main.frames).text() == "dist.barrier (train.py:57)"


@pytest.mark.parametrize(("path", "kind"), [
    ("/venv/lib/python3.11/site-packages/torch/nn/modules/module.py", "library"),
    ("torch/distributed/distributed_c10d.py", "library"),
    ("threading.py", "stdlib"),
    ("/usr/lib/python3.11/queue.py", "stdlib"),
    ("train.py", "user"),
    ("/home/user/job/data/loader.py", "user"),
    ("/opt/venv/bin/torchrun", "library"),
    ("/src/pytorch/torch/distributed/distributed_c10d.py", "library"),
])
def test_frame_kinds(path: str, kind: str) -> None:
    assert classify(path) == kind


def test_a_process_whose_proc_files_never_answer_does_not_stall_the_scan(tmp_path: Path) -> None:
    root = fake_proc_root(tmp_path, [FakeProc(100, 1, TORCHRUN), FakeProc(101, 100, (PY, "-u", "train.py"), _rank(0))])
    stuck = root / "102"
    stuck.mkdir()
    (stuck / "stat").write_text("102 (python) D 100 102 102 0 -1 0\n")
    fifo = stuck / "cmdline"
    os.mkfifo(fifo)  # opening it blocks, as reading a D-state process's cmdline can
    try:
        started = time.monotonic()
        job = procs.select_job(None, root, timeout_s=1.0)
        assert time.monotonic() - started < 3
        assert job is not None and [w.pid for w in job.workers] == [101] and job.stuck == (102,)
        with pytest.raises(InputError, match="--pid 102: its /proc files did not answer within 1 s"):
            procs.select_job(102, root, timeout_s=1.0)
    finally:
        for _ in range(2):  # release the scan threads still blocked on it
            try:
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:
                break
            time.sleep(0.05)


# -- ask, as a user would: "my job hangs" on the machine where it hangs --------------------------------------

def test_ask_about_a_hang_snapshots_the_job_and_leads_with_the_straggler(straggler: HungJob, use_shared_index: Path) -> None:
    from clikit import run_cli

    if len(procs.find_jobs()) != 1:
        pytest.skip("another training job runs on this machine: ask would (rightly) not guess which one hangs")
    result = run_cli("ask", "--json", "my training job hangs at the barrier", timeout=120)
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    root = answer["diagnosis"]["root_cause"]
    assert answer["diagnosis"]["kind"] == "hang"
    assert (root["category"], root["rank"]) == ("straggler", 1)
    verdict, detail = answer["answer"].split("\n### ", 2)[:2]  # the verdict block, then the snapshot's own section
    assert "rank 1" in verdict and "train.py:" in verdict, verdict  # the straggler and its file:line, first
    assert "rank 1 is in load_shard" in detail, detail[:400]
    assert "hang_snapshot" in answer["timings_ms"]
    assert straggler.alive()
