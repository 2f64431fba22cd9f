"""Fault: one rank gets a batch of very long documents; its attention scores do not fit in GPU memory (uncaught)."""

from __future__ import annotations

import gpukit
import torch
from gpukit import log
from torch.distributed.elastic.multiprocessing.errors import record

LONG_RANK, LONG_STEP, LONG_SEQ = 1, 4, 200_000  # 200k x 200k float32 scores: 149 GiB


def attention_scores(seq: int, device: torch.device) -> torch.Tensor:
    q = torch.randn(seq, 64, device=device)
    k = torch.randn(seq, 64, device=device)
    return (q @ k.T).softmax(dim=-1)  # fault: torch.OutOfMemoryError on the long batch


@record
def main() -> None:
    rank, world, device = gpukit.setup()
    model = gpukit.make_model(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for step, batch in gpukit.batches(device, steps=12):
        seq = LONG_SEQ if (rank == LONG_RANK and step == LONG_STEP) else 512
        attention_scores(seq, device)
        loss = gpukit.train_step(model, optimizer, batch, world)
        log.info("step %d loss %.4f (seq %d, %.0f MiB allocated)", step, loss, seq, torch.cuda.memory_allocated() / 2**20)
    gpukit.finish()


if __name__ == "__main__":
    main()
