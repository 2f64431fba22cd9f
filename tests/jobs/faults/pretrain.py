"""Stage 1 (one process, no torchrun): pretrain the plain model and save its weights for `checkpoint.py`."""

from __future__ import annotations

import sys

import torch
import trainkit

if __name__ == "__main__":
    model = trainkit.make_model()
    torch.save(model.state_dict(), sys.argv[1])
    print(f"saved {sys.argv[1]}")
