"""Fault: one rank (the one that also evaluates) sizes a feature cache from a wrong config and runs out of host memory."""

from __future__ import annotations

import torch
import trainkit
from torch.distributed.elastic.multiprocessing.errors import record
from trainkit import log

EVAL_RANK, EVAL_EVERY = 2, 4
CACHE_ITEMS = 10**13  # meant to be 10**3 samples: a config typo


@record
def main() -> None:
    rank, world = trainkit.setup()
    model = trainkit.make_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    loader = trainkit.make_loader(trainkit.Regression())
    for epoch, step, batch in trainkit.batches(loader, epochs=2):
        loss = trainkit.train_step(model, optimizer, batch, world)
        log.info("epoch %d step %d loss %.4f", epoch, step, loss)
        if rank == EVAL_RANK and step % EVAL_EVERY == 0:
            log.info("building the evaluation feature cache")
            cache = torch.empty(CACHE_ITEMS)  # fault: DefaultCPUAllocator can't allocate memory
            cache.zero_()
    trainkit.finish()


if __name__ == "__main__":
    main()
