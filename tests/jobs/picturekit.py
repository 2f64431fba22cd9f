"""A 16-rank job on two nodes (node-a: ranks 0-7, node-b: ranks 8-15) that failed, written as its logs are: one
file per rank (as `srun --output=rank%t.log` or a per-rank tee leaves them) and each node's torchrun console, in
the formats the job reader reads (Python logging's times, c10's glog headers, NCCL's host:pid:tid prefixes,
torchrun's failure table).

What happened: rank 11 (node-b) ran out of GPU memory at 10:21:37 in step 5821; node-b's torchrun stopped its other
ranks with SIGTERM two seconds later; on node-a, ranks 0-6 waited in that step's all-reduce until the NCCL watchdog's
10 minutes ran out (10:31:37) and took their processes down; rank 7 had stopped printing at 10:21:30 (stuck in its
data loader) and never reached the all-reduce; node-a's torchrun then stopped it. The triage's verdict: rank 11
failed first; the picture: 16 lanes in two nodes, rank 11's OOM marked first, the watchdog timeouts and SIGTERMs
greyed after it, rank 7 absent from the all-reduce.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

NODES = {"node-a": range(0, 8), "node-b": range(8, 16)}
FAILED, QUIET = 11, 7
START = datetime(2026, 3, 2, 10, 14, 5)
OOM_AT = datetime(2026, 3, 2, 10, 21, 37, 412000)
WATCHDOG_AT = OOM_AT + timedelta(minutes=10)
SEQ = 5821


def node_of(rank: int) -> str:
    return next(node for node, ranks in NODES.items() if rank in ranks)


def _stamp(when: datetime) -> str:
    return when.strftime("%Y-%m-%d %H:%M:%S,") + f"{when.microsecond // 1000:03d}"


def _glog(level: str, when: datetime, pid: int, where: str) -> str:
    return f"[{level}{when:%m%d %H:%M:%S}.{when.microsecond:06d} {pid} {where}]"


def rank_lines(rank: int) -> list[str]:
    node, local, pid = node_of(rank), rank % 8, 4100 + rank
    lines = [f"{node}:{pid}:{pid} [{local}] NCCL INFO comm 0x55d1c0a{rank:02x}0 rank {rank} nRanks 16 nNodes 2 "
             f"localRanks 8 localRank {local} MNNVL 0",
             f"{_stamp(START)} INFO rank{rank}: process group ready: rank {rank} of 16 (nccl)"]
    last = START
    for minute in range(1, 8):
        last = START + timedelta(minutes=minute, seconds=rank * 0.1)
        if rank == QUIET and last > OOM_AT - timedelta(seconds=7):
            break
        lines.append(f"{_stamp(last)} INFO rank{rank}: step {SEQ - 8 + minute} loss {2.4 - minute * 0.05:.4f}")
    if rank == QUIET:
        lines.append(f"{_stamp(OOM_AT - timedelta(seconds=7))} INFO rank{rank}: loading shard 913 from /data/shards")
        return lines
    if rank == FAILED:
        lines.append(f"{_stamp(OOM_AT)} INFO rank{rank}: step {SEQ} forward")
        lines += [
            "Traceback (most recent call last):",
            '  File "/home/user/job/train.py", line 214, in <module>',
            "    main()",
            '  File "/home/user/job/train.py", line 188, in main',
            "    logits = model(batch)",
            '  File "/home/user/venv/lib/python3.11/site-packages/torch/nn/modules/module.py", line 1751, in _wrapped_call_impl',
            "    return self._call_impl(*args, **kwargs)",
            '  File "/home/user/job/model.py", line 97, in attention',
            "    scores = q @ k.transpose(-2, -1)",
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.63 GiB. GPU 3 has a total capacity of "
            "79.11 GiB of which 2.61 GiB is free. Of the allocated memory 74.15 GiB is allocated by PyTorch.",
        ]
        return lines
    if node_of(rank) == "node-b":  # stopped by node-b's torchrun before the watchdog fired
        return lines
    when = WATCHDOG_AT + timedelta(milliseconds=40 * rank)
    lines += [
        f"{_glog('E', when, pid, 'ProcessGroupNCCL.cpp:632')} [Rank {rank}] Watchdog caught collective operation timeout: "
        f"WorkNCCL(SeqNum={SEQ}, OpType=ALLREDUCE, NumelIn=262144, NumelOut=262144, Timeout(ms)=600000) ran for "
        "600043 milliseconds before timing out.",
        f"{_glog('E', when + timedelta(milliseconds=5), pid, 'ProcessGroupNCCL.cpp:2168')} [PG ID 0 PG GUID 0(default_pg) "
        f"Rank {rank}] Timeout at NCCL work: {SEQ}, last enqueued NCCL work: {SEQ}, last completed NCCL work: {SEQ - 1}.",
        f"{_glog('E', when + timedelta(milliseconds=9), pid, 'ProcessGroupNCCL.cpp:696')} [Rank {rank}] To avoid data "
        "inconsistency, we are taking the entire process down.",
    ]
    return lines


def launcher_lines(node: str) -> list[str]:
    """The node's torchrun console after its workers ended: the SIGTERMs it sent and its failure table."""
    ranks = list(NODES[node])
    if node == "node-b":
        ended = OOM_AT + timedelta(seconds=2)
        first, codes = FAILED, {r: (1 if r == FAILED else -15) for r in ranks}
    else:
        ended = WATCHDOG_AT + timedelta(seconds=2)
        first, codes = 0, {r: (-15 if r == QUIET else -6) for r in ranks}
    lines = [f"W{ended:%m%d %H:%M:%S}.100000 900 torch/distributed/elastic/multiprocessing/api.py:897] Sending process "
             f"{4100 + r} closing signal SIGTERM" for r in ranks if codes[r] == -15]
    table = ["torch.distributed.elastic.multiprocessing.errors.ChildFailedError:", "=" * 60, "train.py FAILED",
             "-" * 60, "Failures:"]
    others = [r for r in ranks if r != first]
    for index, rank in enumerate(others, 1):
        table += [f"[{index}]:", f"  time      : {ended:%Y-%m-%d_%H:%M:%S}", f"  host      : {node}",
                  f"  rank      : {rank} (local_rank: {rank % 8})", f"  exitcode  : {codes[rank]} (pid: {4100 + rank})",
                  "  error_file: <N/A>", "  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html"]
    table += ["-" * 60, "Root Cause (first observed failure):", "[0]:", f"  time      : {ended:%Y-%m-%d_%H:%M:%S}",
              f"  host      : {node}", f"  rank      : {first} (local_rank: {first % 8})",
              f"  exitcode  : {codes[first]} (pid: {4100 + first})", "  error_file: <N/A>",
              "  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html", "=" * 60]
    return lines + table


def write_job(folder: Path) -> Path:
    """The job's logs in ``folder``: rank0.log ... rank15.log and torchrun-node-a.log, torchrun-node-b.log."""
    folder.mkdir(parents=True, exist_ok=True)
    for rank in range(16):
        (folder / f"rank{rank}.log").write_text("\n".join(rank_lines(rank)) + "\n", encoding="utf-8")
    for node in NODES:
        (folder / f"torchrun-{node}.log").write_text("\n".join(launcher_lines(node)) + "\n", encoding="utf-8")
    return folder


def combined_log(path: Path) -> Path:
    """The same job as one console log (every worker line prefixed ``[rankN]:``, each node's torchrun after it)."""
    lines = [f"[rank{rank}]:{line}" for rank in range(16) for line in rank_lines(rank)]
    lines += [line for node in NODES for line in launcher_lines(node)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path
