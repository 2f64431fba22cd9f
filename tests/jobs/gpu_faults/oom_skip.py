"""Fault: one rank runs out of GPU memory, and the loop's skip-the-batch handler (fairseq's habit) hides it:
that rank skips one gradient all_reduce, the ranks' collectives no longer pair up, and every rank times out."""

from __future__ import annotations

import gpukit
import torch
from gpukit import log

LONG_RANK, LONG_STEP, LONG_SEQ = 2, 3, 200_000


def attention_scores(seq: int, device: torch.device) -> torch.Tensor:
    q = torch.randn(seq, 64, device=device)
    k = torch.randn(seq, 64, device=device)
    return (q @ k.T).softmax(dim=-1)


def main() -> None:
    rank, world, device = gpukit.setup()
    model = gpukit.make_model(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for step, batch in gpukit.batches(device, steps=8):
        seq = LONG_SEQ if (rank == LONG_RANK and step == LONG_STEP) else 512
        try:
            attention_scores(seq, device)
            loss = gpukit.train_step(model, optimizer, batch, world)
        except torch.OutOfMemoryError:
            log.exception("out of memory on a batch of seq %d; skipping it", seq)  # fault: the batch is skipped
            optimizer.zero_grad(set_to_none=True)
            torch.cuda.empty_cache()
            continue
        log.info("step %d loss %.4f", step, loss)
    gpukit.finish()


if __name__ == "__main__":
    main()
