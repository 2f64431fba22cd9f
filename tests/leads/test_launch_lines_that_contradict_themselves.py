"""Issue 36 point 1: a hang whose pasted launch line contradicts itself is the rendezvous that never forms (its
runbook's 'How to recognise it'; torchrun's --node-rank runs from 0 to --nnodes - 1): a node rank at or past the node
count, or a job across nodes with 127.0.0.1 or localhost as its master. Real tables, real index (tests/conftest.py)."""

from __future__ import annotations

from typing import Any

import pytest

from runbooks.choose import for_hang_stage
from tests.clikit import ask_json, lead_kind


@pytest.mark.parametrize("text", [
    "training is stuck after start-up:\ntorchrun --nnodes 1 --node_rank 1 --nproc_per_node 2 train.py",
    "hangs forever: torchrun --nnodes=2 --node-rank=2 --nproc-per-node=8 --master-addr=10.1.0.4 train.py",
    "两台机器训练卡住\nNNODES=2\nNODE_RANK=1\nMASTER_ADDR=127.0.0.1\nMASTER_PORT=29500\ntorchrun ...",
    "multi-node job hangs: torchrun --nnodes 4 --rdzv-endpoint localhost:29400 --rdzv-backend c10d train.py",
])
def test_a_launch_line_that_contradicts_itself_names_the_rendezvous(text: str) -> None:
    found = for_hang_stage(text)
    assert found is not None and found[0].kind == "rendezvous", found and found[0].kind


@pytest.mark.parametrize("text", [
    "training hangs: torchrun --nnodes 1 --node_rank 0 --master_addr 127.0.0.1 --nproc_per_node 8 train.py",
    "hangs at step 300: torchrun --nnodes=2 --node_rank=1 --master_addr=10.1.0.4 train.py",
])
def test_a_consistent_launch_line_names_no_rendezvous(text: str) -> None:
    found = for_hang_stage(text)
    assert found is None or found[0].kind != "rendezvous"


@pytest.mark.usefixtures("use_shared_index")
def test_ask_leads_with_the_rendezvous_runbook_for_a_node_rank_past_the_node_count(cli: Any) -> None:
    answer = ask_json(cli, "单机两卡训练卡住，没有进展\npython launch.py --nnodes 1 --node_rank 1 --master_addr 127.0.0.1 "
                           "--nproc_per_node 2 main.py\n| distributed init (rank 2): env://")
    assert lead_kind(answer) == "rendezvous" and answer["lead"]["rule"] == "hang_stage"
