"""Fault: a custom Triton kernel (a fused scale-and-add) indexes past its buffer on one rank's odd-sized batch:
an illegal memory access, which also poisons the CUDA context."""

from __future__ import annotations

import gpukit
import torch
import triton
import triton.language as tl
from gpukit import log

BAD_RANK, BAD_STEP = 1, 3


@triton.jit
def scale_add(x_ptr, y_ptr, out_ptr, n, offset, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs + offset)  # fault: no mask, and a bad offset
    y = tl.load(y_ptr + offs, mask=offs < n)
    tl.store(out_ptr + offs, x * scale + y, mask=offs < n)


def fused(x: torch.Tensor, y: torch.Tensor, offset: int) -> torch.Tensor:
    out = torch.empty_like(y)
    n = y.numel()
    scale_add[(triton.cdiv(n, 1024),)](x, y, out, n, offset, 0.5, BLOCK=1024)
    return out


def main() -> None:
    rank, world, device = gpukit.setup()
    model = gpukit.make_model(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for step, batch in gpukit.batches(device, steps=10):
        offset = (1 << 36) if (rank == BAD_RANK and step == BAD_STEP) else 0
        batch["input"] = fused(batch["input"], batch["input"], offset)
        loss = gpukit.train_step(model, optimizer, batch, world)
        log.info("step %d loss %.4f", step, loss)
    gpukit.finish()


if __name__ == "__main__":
    main()
