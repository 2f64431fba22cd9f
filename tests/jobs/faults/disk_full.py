"""Fault: rank 0 saves a checkpoint (model + Adam state) to a volume too small for it."""

from __future__ import annotations

import argparse
import os

import torch
import torch.distributed as dist
import trainkit
from trainkit import log

SAVE_EVERY = 6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--file-object", action="store_true", help="save through an open file, as fsspec-style code does")
    args = parser.parse_args()
    rank, world = trainkit.setup()
    ckpt_dir = os.environ["CKPT_DIR"]
    model = trainkit.make_model(hidden=8192)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    loader = trainkit.make_loader(trainkit.Regression())
    for epoch, step, batch in trainkit.batches(loader, epochs=2):
        loss = trainkit.train_step(model, optimizer, batch, world)
        log.info("epoch %d step %d loss %.4f", epoch, step, loss)
        if step % SAVE_EVERY == 0:
            if rank == 0:
                path = os.path.join(ckpt_dir, f"step{step}.pt")
                log.info("saving checkpoint %s", path)
                state = {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": step}
                if args.file_object:
                    with open(path, "wb") as handle:
                        torch.save(state, handle)  # fault: No space left on device
                else:
                    torch.save(state, path)  # fault: No space left on device
            dist.barrier()
    trainkit.finish()


if __name__ == "__main__":
    main()
