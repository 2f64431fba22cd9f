"""Fault: one rank calls an all_reduce that the others never call (a metric reduced under `if rank == ...`)."""

from __future__ import annotations

import torch
import torch.distributed as dist
import trainkit
from trainkit import log

LOGGING_RANK, LOG_EVERY = 1, 4


def main() -> None:
    rank, world = trainkit.setup()
    model = trainkit.make_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    loader = trainkit.make_loader(trainkit.Regression())
    for epoch, step, batch in trainkit.batches(loader, epochs=2):
        loss = trainkit.train_step(model, optimizer, batch, world)
        if rank == LOGGING_RANK and step % LOG_EVERY == 0:
            mean_loss = torch.tensor([loss])
            dist.all_reduce(mean_loss)  # fault: only this rank calls it
            log.info("epoch %d step %d mean loss %.4f", epoch, step, mean_loss.item() / world)
    trainkit.finish()


if __name__ == "__main__":
    main()
