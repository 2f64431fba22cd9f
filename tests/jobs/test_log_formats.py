"""Reading what real jobs write: prefixes, timestamps, stray bytes, folders, .gz (no processes needed)."""

from __future__ import annotations

import gzip
from datetime import datetime
from pathlib import Path

import pytest

from common.errors import InputError
from jobs.lines import parse_line
from jobs.reader import job_sources, read_job
from jobs.triage import triage_paths

SAMPLES = Path(__file__).resolve().parents[2].parent / "shared" / "gpu-samples"


@pytest.mark.parametrize(
    ("raw", "rank", "local_rank", "host", "text", "time"),
    [
        ("[default1]:[rank3]:[E1123 02:40:15.763257978 ProcessGroupNCCL.cpp:689] [Rank 3] Watchdog caught",
         3, 1, None, "[Rank 3] Watchdog caught", datetime(2026, 11, 23, 2, 40, 15, 763257)),
        ("E1122 15:31:15.535000 12792 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: 1)",
         None, None, None, "failed (exitcode: 1)", datetime(2026, 11, 22, 15, 31, 15, 535000)),
        ("3: Traceback (most recent call last):", 3, None, None, "Traceback (most recent call last):", None),
        ("worker-1: [rank5]: KeyError: 'x'", 5, None, "worker-1", "KeyError: 'x'", None),
        ("node03:4711:4790 [2] NCCL WARN NET/Socket : peer 10.0.0.4 closed", None, None, "node03",
         "NCCL WARN NET/Socket : peer 10.0.0.4 closed", None),
        ("2026-11-23 02:40:00,900 INFO step 3", None, None, None, "INFO step 3", datetime(2026, 11, 23, 2, 40, 0, 900000)),
        ("[2024-05-01 10:00:00,123] [INFO] [engine.py:123:__init__] DeepSpeed info", None, None, None,
         "[INFO] [engine.py:123:__init__] DeepSpeed info", datetime(2024, 5, 1, 10, 0, 0, 123000)),
        ("11/23/2026 02:40:00 - INFO - __main__ - loading", None, None, None, "INFO - __main__ - loading",
         datetime(2026, 11, 23, 2, 40)),
        ("\x1b[31mRuntimeError: boom\x1b[0m", None, None, None, "RuntimeError: boom", None),
        ("  5%|#   | 1/20\r 50%|#####   | 10/20\r100%|##########| 20/20", None, None, None,
         "100%|##########| 20/20", None),
        ("train.py: error: unrecognized arguments: --lr0.1", None, None, None,
         "train.py: error: unrecognized arguments: --lr0.1", None),
        ("RuntimeError: CUDA error: an illegal memory access", None, None, None,
         "RuntimeError: CUDA error: an illegal memory access", None),
    ],
)
def test_prefixes_are_peeled(raw: str, rank: int | None, local_rank: int | None, host: str | None, text: str,
                             time: datetime | None) -> None:
    line = parse_line(raw, "x.log", 1, year=2026)
    assert (line.rank, line.local_rank, line.host, line.text) == (rank, local_rank, host, text)
    assert line.time == time


def _write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return path


CRASH = """Traceback (most recent call last):
  File "/work/job/train.py", line 41, in <module>
    main()
  File "/work/job/train.py", line 30, in load_batch
    return sample["target"]
KeyError: 'target'
"""
TIMEOUT = """Traceback (most recent call last):
  File "/work/job/train.py", line 58, in main
    dist.barrier()
  File "/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py", line 4800, in barrier
    work.wait()
RuntimeError: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting 10000ms for recv operation to complete
"""


def test_torchrun_log_dir_layout_reads_the_latest_attempt(tmp_path: Path) -> None:
    run = tmp_path / "logs" / "none_abc123"
    _write(run / "attempt_0" / "1" / "stderr.log", TIMEOUT)  # an earlier attempt: ignored
    _write(run / "attempt_1" / "0" / "stderr.log", TIMEOUT)
    _write(run / "attempt_1" / "1" / "stderr.log", CRASH)
    _write(run / "attempt_1" / "1" / "stdout.log", "step 1\n")
    sources = job_sources([tmp_path / "logs"])
    assert {(s.path.parent.parent.name, s.local_rank) for s in sources if s.path} == {("attempt_1", 0), ("attempt_1", 1)}
    diagnosis = triage_paths([tmp_path / "logs"])
    assert diagnosis is not None and diagnosis.root_cause is not None
    assert (diagnosis.root_cause.category, diagnosis.root_cause.rank) == ("exception", 1)
    assert diagnosis.root_cause.where == "train.py:30"
    assert [s.ranks for s in diagnosis.symptoms if s.category == "collective_timeout"] == [[0]]


def test_per_rank_files_gz_and_a_nul_riddled_log(tmp_path: Path) -> None:
    rank0 = _write(tmp_path / "rank0.log", "step 1\n" + TIMEOUT)
    with gzip.open(tmp_path / "rank1.log.gz", "wt") as handle:
        handle.write("step 1\n" + TIMEOUT)
    # A DataLoader worker killed by SIGBUS leaves NULs in the middle of an otherwise normal log.
    rank2 = _write(tmp_path / "rank2.log", b"step 1\n" + b"\x00" * 300 + b"\nstep 2\n" + CRASH.encode())
    diagnosis = triage_paths([rank0, tmp_path / "rank1.log.gz", rank2])
    assert diagnosis is not None and diagnosis.root_cause is not None
    assert diagnosis.root_cause.rank == 2
    assert "KeyError: 'target'" in diagnosis.root_cause.summary


