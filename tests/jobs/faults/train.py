"""A healthy data-parallel run: the control job, and the script the launcher faults (port, rendezvous) start."""

from __future__ import annotations

import torch
import trainkit
from trainkit import log


def main() -> None:
    rank, world = trainkit.setup()
    model = trainkit.make_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    loader = trainkit.make_loader(trainkit.Regression())
    for epoch, step, batch in trainkit.batches(loader, epochs=2):
        loss = trainkit.train_step(model, optimizer, batch, world)
        if step % 5 == 0:
            log.info("epoch %d step %d loss %.4f", epoch, step, loss)
    log.info("training done")
    trainkit.finish()


if __name__ == "__main__":
    main()
