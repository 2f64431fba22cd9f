"""The worker `traindoc check nccl` starts on every rank through torchrun: barrier, all_reduce, all_gather and
broadcast over a range of sizes, each checked for the right result and timed.

It imports nothing of traindoc (only torch and the standard library), so the same file runs on another node
where only the training environment exists (`traindoc check nccl --nodes N` prints the command for each node).
Each rank appends one JSON line per event to ``<progress-dir>/rank-<rank>.jsonl`` (launched, joined, started,
done, error, finished), written with one ``write`` each and flushed, so the parent names the rank that failed or
hung even when the job is killed. Rank 0 also prints a line per operation and size to standard output.

Two guards end a worker that nothing else ends: it exits when the traindoc process that started the check is
gone (``TRAINDOC_CHECK_PARENT``), and after its whole time budget.

For tests only: ``TRAINDOC_CHECK_FAULT=hang:rank=R:op=OP`` makes rank R stop answering (sleep) before its first
OP, the way a rank stuck in its own code looks to the others. Nothing else reads it; a real run never sets it.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import threading
import time
from typing import Any

OPS = ("barrier", "all_reduce", "all_gather", "broadcast")
FAULT_VARIABLE = "TRAINDOC_CHECK_FAULT"  # tests only, see the module's docstring
PARENT_VARIABLE = "TRAINDOC_CHECK_PARENT"
BROADCAST_VALUE = 42.0
ELEMENT_BYTES = 4  # float32


def bus_factor(op: str, world: int) -> float:
    """Bus bandwidth over algorithm bandwidth, as nccl-tests defines it so that the figure compares with the
    hardware's peak whatever the rank count (https://github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md):
    all_reduce 2(n-1)/n, all_gather (n-1)/n, broadcast 1. A barrier moves no data."""
    if op == "all_reduce":
        return 2 * (world - 1) / world
    if op == "all_gather":
        return (world - 1) / world
    if op == "broadcast":
        return 1.0
    return 0.0


class Progress:
    """One rank's events, one JSON line each, appended with a single write (the parent reads while it runs)."""

    def __init__(self, folder: str, rank: int) -> None:
        self.fd = os.open(os.path.join(folder, f"rank-{rank}.jsonl"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        self.rank = rank
        self.lock = threading.Lock()

    def write(self, event: str, **fields: Any) -> None:
        line = json.dumps({"event": event, "rank": self.rank, "t": time.time(), **fields}) + "\n"
        with self.lock:
            os.write(self.fd, line.encode("utf-8"))


def _fault(rank: int) -> str | None:
    """The op before which this rank hangs (``TRAINDOC_CHECK_FAULT=hang:rank=R:op=OP``, tests only), or None."""
    spec = os.environ.get(FAULT_VARIABLE, "")
    fields = dict(part.split("=", 1) for part in spec.split(":")[1:] if "=" in part)
    if not spec.startswith("hang:") or fields.get("rank") != str(rank):
        return None
    return fields.get("op", "barrier")


def _guard(budget_s: float) -> None:
    """End this process when the traindoc process that started the check is gone, or after ``budget_s``."""
    parent = int(os.environ.get(PARENT_VARIABLE, "0") or 0)
    deadline = time.monotonic() + budget_s

    def watch() -> None:
        while time.monotonic() < deadline:
            if parent > 0 and not os.path.exists(f"/proc/{parent}"):
                os._exit(3)
            time.sleep(0.5)
        os._exit(4)

    threading.Thread(target=watch, name="traindoc-check-guard", daemon=True).start()


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="traindoc check: collectives on every rank (run by torchrun)")
    parser.add_argument("--backend", choices=("nccl", "gloo"), required=True)
    parser.add_argument("--sizes", required=True, help="bytes, comma-separated")
    parser.add_argument("--timeout", type=float, required=True, help="seconds each operation may take")
    parser.add_argument("--iters", type=int, default=5)
    parser.add_argument("--progress-dir", required=True)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _parse(sys.argv[1:] if argv is None else argv)
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    sizes = [int(s) for s in args.sizes.split(",") if s]
    progress = Progress(args.progress_dir, rank)
    progress.write("launched", pid=os.getpid(), pgid=os.getpgid(0), host=socket.gethostname(), local_rank=local_rank,
                   world=world)
    _guard(budget_s=args.timeout * (2 + len(OPS) * len(sizes)) + 120)
    where: dict[str, Any] = {"op": "init", "bytes": 0}
    try:
        return _run(args, rank, local_rank, world, sizes, progress, where)
    except BaseException as exc:  # what this rank saw, for the parent to read: then the launcher sees it fail
        progress.write("error", op=where["op"], bytes=where["bytes"], error=type(exc).__name__,
                       message=str(exc)[:4000])
        print(f"[rank {rank}] {where['op']} {where['bytes']} bytes: {type(exc).__name__}: {str(exc)[:500]}",
              file=sys.stderr, flush=True)
        return 1


def _run(args: argparse.Namespace, rank: int, local_rank: int, world: int, sizes: list[int], progress: Progress,
         where: dict[str, Any]) -> int:
    from datetime import timedelta

    import torch
    import torch.distributed as dist

    device = torch.device("cpu")
    if args.backend == "nccl":
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    kwargs: dict[str, Any] = {"backend": args.backend, "timeout": timedelta(seconds=args.timeout)}
    if args.backend == "nccl":
        kwargs["device_id"] = device  # the communicator is made now, so a broken transport shows at init
    dist.init_process_group(**kwargs)
    progress.write("joined", device=str(device), torch=torch.__version__,
                   nccl=".".join(map(str, torch.cuda.nccl.version())) if args.backend == "nccl" else "")
    hang_before = _fault(rank)

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    for op in OPS:
        for size in ([0] if op == "barrier" else sizes):
            where.update(op=op, bytes=size)
            if hang_before == op:
                while True:  # tests only (TRAINDOC_CHECK_FAULT): this rank stops answering
                    time.sleep(3600)
            progress.write("started", op=op, bytes=size)
            run, check = _operation(op, size, rank, world, device, torch, dist)
            run()  # the first call connects what it needs; it is not timed
            sync()
            iters = 1 if op == "barrier" else args.iters
            began = time.perf_counter()
            for _ in range(iters):
                run()
            sync()
            seconds = (time.perf_counter() - began) / iters
            correct = check()
            algbw = size / seconds / 1e9 if seconds > 0 and size else 0.0
            progress.write("done", op=op, bytes=size, seconds=seconds, algbw=algbw,
                           busbw=algbw * bus_factor(op, world), correct=correct)
            if rank == 0:
                print(f"{op:<10} {size:>12} B  {seconds * 1e6:>10.1f} us  busbw {algbw * bus_factor(op, world):8.3f} GB/s"
                      f"{'' if correct else '  WRONG RESULT'}", flush=True)
    dist.barrier()
    progress.write("finished")
    dist.destroy_process_group()
    return 0


def _operation(op: str, size: int, rank: int, world: int, device: Any, torch: Any, dist: Any) -> tuple[Any, Any]:
    """(run once, check the result) for ``op`` over ``size`` bytes (all_gather: the gathered total, as nccl-tests)."""
    if op == "barrier":
        return (lambda: dist.barrier()), (lambda: True)
    if op == "all_reduce":
        count = max(1, size // ELEMENT_BYTES)
        buffer = torch.empty(count, dtype=torch.float32, device=device)

        def all_reduce() -> None:
            buffer.fill_(rank + 1)
            dist.all_reduce(buffer)

        return all_reduce, lambda: bool(torch.all(buffer == world * (world + 1) / 2).item())
    if op == "all_gather":
        count = max(1, size // ELEMENT_BYTES // world)
        mine = torch.full((count,), float(rank + 1), dtype=torch.float32, device=device)
        gathered = [torch.empty(count, dtype=torch.float32, device=device) for _ in range(world)]
        return (lambda: dist.all_gather(gathered, mine)), \
            (lambda: all(bool(torch.all(part == i + 1).item()) for i, part in enumerate(gathered)))
    count = max(1, size // ELEMENT_BYTES)
    buffer = torch.empty(count, dtype=torch.float32, device=device)

    def broadcast() -> None:
        buffer.fill_(BROADCAST_VALUE if rank == 0 else -1.0)
        dist.broadcast(buffer, src=0)

    return broadcast, lambda: bool(torch.all(buffer == BROADCAST_VALUE).item())


if __name__ == "__main__":
    sys.exit(main())
