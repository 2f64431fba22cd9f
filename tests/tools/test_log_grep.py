import gzip
import shutil

import pytest

from tools import log_grep
from tools.base import ProbeContext, Status

LOG = """step 1 loss 2.0
[rank3]:Traceback (most recent call last):
[rank3]:  File "train.py", line 10, in <module>
[rank3]:torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 3 has a total capacity of 79.1 GiB
[rank1]:torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 GiB. GPU 1 has a total capacity of 79.1 GiB
[rank0]:[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE, Timeout(ms)=600000)
node1:123:456 [0] NCCL WARN socket.c:540 NET/Socket : peer 10.0.0.2 closed connection
RuntimeError: CUDA error: no kernel image is available for execution on the device
RuntimeError: The server socket has failed to bind to [::]:29500 (errno: 98 - Address already in use).
ValueError: bad value
Killed
RuntimeError: CUDA error: an illegal memory access was encountered
RuntimeError: CUBLAS_STATUS_EXECUTION_FAILED when calling `cublasSgemm( handle)`
torch.distributed.DistStoreError: Timed out after 901 seconds waiting for clients. 1/2 clients joined.
NVIDIA GeForce RTX 5090 with CUDA capability sm_120 is not compatible with the current PyTorch installation.
"""
EXPECTED = {
    "CUDA_OOM": (2, 4, 5),
    "NCCL_WATCHDOG_TIMEOUT": (1, 6, 6),
    "NCCL_WARN": (1, 7, 7),
    "NO_KERNEL_IMAGE": (1, 8, 8),
    "ADDRESS_IN_USE": (1, 9, 9),
    "PYTHON_EXCEPTION": (1, 10, 10),
    "PROCESS_KILLED": (1, 11, 11),
    "CUDA_ERROR": (1, 12, 12),
    "CUBLAS_ERROR": (1, 13, 13),
    "DISTRIBUTED_TIMEOUT": (1, 14, 14),
    "CUDA_ARCH_UNSUPPORTED": (1, 15, 15),
}
ENGINES = ["python"] + (["grep"] if shutil.which("grep") else [])


def summary(scan):
    return {g.signature.code: (g.count, g.first_line, g.last_line) for g in scan.groups}


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("gz", [False, True])
def test_signatures_counts_and_lines(tmp_path, engine, gz):
    path = tmp_path / ("train.log.gz" if gz else "train.log")
    if gz:
        with gzip.open(path, "wt") as f:
            f.write(LOG)
    else:
        path.write_text(LOG)
    scan = log_grep.grep_log(path, engine="python" if gz else engine)
    assert summary(scan) == EXPECTED
    oom = next(g for g in scan.groups if g.signature.code == "CUDA_OOM")
    assert oom.ranks == {1, 3}


def test_line_numbers_across_chunks_and_long_lines(tmp_path, monkeypatch):
    monkeypatch.setattr(log_grep, "CHUNK", 4096)
    monkeypatch.setattr(log_grep, "MAX_LINE", 1000)
    lines = ["ok"] * 5000
    lines[10] = "x" * 5000 + " NCCL WARN hidden past the line cap"  # not seen: beyond MAX_LINE
    lines[11] = "NCCL WARN visible " + "y" * 9000
    lines[2999] = "RuntimeError: CUDA error: device-side assert triggered"
    lines[4999] = "RuntimeError: CUDA error: device-side assert triggered"
    path = tmp_path / "a.log"
    path.write_text("\n".join(lines))  # no trailing newline
    for engine in ENGINES:
        scan = log_grep.grep_log(path, engine=engine)
        assert summary(scan) == {"NCCL_WARN": (1, 12, 12), "CUDA_ERROR": (2, 3000, 5000)}, engine
    assert log_grep.grep_log(path, engine="python").lines == 5000


def test_group_cap_bounds_memory(tmp_path):
    path = tmp_path / "many.log"
    path.write_text("".join(f"Err{'x' * (i % 7)}{chr(97 + i % 26)}{i}Error: boom\n" for i in range(1000)))
    scan = log_grep.grep_log(path, max_groups=5)
    assert len(scan.groups) <= 5 and scan.dropped_groups > 0


def test_probe_findings_and_topics(tmp_path):
    path = tmp_path / "train.log"
    path.write_text(LOG)
    result = log_grep.probe(ProbeContext(log_paths=(path,), environ={}))
    assert result.status == Status.PROBLEM
    codes = [f.code for f in result.findings]
    assert "NCCL_WATCHDOG_TIMEOUT" in codes and "CUDA_OOM" in codes
    oom = next(f for f in result.findings if f.code == "CUDA_OOM")
    assert "ranks 1,3" in oom.summary and "train.log:4-5" in oom.evidence
    assert "cuda out of memory" in oom.topics


def test_binary_file_is_error(tmp_path):
    path = tmp_path / "core.bin"
    path.write_bytes(b"\x7fELF\x00\x00\x01RuntimeError: x\n")
    result = log_grep.probe(ProbeContext(log_paths=(path,), environ={}))
    assert result.status == Status.ERROR
    assert "binary file" in result.summary
    assert result.evidence["errors"][0]["code"] == "LOG_BINARY"


@pytest.mark.parametrize("via_symlink", [False, True])
def test_path_outside_allowed_roots_refused(tmp_path, via_symlink):
    allowed, secret = tmp_path / "logs", tmp_path / "etc"
    allowed.mkdir()
    secret.mkdir()
    (secret / "shadow").write_text("RuntimeError: should never be read\n")
    target = secret / "shadow"
    if via_symlink:  # a link inside the allowed root pointing outside it
        (allowed / "link.log").symlink_to(target)
        target = allowed / "link.log"
    ctx = ProbeContext(allowed_roots=(allowed,), environ={})
    result = log_grep.probe(ctx, paths=(target,))
    assert result.status == Status.ERROR
    assert result.evidence["errors"][0]["code"] == "LOG_PATH_REFUSED"
    assert "refusing" in result.summary


def test_allowed_root_file_is_read(tmp_path):
    (tmp_path / "logs").mkdir()
    path = tmp_path / "logs" / "r.log"
    path.write_text("Killed\n")
    result = log_grep.probe(ProbeContext(allowed_roots=(tmp_path / "logs",), environ={}), paths=(path,))
    assert [f.code for f in result.findings] == ["PROCESS_KILLED"]


def test_clean_log_ok_and_no_logs_unavailable(tmp_path):
    path = tmp_path / "ok.log"
    path.write_text("step 1 loss 1.0\nstep 2 loss 0.9\n")
    assert log_grep.probe(ProbeContext(log_paths=(path,), environ={})).status == Status.OK
    assert log_grep.available(ProbeContext(environ={})) == (False, "no log files given")


def test_secret_in_log_line_masked(tmp_path):
    path = tmp_path / "s.log"
    path.write_text("ValueError: bad token hf_abcdefghijklmnopqrstuvwxyz\n")
    result = log_grep.probe(ProbeContext(log_paths=(path,), environ={}))
    assert "hf_abcdefghij" not in repr(result)
