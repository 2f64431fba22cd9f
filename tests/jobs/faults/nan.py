"""Fault: a corrupt record (inf) in one rank's shard makes its loss NaN; the loop stops the way DETR/timm loops do."""

from __future__ import annotations

import math
import sys

import torch
import trainkit
from torch import nn
from trainkit import log

BAD_RANK, BAD_STEP, BATCH = 1, 7, 16


def main() -> None:
    rank, world = trainkit.setup()
    dataset = trainkit.Regression()
    loader = trainkit.make_loader(dataset, batch_size=BATCH)
    if rank == BAD_RANK:
        order = list(loader.sampler)  # epoch 0's order of this rank's shard
        dataset.x[order[(BAD_STEP - 1) * BATCH]] = torch.tensor([math.inf, -math.inf] * 8)  # a corrupt record
    model = trainkit.make_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    for epoch, step, batch in trainkit.batches(loader, epochs=2):
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(batch["input"]), batch["target"])
        loss_value = loss.item()
        if not math.isfinite(loss_value):
            print(f"Loss is {loss_value} at step {step}, stopping training")  # fault: NaN loss (DETR's words)
            sys.exit(1)
        loss.backward()
        trainkit.all_reduce_grads(model, world)
        optimizer.step()
        log.info("epoch %d step %d loss %.4f", epoch, step, loss_value)
    trainkit.finish()


if __name__ == "__main__":
    main()
