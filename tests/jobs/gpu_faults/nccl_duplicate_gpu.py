"""Fault: the script never sets the device from LOCAL_RANK, so every rank's NCCL communicator uses cuda:0."""

from __future__ import annotations

import logging
from datetime import timedelta

import torch
import torch.distributed as dist

log = logging.getLogger("train")


def main() -> None:
    dist.init_process_group("nccl", timeout=timedelta(seconds=30))
    rank = dist.get_rank()
    logging.basicConfig(level=logging.INFO, format=f"%(asctime)s %(levelname)s rank{rank}: %(message)s")
    model = torch.nn.Linear(64, 1).cuda()  # fault: no torch.cuda.set_device(local_rank): cuda:0 on every rank
    for param in model.parameters():
        dist.broadcast(param.data, src=0)  # NCCL's communicator is created here
    log.info("parameters broadcast")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
