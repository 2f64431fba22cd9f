"""Fault: per-class counts reduced across ranks with torch.bincount without minlength: one rank's shard lacks the
last class, so its tensor is shorter. Run with TORCH_DISTRIBUTED_DEBUG=DETAIL to see the collective fingerprints."""

from __future__ import annotations

import gpukit
import torch
import torch.distributed as dist
from gpukit import log

CLASSES = 5


def main() -> None:
    rank, world, device = gpukit.setup()
    model = gpukit.make_model(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for step, batch in gpukit.batches(device, steps=4):
        loss = gpukit.train_step(model, optimizer, batch, world)
        log.info("step %d loss %.4f", step, loss)
    labels = torch.randint(0, CLASSES - (1 if rank == 1 else 0), (256,), device=device)
    counts = torch.bincount(labels)  # fault: no minlength=CLASSES
    dist.all_reduce(counts)
    log.info("class counts %s", counts.tolist())
    gpukit.finish()


if __name__ == "__main__":
    main()
