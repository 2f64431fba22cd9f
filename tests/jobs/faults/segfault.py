"""Fault: a native helper on rank 2 reads through a null pointer (SIGSEGV): no Python traceback, only an exit code."""

from __future__ import annotations

import ctypes

import torch
import trainkit
from trainkit import log

CRASH_RANK, CRASH_STEP = 2, 3


def main() -> None:
    rank, world = trainkit.setup()
    model = trainkit.make_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    loader = trainkit.make_loader(trainkit.Regression())
    for epoch, step, batch in trainkit.batches(loader, epochs=1):
        if rank == CRASH_RANK and step == CRASH_STEP:
            ctypes.string_at(0)  # fault: a null pointer read in native code
        loss = trainkit.train_step(model, optimizer, batch, world)
        log.info("epoch %d step %d loss %.4f", epoch, step, loss)
    trainkit.finish()


if __name__ == "__main__":
    main()
