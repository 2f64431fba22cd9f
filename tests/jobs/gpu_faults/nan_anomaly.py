"""Fault: a corrupt record (NaN) in one rank's data; anomaly detection stops that rank in backward."""

from __future__ import annotations

import math

import gpukit
import torch
from gpukit import log

BAD_RANK, BAD_STEP = 1, 5


def main() -> None:
    rank, world, device = gpukit.setup()
    torch.autograd.set_detect_anomaly(True)
    model = gpukit.make_model(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for step, batch in gpukit.batches(device, steps=12):
        if rank == BAD_RANK and step == BAD_STEP:
            batch["input"][3, 7] = math.nan  # fault: a corrupt record
        loss = gpukit.train_step(model, optimizer, batch, world)
        log.info("step %d loss %.4f", step, loss)
    gpukit.finish()


if __name__ == "__main__":
    main()
