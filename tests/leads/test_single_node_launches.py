"""A launch that can only run on one node states that fact as plainly as "single node" does: `torchrun --standalone`
(torchrun's single-node mode) and `deepspeed --num_gpus N` without a hostfile (the DeepSpeed launcher then runs
every rank locally). A fix that launches across nodes (`deepspeed --hostfile ... --master_addr=<node0-ip>`) is not
the first fix for such a job; with a hostfile it still is."""

from __future__ import annotations

from typing import Any

import pytest
from clikit import ask_json, lead_kind

from agent.stated import stated_facts

pytestmark = pytest.mark.usefixtures("use_shared_index")


@pytest.mark.parametrize(("text", "one_node"), [
    ("torchrun --standalone --nproc_per_node 4 train.py", True),
    ("deepspeed --num_gpus 8 train.py --deepspeed ds.json", True),
    ("deepspeed --num_gpus=8 train.py", True),
    ("deepspeed --hostfile hosts --num_gpus 8 train.py", False),
    ("deepspeed --num_nodes 2 --num_gpus 8 train.py", False),
    ("deepspeed --num_gpus 8 train.py on two nodes", False),  # the contrary stated beside it
    ("torchrun --nnodes 2 --nproc_per_node 8 train.py", False),
])
def test_a_single_node_launch_states_one_node(text: str, one_node: bool) -> None:
    assert ("one node" in stated_facts(text)) is one_node


@pytest.mark.parametrize(("question", "multi_node_first"), [
    ("deepspeed --num_gpus 8 train.py 一直停在 Initializing TorchBackend in DeepSpeed with backend nccl，没有任何输出", False),
    ("torchrun --standalone --nproc_per_node 4 train.py hangs after 'Initializing TorchBackend in DeepSpeed with "
     "backend nccl'", False),
    ("deepspeed --hostfile hosts --num_gpus 8 train.py hangs after Initializing TorchBackend in DeepSpeed with "
     "backend nccl", True),
])
def test_the_multi_node_launch_is_not_first_for_a_one_node_job(cli: Any, question: str, multi_node_first: bool) -> None:
    answer = ask_json(cli, question)
    assert lead_kind(answer) == "deepspeed_init_hang"
    assert ("--hostfile" in answer["verdict"]["fix"]) is multi_node_first
