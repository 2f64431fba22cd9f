"""What every fault script shares, as a small project's `utils.py` would: process group, model, data, logging.

Each fault script is a real torchrun entry point; only its own file holds the fault.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import DataLoader, Dataset, DistributedSampler

log = logging.getLogger("train")


def setup() -> tuple[int, int]:
    """Join the gloo process group (short timeout: these jobs fail fast) and set up logging."""
    timeout = int(os.environ.get("PG_TIMEOUT_S", "10"))
    dist.init_process_group("gloo", timeout=timedelta(seconds=timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    logging.basicConfig(level=logging.INFO, format=f"%(asctime)s %(levelname)s rank{rank}: %(message)s")
    torch.manual_seed(1234 + rank)
    log.info("process group ready: rank %d of %d (gloo, timeout %ds)", rank, world, timeout)
    return rank, world


class Regression(Dataset[dict[str, torch.Tensor]]):
    """y = x @ w + noise: a dataset a tiny model learns in a few steps."""

    def __init__(self, size: int = 256, features: int = 16) -> None:
        generator = torch.Generator().manual_seed(0)
        self.x = torch.randn(size, features, generator=generator)
        self.y = self.x @ torch.randn(features, 1, generator=generator) + 0.01 * torch.randn(size, 1, generator=generator)

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        return {"input": self.x[index], "target": self.y[index]}


def make_model(features: int = 16, hidden: int = 32) -> nn.Module:
    return nn.Sequential(nn.Linear(features, hidden), nn.ReLU(), nn.Linear(hidden, 1))


def make_loader(dataset: Dataset[Any], batch_size: int = 16, collate_fn: Callable[..., Any] | None = None,
                num_workers: int = 0) -> DataLoader[Any]:
    sampler: DistributedSampler[Any] = DistributedSampler(dataset, shuffle=True, seed=0)
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler, collate_fn=collate_fn, num_workers=num_workers)


def all_reduce_grads(model: nn.Module, world: int) -> None:
    """Plain data parallelism: average the gradients over the ranks."""
    for param in model.parameters():
        if param.grad is not None:
            dist.all_reduce(param.grad)
            param.grad /= world


def batches(loader: DataLoader[Any], epochs: int) -> Iterator[tuple[int, int, Any]]:
    step = 0
    for epoch in range(epochs):
        sampler = loader.sampler
        if isinstance(sampler, DistributedSampler):
            sampler.set_epoch(epoch)
        for batch in loader:
            step += 1
            yield epoch, step, batch


def train_step(model: nn.Module, optimizer: torch.optim.Optimizer, batch: dict[str, torch.Tensor], world: int) -> float:
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(batch["input"]), batch["target"])
    loss.backward()
    all_reduce_grads(model, world)
    optimizer.step()
    return float(loss.item())


def finish() -> None:
    dist.barrier()
    dist.destroy_process_group()