def test_mostly_binary_file_is_refused_with_one_line(tmp_path: Path) -> None:
    blob = _write(tmp_path / "core.log", bytes(range(256)) * 64)
    with pytest.raises(InputError, match="mostly binary"):
        list(read_job([blob]))


def test_missing_log_is_named(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not found"):
        triage_paths([tmp_path / "nope.log"])


def test_srun_labelled_straggler(tmp_path: Path) -> None:
    """srun -l: ranks 0 and 2 time out in the barrier; rank 1 printed and never failed."""
    lines = ["0: step 7", "1: step 7", "2: step 7"]
    for rank in (0, 2):
        lines += [f"{rank}: {line}" for line in TIMEOUT.splitlines()]
    lines += ["1: loading shard 8 of 64"]
    diagnosis = triage_paths([_write(tmp_path / "slurm-42.out", "\n".join(lines) + "\n")])
    assert diagnosis is not None and diagnosis.root_cause is not None
    assert (diagnosis.root_cause.category, diagnosis.root_cause.rank) == ("straggler", 1)
    assert "barrier" in diagnosis.root_cause.summary
    assert diagnosis.next_evidence


def test_deepspeed_host_prefixed_oom(tmp_path: Path) -> None:
    log = "\n".join([
        "worker-0: [2024-05-01 10:00:00,123] [INFO] [launch.py:256:main] process 100 spawned with command",
        "worker-1: [rank3]: Traceback (most recent call last):",
        'worker-1: [rank3]:   File "/job/train.py", line 88, in step',
        "worker-1: [rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 1 has a "
        "total capacity of 79.10 GiB of which 1.20 GiB is free.",
        "worker-0: [rank0]:[E501 10:05:00.000000000 ProcessGroupNCCL.cpp:689] [Rank 0] Watchdog caught collective "
        "operation timeout: WorkNCCL(SeqNum=812, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran "
        "for 600012 milliseconds before timing out.",
    ])
    diagnosis = triage_paths([_write(tmp_path / "ds.log", log + "\n")])
    assert diagnosis is not None and diagnosis.root_cause is not None
    assert (diagnosis.root_cause.category, diagnosis.root_cause.rank, diagnosis.root_cause.host) == ("oom", 3, "worker-1")
    assert diagnosis.collective == "ALLREDUCE SeqNum=812"
    assert "timeout" not in diagnosis.root_cause.summary.lower()


def test_every_rank_timing_out_names_what_would_tell(tmp_path: Path) -> None:
    diagnosis = triage_paths([SAMPLES / "nccl-watchdog-timeout.log"])
    assert diagnosis is not None and diagnosis.root_cause is not None
    assert diagnosis.root_cause.category == "unknown" and diagnosis.root_cause.rank is None
    assert diagnosis.collective == "ALLREDUCE SeqNum=4"
    assert any("Flight Recorder" in item for item in diagnosis.next_evidence)
    assert any("TORCH_DISTRIBUTED_DEBUG=DETAIL" in item for item in diagnosis.next_evidence)


def test_a_log_that_stops_after_launch_reads_as_rendezvous_when_it_hangs(tmp_path: Path) -> None:
    log = _write(tmp_path / "launch.log", "W1122 15:00:00.000000 1 torch/distributed/run.py:792] master_addr is "
                 "only used for static rdzv_backend and when rdzv_endpoint is not specified.\n")
    assert triage_paths([log]) is None  # no error, no hang said: nothing to diagnose
    diagnosis = triage_paths([log], question="torchrun hangs at startup")
    assert diagnosis is not None and diagnosis.root_cause is not None
    assert diagnosis.root_cause.category == "rendezvous"


@pytest.mark.parametrize(
    ("line", "category"),
    [
        ("train.py: error: unrecognized arguments: --lr0.1", "bad_arguments"),
        ("RuntimeError: Error(s) in loading state_dict for Net:", "checkpoint"),
        ("RuntimeError: DataLoader worker (pid 4242) is killed by signal: Bus error.", "dataloader_worker"),
        ("OSError: [Errno 28] No space left on device", "disk_full"),
        ("RuntimeError: The server socket has failed to listen on any local network address. port: 29500, "
         "useIpv6: false, code: -98, name: EADDRINUSE, message: address already in use", "port_in_use"),
        ("torch.distributed.DistStoreError: Timed out after 31 seconds waiting for clients. 1/2 clients joined.",
         "rendezvous"),
        ("RuntimeError: Loss is NaN at step 7", "nan"),
        ("NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.", "cuda_error"),
        ("RuntimeError: CUDA error: no kernel image is available for execution on the device", "arch_mismatch"),
        ("node1:11:22 [0] NCCL WARN NET/IB : Got async event : port error", "network"),
        ("ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when "
         "initializing the engine.", "oom"),
        ("torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:317, "
         "invalid usage (run with NCCL_DEBUG=WARN for details), NCCL version 2.21.5", "config"),
        ("ncclUnhandledCudaError: Call to CUDA function failed.", "cuda_error"),
    ],
)
def test_root_cause_categories(tmp_path: Path, line: str, category: str) -> None:
    diagnosis = triage_paths([_write(tmp_path / "one.log", f"step 1\n{line}\n")])
    assert diagnosis is not None and diagnosis.root_cause is not None
    assert diagnosis.root_cause.category == category
