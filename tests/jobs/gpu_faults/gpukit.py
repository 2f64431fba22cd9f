"""What every GPU fault script shares: a small project's `utils.py` for data-parallel training on CUDA.

The capture machine has one GPU, and NCCL refuses two ranks of one communicator on one device, so the
data-parallel group is gloo carrying CUDA tensors (gloo copies them through the host); every rank uses
``cuda:{LOCAL_RANK % device_count}``. Scripts that need NCCL say so in their own file.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from datetime import timedelta

import torch
import torch.distributed as dist
from torch import nn

log = logging.getLogger("train")


def setup(backend: str = "gloo") -> tuple[int, int, torch.device]:
    """Join the process group (short timeout: these jobs fail fast), pick this rank's GPU, set up logging."""
    timeout = int(os.environ.get("PG_TIMEOUT_S", "20"))
    local_rank = int(os.environ["LOCAL_RANK"])
    device = torch.device("cuda", local_rank % torch.cuda.device_count())
    torch.cuda.set_device(device)
    dist.init_process_group(backend, timeout=timedelta(seconds=timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    logging.basicConfig(level=logging.INFO, format=f"%(asctime)s %(levelname)s rank{rank}: %(message)s")
    torch.manual_seed(1234 + rank)
    log.info("process group ready: rank %d of %d (%s, timeout %ds) on %s (%s)", rank, world, backend, timeout,
             device, torch.cuda.get_device_name(device))
    return rank, world, device


def make_model(device: torch.device, features: int = 64, hidden: int = 256) -> nn.Module:
    return nn.Sequential(nn.Linear(features, hidden), nn.ReLU(), nn.Linear(hidden, 1)).to(device)


def batches(device: torch.device, steps: int, batch: int = 32, features: int = 64) -> Iterator[tuple[int, dict[str, torch.Tensor]]]:
    generator = torch.Generator().manual_seed(0)
    w = torch.randn(features, 1, generator=generator)
    for step in range(1, steps + 1):
        x = torch.randn(batch, features, generator=generator)
        yield step, {"input": x.to(device), "target": (x @ w).to(device)}


def all_reduce_grads(model: nn.Module, world: int, group: dist.ProcessGroup | None = None) -> None:
    """Plain data parallelism: average the gradients over the ranks."""
    for param in model.parameters():
        if param.grad is not None:
            dist.all_reduce(param.grad, group=group)
            param.grad /= world


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
