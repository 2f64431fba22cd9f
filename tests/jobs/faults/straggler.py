"""Fault: one rank spends longer than the process-group timeout preparing its shard; the others wait at a barrier."""

from __future__ import annotations

import os
import time

import torch
import trainkit
from trainkit import log

SLOW_RANK = 1


def prepare_shard(rank: int) -> None:
    """Stands for a slow local step (tokenising a shard, a cold network filesystem)."""
    if rank == SLOW_RANK:
        seconds = int(os.environ.get("PG_TIMEOUT_S", "10")) + 20
        log.info("preparing shard %d (cache miss, this takes a while)", rank)
        time.sleep(seconds)  # fault: longer than the process-group timeout
    log.info("shard %d ready", rank)


def main() -> None:
    rank, world = trainkit.setup()
    model = trainkit.make_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    loader = trainkit.make_loader(trainkit.Regression())
    for epoch, step, batch in trainkit.batches(loader, epochs=1):
        loss = trainkit.train_step(model, optimizer, batch, world)
        log.info("epoch %d step %d loss %.4f", epoch, step, loss)
    prepare_shard(rank)
    torch.distributed.barrier()
    log.info("all shards ready")
    trainkit.finish()


if __name__ == "__main__":
    main()
