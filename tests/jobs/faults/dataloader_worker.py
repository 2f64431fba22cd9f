"""Fault: a DataLoader worker of one rank dies of SIGKILL while decoding a sample (as the OOM killer would do it)."""

from __future__ import annotations

import os
import signal

import torch
import trainkit
from trainkit import log

BAD_RANK, BAD_FETCH = 1, 40


class DecodedRegression(trainkit.Regression):
    """Samples "decoded" in the worker processes; one decode on the bad rank kills its worker."""

    def __init__(self, rank: int) -> None:
        super().__init__()
        self.rank = rank
        self.fetched = 0

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        self.fetched += 1
        if self.rank == BAD_RANK and self.fetched == BAD_FETCH:
            os.kill(os.getpid(), signal.SIGKILL)  # fault: the worker is killed by a signal
        return super().__getitem__(index)


def main() -> None:
    rank, world = trainkit.setup()
    model = trainkit.make_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    loader = trainkit.make_loader(DecodedRegression(rank), num_workers=2)
    for epoch, step, batch in trainkit.batches(loader, epochs=2):
        loss = trainkit.train_step(model, optimizer, batch, world)
        log.info("epoch %d step %d loss %.4f", epoch, step, loss)
    trainkit.finish()


if __name__ == "__main__":
    main()
