"""Fault: launched with --nproc-per-node larger than the GPUs this node has: set_device(LOCAL_RANK) fails."""

from __future__ import annotations

import logging
import os

import torch
import torch.distributed as dist

log = logging.getLogger("train")


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    local_rank = int(os.environ["LOCAL_RANK"])
    log.info("local rank %d: %d GPU(s) visible", local_rank, torch.cuda.device_count())
    torch.cuda.set_device(local_rank)  # fault: invalid device ordinal on local rank >= device_count
    dist.init_process_group("nccl", device_id=torch.device("cuda", local_rank))
    dist.barrier()
    log.info("ready")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
