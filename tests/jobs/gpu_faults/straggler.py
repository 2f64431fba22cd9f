"""Fault: one rank's GPU is busy with a long kernel (a slow custom op) before its collectives; the others wait.

Tensor parallel size 1: each rank has a one-rank NCCL group (its "TP group"), and the data-parallel group is
gloo with CUDA tensors. DP_TIMEOUT_S and TP_TIMEOUT_S choose which times out first: the peers in gloo, or the
straggler's own NCCL watchdog (with the Flight Recorder dump when TORCH_NCCL_DUMP_ON_TIMEOUT=1).
"""

from __future__ import annotations

import os
from datetime import timedelta

import gpukit
import torch
import torch.distributed as dist
from gpukit import log

SLOW_RANK, SLOW_STEP, SLOW_S = 1, 4, 45


def main() -> None:
    os.environ["PG_TIMEOUT_S"] = os.environ.get("DP_TIMEOUT_S", "20")
    rank, world, device = gpukit.setup()
    tp_group, _ = dist.new_subgroups(group_size=1, backend="nccl",
                                     timeout=timedelta(seconds=int(os.environ.get("TP_TIMEOUT_S", "60"))))
    model = gpukit.make_model(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for step, batch in gpukit.batches(device, steps=8):
        if rank == SLOW_RANK and step == SLOW_STEP:
            log.info("step %d: running the fused custom kernel", step)
            torch.cuda._sleep(int(1.98e9 * SLOW_S))  # fault: ~45 s of GPU time
        optimizer.zero_grad()
        hidden = model[0](batch["input"])
        with torch.no_grad():
            dist.all_reduce(hidden, group=tp_group)  # the TP all_reduce (NCCL)
        loss = torch.nn.functional.mse_loss(model[2](model[1](hidden)), batch["target"])
        loss.backward()
        gpukit.all_reduce_grads(model, world)  # the DP all_reduce (gloo)
        optimizer.step()
        log.info("step %d loss %.4f", step, loss.item())
    gpukit.finish()


if __name__ == "__main__":
    main()
