"""Ranks waiting on their peers in the forms the frameworks make: DDP inside loss.backward() (the autograd engine
waits for the gradients' all-reduce), FSDP2 in its forward all-gather, init_process_group waiting for a rank still
before it (real 3-rank torchrun jobs on CPU/gloo, read
through py-spy and always killed), DeepSpeed's engine.backward and native Reducer frames (recorded stacks), and a
rank waiting on its GPU, which a CUDA sync alone cannot tell from a long kernel of its own."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hangkit import HungJob, line_of

from jobs.hang import RankStack, analyse_stacks, locate, take_snapshot
from jobs.pyspy import Frame, classify, main_thread, parse_text

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

SITE = "/venv/lib/python3.11/site-packages/"
DATA = Path(__file__).resolve().parents[3] / "shared" / "gpu-samples"
SHARD = line_of("time.sleep(LIFETIME_S)  # straggler")
BACKWARD = line_of("loss.backward()  # ddp")
FORWARD = line_of("loss = model(torch.ones(2, 8)).sum()  # fsdp")
INIT = line_of("dist.init_process_group(\"gloo\", timeout=timedelta(seconds=LIFETIME_S + 60))  # init")


@pytest.fixture(scope="module", params=["ddp", "fsdp", "init"])
def framework_job(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HungJob]:
    job = HungJob(tmp_path_factory.mktemp(request.param), mode=request.param, lifetime_s=120)
    try:
        job.start()
        yield job
    finally:
        job.stop()


def test_a_live_framework_hang_names_the_straggler_and_where_the_others_wait(framework_job: HungJob) -> None:
    started = time.monotonic()
    snapshot = take_snapshot(framework_job.pid, timeout_s=20)
    assert time.monotonic() - started < 3.0 * 4  # py-spy on three ranks; generous for a loaded CI machine
    assert snapshot is not None and snapshot.diagnosis.root_cause is not None
    root = snapshot.diagnosis.root_cause
    assert (root.category, root.rank, root.where) == ("straggler", 1, f"train.py:{SHARD}"), root.summary
    if framework_job.mode == "ddp":
        assert f"ranks 0 and 2 wait in backward, where DDP's gradient all-reduce waits (train.py:{BACKWARD})" in root.summary
    elif framework_job.mode == "fsdp":
        assert f"ranks 0 and 2 wait in FSDP's dist.all_gather_single (train.py:{FORWARD})" in root.summary
    else:  # rank 1 has not reached init_process_group: a straggler, not a rendezvous of nodes that never came
        assert f"ranks 0 and 2 wait in dist.init_process_group (train.py:{INIT})" in root.summary
    assert framework_job.proc is not None and framework_job.proc.poll() is None  # read, never stopped
    stop = snapshot.diagnosis.next_evidence[-1]  # the stacks first, then stop this job by its launcher
    assert f"kill -TERM {framework_job.pid}" in stop and "torchrun" in stop, snapshot.diagnosis.next_evidence
    assert f"kill -TERM {framework_job.pid}" in snapshot.diagnosis.wording["zh"]["next"].splitlines()[-1]


def _frames(*spec: tuple[str, str, int]) -> tuple[Frame, ...]:
    return tuple(Frame(name, path, line, "native" if line == 0 else classify(path)) for name, path, line in spec)


def _backward(*inner: tuple[str, str, int]) -> tuple[Frame, ...]:
    return _frames(*inner, ("_engine_run_backward", SITE + "torch/autograd/graph.py", 979),
                   ("backward", SITE + "torch/autograd/__init__.py", 395), ("main", "/job/train.py", 52))


def test_every_rank_in_backward_is_not_called_a_network_fault_without_native_frames() -> None:
    """Waiting for the all-reduce and computing a long backward look the same in Python frames."""
    root = analyse_stacks([RankStack(r, _backward()) for r in range(3)], world_size=3).diagnosis.root_cause
    assert root is not None and (root.category, root.rank) == ("unknown", None)
    assert "--native" in root.summary and "cannot tell" in root.summary


def test_native_reducer_frames_confirm_ddps_all_reduce() -> None:
    waiting = _backward(("pthread_cond_wait", "libc.so.6", 0), ("c10d::Reducer::finalize_backward", "libtorch_cpu.so", 0))
    place = locate(waiting)
    assert (place.kind, place.label, place.inferred) == ("collective", "DDP's gradient all-reduce in backward", False)
    computing = _backward(("at::native::addmm_out", "libtorch_cpu.so", 0))  # native frames, no wait among them
    assert locate(computing).kind == "elsewhere"


def test_deepspeed_engine_backward_and_zero_all_gather() -> None:
    engine = _frames(("_engine_run_backward", SITE + "torch/autograd/graph.py", 979),
                     ("backward", SITE + "torch/autograd/__init__.py", 395),
                     ("backward", SITE + "deepspeed/runtime/engine.py", 2243), ("train", "/job/train.py", 77))
    assert locate(engine).label == "backward, where DeepSpeed's gradient all-reduce waits"
    zero = _frames(("all_gather_into_tensor", SITE + "torch/distributed/distributed_c10d.py", 3900),
                   ("all_gather_into_tensor", SITE + "deepspeed/comm/torch.py", 220),
                   ("_all_gather_params", SITE + "deepspeed/runtime/zero/partition_parameters.py", 1400),
                   ("fetch_sub_module", SITE + "deepspeed/runtime/zero/partitioned_param_coordinator.py", 300),
                   ("forward", "/job/model.py", 40))
    place = locate(zero)
    assert (place.kind, place.label) == ("collective", "DeepSpeed ZeRO's dist.all_gather_into_tensor")


def test_a_rank_waiting_on_its_gpu_cannot_be_told_from_its_own_long_kernel() -> None:
    """The H100 sample is one rank behind its own kernel: a CUDA sync is said as such, and alone it decides nothing."""
    parsed = parse_text((DATA / "py-spy-dump-native-waiting-on-gpu.txt").read_text())
    thread = main_thread(parsed[767])
    assert thread is not None
    assert locate(thread.frames).kind == "device"
    alone = analyse_stacks([RankStack(0, thread.frames)], world_size=1).diagnosis.root_cause
    assert alone is not None and alone.category == "unknown" and "cannot tell" in alone.summary
    loader = _frames(("__next__", SITE + "torch/utils/data/dataloader.py", 630), ("main", "/job/train.py", 30))
    mixed = analyse_stacks([RankStack(0, thread.frames), RankStack(1, loader)], world_size=2).diagnosis
    assert mixed.root_cause is not None and (mixed.root_cause.category, mixed.root_cause.rank) == ("straggler", 1)
    assert mixed.root_cause.confidence < 0.5 and "Flight Recorder" in mixed.why_consequences


def test_ranks_deadlocked_in_the_same_point_to_point_call_are_a_mismatch_not_the_network() -> None:
    recv = _frames(("recv", SITE + "torch/distributed/distributed_c10d.py", 2700), ("exchange", "/job/pipeline.py", 41))
    diagnosis = analyse_stacks([RankStack(r, recv) for r in range(2)], world_size=2).diagnosis
    assert diagnosis.root_cause is not None and diagnosis.root_cause.category == "collective_mismatch"
    assert "not a network fault" in diagnosis.root_cause.summary and "死锁" in diagnosis.wording["zh"]["root"]


def test_flight_recorder_settles_what_a_cuda_sync_cannot() -> None:
    """Every rank waits on its GPU: undecided from stacks; the dumps show rank 2 never joined all_reduce #7."""
    from jobs.flight_recorder import FrFinding
    from jobs.hang import merge_flight_recorder

    sync = _frames(("synchronize", SITE + "torch/cuda/__init__.py", 1162), ("train_step", "/job/train.py", 44))
    snapshot = analyse_stacks([RankStack(r, sync) for r in range(3)], world_size=3)
    assert snapshot.diagnosis.root_cause is not None and snapshot.diagnosis.root_cause.category == "unknown"
    merge_flight_recorder(snapshot, FrFinding("rank 2 never joined nccl:all_reduce #7", [0, 1, 2], [0, 1, 2],
                                              collective="nccl:all_reduce #7 (default_pg)", missing_ranks=[2]))
    root = snapshot.diagnosis.root_cause
    assert root is not None and (root.category, root.rank) == ("straggler", 2)
