"""Fault: every rank resumes from a checkpoint saved by a different model (stage 1's nn.Sequential) and fails to load it."""

from __future__ import annotations

import argparse

import torch
import trainkit
from torch import nn
from trainkit import log


class Regressor(nn.Module):
    """Stage 2's model: the same layers under new names."""

    def __init__(self, features: int = 16, hidden: int = 32) -> None:
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(features, hidden), nn.ReLU())
        self.head = nn.Linear(hidden, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(x))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--resume", required=True)
    args = parser.parse_args()
    rank, world = trainkit.setup()
    model = Regressor()
    log.info("resuming from %s", args.resume)
    model.load_state_dict(torch.load(args.resume, map_location="cpu"))  # fault: Missing key(s) in state_dict
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    loader = trainkit.make_loader(trainkit.Regression())
    for epoch, step, batch in trainkit.batches(loader, epochs=1):
        loss = trainkit.train_step(model, optimizer, batch, world)
        log.info("epoch %d step %d loss %.4f", epoch, step, loss)
    trainkit.finish()


if __name__ == "__main__":
    main()
