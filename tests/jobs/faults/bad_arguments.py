"""Fault: the launch command passes a flag the script does not define (`--learning-rate` for `--lr`)."""

from __future__ import annotations

import argparse

import torch
import trainkit
from trainkit import log


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="train the regression model")
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=16)
    return parser.parse_args()  # fault: error: unrecognized arguments


def main() -> None:
    args = parse_args()
    rank, world = trainkit.setup()
    model = trainkit.make_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
    loader = trainkit.make_loader(trainkit.Regression(), batch_size=args.batch_size)
    for epoch, step, batch in trainkit.batches(loader, epochs=args.epochs):
        loss = trainkit.train_step(model, optimizer, batch, world)
        log.info("epoch %d step %d loss %.4f", epoch, step, loss)
    trainkit.finish()


if __name__ == "__main__":
    main()
