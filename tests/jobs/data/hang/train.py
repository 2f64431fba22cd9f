"""A job that hangs on purpose, for traindoc's hang tests (a real torchrun entry point on CPU/gloo).

HANG_MODE=straggler: ranks 0 and 2 wait in dist.barrier while rank 1 is still in load_shard.
HANG_MODE=mismatch: rank 1 calls dist.all_reduce while the others wait in dist.barrier.
HANG_MODE=ddp: a DistributedDataParallel model; ranks 0 and 2 wait inside loss.backward() (DDP's gradient
all-reduce, which the autograd engine waits on) while rank 1 is still in load_shard.
HANG_MODE=fsdp: the same with FSDP2 (fully_shard): ranks 0 and 2 wait in the forward's parameter all-gather.
HANG_MODE=init: rank 1 is in load_shard before init_process_group, where ranks 0 and 2 wait for it.
HANG_DEBUG_PORT=N: also start torch's debug server (its frontend on rank 0, port N).
HANG_READY_DIR=DIR: each rank writes its pid to DIR/rankN just before it hangs.
HANG_FR_DIR=DIR: each rank writes its Flight Recorder trace to DIR/nccl_trace_rank_N once it hangs, as
TORCH_FR_DUMP_TEMP_FILE would on a timeout (gloo records with TORCH_FR_BUFFER_SIZE set).
HANG_LIFETIME_S (default 240) bounds the whole job: every rank exits by itself after it, so a test that dies
without its teardown leaves nothing behind for long.
"""

from __future__ import annotations

import os
import threading
import time
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist

LIFETIME_S = float(os.environ.get("HANG_LIFETIME_S", "240"))


def load_shard(rank: int) -> None:
    """Stands for a slow local step (a cold network filesystem): it outlasts the test."""
    time.sleep(LIFETIME_S)  # straggler: rank 1 is here


def mark_ready(rank: int) -> None:
    ready = os.environ.get("HANG_READY_DIR")
    if ready:
        Path(ready, f"rank{rank}").write_text(str(os.getpid()))


def dump_flight_recorder(rank: int, delay_s: float = 1.0) -> None:
    """Once the collective is entered, write the Flight Recorder trace where the analyzer looks for it."""
    target = os.environ.get("HANG_FR_DIR")
    if not target:
        return

    def write() -> None:
        path = Path(target, f"nccl_trace_rank_{rank}")
        temporary = path.with_name(f".{path.name}.tmp")
        temporary.write_bytes(torch._C._distributed_c10d._dump_fr_trace())
        temporary.rename(path)

    timer = threading.Timer(delay_s, write)
    timer.daemon = True
    timer.start()


def wrapped(mode: str) -> torch.nn.Module | None:
    """A small model under DDP or FSDP2 that has taken two steps (so its buckets and shards are set up)."""
    if mode not in ("ddp", "fsdp"):
        return None
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    if mode == "ddp":
        model = torch.nn.parallel.DistributedDataParallel(model)
    else:
        from torch.distributed.fsdp import fully_shard

        for layer in model:
            if isinstance(layer, torch.nn.Linear):
                fully_shard(layer)
        fully_shard(model)
    for _ in range(2):
        model(torch.ones(2, 8)).sum().backward()
    return model


def main() -> None:
    threading.Timer(LIFETIME_S, os._exit, (3,)).start()  # the job's own deadline
    if os.environ.get("HANG_MODE") == "init":
        mark_ready(int(os.environ["RANK"]))
        if os.environ["RANK"] == "1":
            load_shard(1)
    dist.init_process_group("gloo", timeout=timedelta(seconds=LIFETIME_S + 60))  # init: ranks 0 and 2 wait here
    rank = dist.get_rank()
    port = os.environ.get("HANG_DEBUG_PORT")
    if port:
        from torch.distributed.debug import start_debug_server

        start_debug_server(port=int(port))
    tensor = torch.ones(4)
    for _ in range(3):
        dist.all_reduce(tensor)
    mode = os.environ.get("HANG_MODE", "straggler")
    model = wrapped(mode)
    dump_flight_recorder(rank)
    mark_ready(rank)
    if model is not None:
        if rank == 1:
            load_shard(rank)
        loss = model(torch.ones(2, 8)).sum()  # fsdp: ranks 0 and 2 wait here, in the parameters' all-gather
        loss.backward()  # ddp: ranks 0 and 2 wait here, in the gradients' all-reduce
    elif mode == "mismatch":
        if rank == 1:
            dist.all_reduce(tensor)  # mismatch: rank 1 waits here
        else:
            dist.barrier()  # mismatch: ranks 0 and 2 wait here
    else:
        if rank == 1:
            load_shard(rank)
        dist.barrier()  # straggler: ranks 0 and 2 wait here


if __name__ == "__main__":
    main()
