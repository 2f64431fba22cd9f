"""Fault: one rank's collate_fn raises KeyError mid-training; the others lose it in the next all_reduce."""

from __future__ import annotations

import torch
import trainkit
from trainkit import log

BAD_RANK, BAD_STEP = 1, 5


def main() -> None:
    rank, world = trainkit.setup()
    calls = 0

    def collate(samples: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
        nonlocal calls
        calls += 1
        if rank == BAD_RANK and calls == BAD_STEP:
            samples[0] = {"input": samples[0]["input"], "label": samples[0]["target"]}  # a renamed field
        targets = [s["target"] for s in samples]  # fault: KeyError 'target'
        return {"input": torch.stack([s["input"] for s in samples]), "target": torch.stack(targets)}

    model = trainkit.make_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    loader = trainkit.make_loader(trainkit.Regression(), collate_fn=collate)
    for epoch, step, batch in trainkit.batches(loader, epochs=3):
        loss = trainkit.train_step(model, optimizer, batch, world)
        log.info("epoch %d step %d loss %.4f", epoch, step, loss)
    trainkit.finish()


if __name__ == "__main__":
    main()
