"""Fault: one rank's shard was tokenised with a bigger vocabulary: an embedding index out of range on the GPU.
The kernel's assert is reported asynchronously, at the next synchronisation (here: the gradient all_reduce)."""

from __future__ import annotations

import gpukit
import torch
from gpukit import log
from torch import nn

VOCAB, BAD_RANK, BAD_STEP = 1000, 1, 3


class TinyLM(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, 64)
        self.head = nn.Linear(64, VOCAB)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.head(self.embed(tokens))


def main() -> None:
    rank, world, device = gpukit.setup()
    model = TinyLM().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    generator = torch.Generator().manual_seed(rank)
    for step in range(1, 10):
        vocab = VOCAB + 2000 if (rank == BAD_RANK and step == BAD_STEP) else VOCAB  # fault: ids past the vocabulary
        tokens = torch.randint(0, vocab, (8, 33), generator=generator).to(device)
        optimizer.zero_grad()
        logits = model(tokens[:, :-1])
        loss = nn.functional.cross_entropy(logits.reshape(-1, VOCAB), tokens[:, 1:].reshape(-1).clamp(max=VOCAB - 1))
        loss.backward()
        gpukit.all_reduce_grads(model, world)
        optimizer.step()
        log.info("step %d loss %.4f", step, loss.item())
    gpukit.finish()


if __name__ == "__main__":
    main()
