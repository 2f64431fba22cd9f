"""Fault: the evaluating rank feeds its held-out batch to the model without moving it to the GPU."""

from __future__ import annotations

import gpukit
import torch
from gpukit import log
from torch import nn

EVAL_RANK, EVAL_EVERY = 0, 4


def main() -> None:
    rank, world, device = gpukit.setup()
    model = gpukit.make_model(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    held_out = torch.randn(64, 64), torch.randn(64, 1)  # on the CPU
    for step, batch in gpukit.batches(device, steps=12):
        loss = gpukit.train_step(model, optimizer, batch, world)
        log.info("step %d loss %.4f", step, loss)
        if rank == EVAL_RANK and step % EVAL_EVERY == 0:
            with torch.no_grad():
                val = nn.functional.mse_loss(model(held_out[0]), held_out[1])  # fault: cpu tensor, cuda model
            log.info("step %d val loss %.4f", step, val.item())
    gpukit.finish()


if __name__ == "__main__":
    main()
