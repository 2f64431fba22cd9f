"""An out-of-memory where GPU 0 holds more than the other ranks' GPUs is every rank's CUDA context or checkpoint
on GPU 0, not a batch too large: the runbook's fix that pins each rank to its own GPU (and loads checkpoints to the
CPU) comes first (data/kinds.json moments), while an OOM that says nothing of GPU 0 still shrinks the batch first."""

from __future__ import annotations

from typing import Any

import pytest
from clikit import ask_json, lead_kind

pytestmark = pytest.mark.usefixtures("use_shared_index")


@pytest.mark.parametrize(("question", "pinned_first"), [
    ("多卡训练的时候 rank0 的显存比其他卡多占了 10G，然后报 torch.OutOfMemoryError: CUDA out of memory", True),
    ("DDP on 4 GPUs: every process also allocates ~500MB on GPU 0 and rank 0 runs out of memory "
     "(torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB)", True),
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
     "79.15 GiB of which 1.12 GiB is free.", False),
])
def test_gpu_zero_holding_more_pins_each_rank_first(cli: Any, question: str, pinned_first: bool) -> None:
    answer = ask_json(cli, question)
    assert lead_kind(answer) == "cuda_oom"
    assert ("torch.cuda.set_device(local_rank)" in answer["verdict"]["fix"]) is pinned_first
