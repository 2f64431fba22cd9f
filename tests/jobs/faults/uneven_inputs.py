"""Fault: each rank reads its own file shard without a DistributedSampler; rank 1's shard is longer, so it calls the
loop's all_reduce after the others have left the loop for the final barrier (uneven inputs)."""

from __future__ import annotations

import torch
import trainkit
from torch.utils.data import DataLoader, Subset
from trainkit import log

SHARD, LONGER_RANK, EXTRA = 64, 1, 32


def main() -> None:
    rank, world = trainkit.setup()
    model = trainkit.make_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    start = rank * SHARD + (EXTRA if rank > LONGER_RANK else 0)
    shard = Subset(trainkit.Regression(), range(start, start + SHARD + (EXTRA if rank == LONGER_RANK else 0)))
    step = 0
    for step, batch in enumerate(DataLoader(shard, batch_size=16), 1):  # fault: shards of different lengths
        loss = trainkit.train_step(model, optimizer, batch, world)
        log.info("step %d loss %.4f", step, loss)
    log.info("shard done after %d steps", step)
    trainkit.finish()


if __name__ == "__main__":
    main()
