"""Issue 36 points 1 and 4, issue 37: where a report says a job hangs, the words that name the stage decide the kind
(runbooks/data/hang_stages.json, from each runbook's 'How to recognise it'), and a stage may call for one of the
runbook's fixes first. A launch line that contradicts itself (torchrun's --node-rank runs from 0 to --nnodes - 1; a
job across nodes with 127.0.0.1 or localhost as master) is the rendezvous that never forms; a hang in the JIT build of
compiled ops (torch.utils.cpp_extension waits on the build folder's lock after 'Using ... as PyTorch extensions
root...'; the asker says the compile never ends) is op_build_failure, whose killed build's folder is removed first;
a hang at an FSDP save is fsdp_state_dict, gathered on every rank with CPU offload first. Real tables, real index
(tests/conftest.py)."""

from __future__ import annotations

from typing import Any

import pytest

from runbooks.choose import hang_stage_named
from tests.clikit import ask_json, lead_kind

LOCK = "rm -r ~/.cache/torch_extensions"


@pytest.mark.parametrize(("text", "kind", "fix"), [
    ("training is stuck after start-up:\ntorchrun --nnodes 1 --node_rank 1 --nproc_per_node 2 train.py", "rendezvous", ""),
    ("hangs forever: torchrun --nnodes=2 --node-rank=2 --nproc-per-node=8 --master-addr=10.1.0.4 train.py",
     "rendezvous", ""),
    ("两台机器训练卡住\nNNODES=2\nNODE_RANK=1\nMASTER_ADDR=127.0.0.1\nMASTER_PORT=29500\ntorchrun ...", "rendezvous", ""),
    ("multi-node job hangs: torchrun --nnodes 4 --rdzv-endpoint localhost:29400 --rdzv-backend c10d train.py",
     "rendezvous", ""),
    ("It got stuck at `from op import fused_leaky_relu`; the compiling process won't finish, it keeps running",
     "op_build_failure", LOCK),
    ("Using /root/.cache/torch_extensions/py311_cu121 as PyTorch extensions root...\n(hangs here forever)",
     "op_build_failure", LOCK),
    ("训练卡住了，编译算子一直不结束", "op_build_failure", LOCK),
    ("it always gets stuck on 2 3090 cards; py-spy dump shows:\n    wait (torch/utils/file_baton.py:42)\n"
     "    _jit_compile (torch/utils/cpp_extension.py:1522)", "op_build_failure", LOCK),  # the stack names the lock
    ("FSDP + LoRA fine-tuning trains fine, then hangs when the program tries to save the model", "fsdp_state_dict",
     "cpu_offload=True"),
    ("使用FSDP训练，保存模型时卡住", "fsdp_state_dict", "cpu_offload=True"),
])
def test_the_stage_a_hang_names_decides_its_kind_and_first_fix(text: str, kind: str, fix: str) -> None:
    found = hang_stage_named(text)
    assert found is not None and (found[0].kind, found[2]) == (kind, fix), found and found[0].kind


@pytest.mark.parametrize(("text", "kind"), [
    ("training hangs: torchrun --nnodes 1 --node_rank 0 --master_addr 127.0.0.1 --nproc_per_node 8 train.py",
     "rendezvous"),
    ("hangs at step 300: torchrun --nnodes=2 --node_rank=1 --master_addr=10.1.0.4 train.py", "rendezvous"),
    ("the compile finished after 3 minutes, then training hangs at step 200 on 8 GPUs", "op_build_failure"),
    ("FSDP training hangs at step 300 in all_reduce", "fsdp_state_dict"),
    ("DeepSpeed ZeRO-3 hangs while saving the checkpoint", "fsdp_state_dict"),
])
def test_a_hang_that_names_no_such_stage_is_not_that_kind(text: str, kind: str) -> None:
    found = hang_stage_named(text)
    assert found is None or found[0].kind != kind, found[0].kind


@pytest.mark.usefixtures("use_shared_index")
def test_ask_leads_with_the_rendezvous_runbook_for_a_node_rank_past_the_node_count(cli: Any) -> None:
    answer = ask_json(cli, "单机两卡训练卡住，没有进展\npython launch.py --nnodes 1 --node_rank 1 --master_addr 127.0.0.1 "
                           "--nproc_per_node 2 main.py\n| distributed init (rank 2): env://")
    assert lead_kind(answer) == "rendezvous" and answer["lead"]["rule"] == "hang_stage"


@pytest.mark.usefixtures("use_shared_index")
def test_ask_leads_a_hang_in_the_jit_build_with_removing_the_killed_builds_folder(cli: Any) -> None:
    answer = ask_json(cli, "Get stuck at `from op import FusedLeakyReLU`\nIt ran fine for months; now the compiling "
                           "process won't finish (it keeps running) and I pressed ctrl-c")
    assert lead_kind(answer) == "op_build_failure", answer["lead"]
    assert "torch_extensions" in answer["answer"].split("Fixes")[0]


@pytest.mark.usefixtures("use_shared_index")
@pytest.mark.parametrize("question", [
    "single node 8 GPUs, training hangs at the first allreduce, no error",
    "单机8卡训练，NCCL allreduce 卡住不动，没有报错",
])
def test_a_one_node_hang_still_leads_with_the_command_that_gets_the_evidence(cli: Any, question: str) -> None:
    """'On each node' in the evidence command's comment is no multi-node launch: a one-node asker's first fix is
    still the command that takes every rank's stack (issue 36 points 3 and 4)."""
    answer = ask_json(cli, question)
    assert lead_kind(answer) == "collective_timeout", answer["lead"]
    assert answer["verdict"]["fix"].startswith("traindoc hang"), answer["verdict"]


def test_only_a_launch_on_every_node_contradicts_one_node() -> None:
    from agent.stated import read_setup

    setup = read_setup(["single node, 8 GPUs, it hangs"])
    assert setup.contradicted("traindoc hang   # on each node: every rank's stack (py-spy)") is None
    assert setup.contradicted("# Run on every node:\ntorchrun train.py") == "one node"


@pytest.mark.parametrize(("text", "kind"), [
    ("distributed training hangs after wandb starts\nwandb: Tracking run with wandb version 0.17.0\n"
     "wandb: 🚀 View run at https://wandb.ai/team/proj/runs/abc\n(no step is ever logged)",
     "collective_timeout"),  # W&B registered the run: the job hangs later, where no stage is named yet
    ("多卡训练在 wandb 初始化完成之后卡住不动\nwandb: Syncing run glowing-sun-3", "collective_timeout"),
    ("training is stuck in wandb.init on rank 0, the other ranks wait", "wandb_init_failure"),
])
def test_a_hang_after_wandb_started_is_a_hang_of_the_job_and_one_in_wandb_init_is_wandbs(text: str, kind: str) -> None:
    found = hang_stage_named(text) or hang_stage_named(text, staged=False)  # a named stage first, as the leads ask
    assert found is not None and found[0].kind == kind, found and found[0].kind


@pytest.mark.parametrize("text", [
    "training finished but the job is stuck at wandb: - 0.000 MB of 0.010 MB uploaded (0.000 MB deduped)",
    "fine-tuning ends, then hangs forever in wandb.finish()",
])
def test_a_logger_still_uploading_or_finishing_is_not_an_unstaged_hang(text: str) -> None:
    found = hang_stage_named(text, staged=False)
    assert found is None or found[0].kind != "collective_timeout", found[0].kind


@pytest.mark.parametrize(("text", "kind"), [
    ("Multi-node GRPO training with Megatron + vLLM colocate runs for 5 hours, then hangs without any error",
     "collective_timeout"),  # an RL trainer's vLLM rollout is part of the training job that hangs
    ("verl PPO 训练跑了几个小时后卡住不动，vllm rollout 没有报错", "collective_timeout"),
    ("GRPO training hangs after ~5 hours; the Ray server stays up, no error", "collective_timeout"),
    ("training hangs on our server after 2 hours, no error", "collective_timeout"),  # 'server': the machine
    ("captioning with tp=8 on 8 V100s runs for a while, then hangs after a few thousand batches",
     "collective_timeout"),  # tensor parallel on several GPUs: a collective that one rank never joins
])
def test_a_hang_of_an_rl_trainer_with_vllm_rollout_is_a_hang_of_the_job(text: str, kind: str) -> None:
    found = hang_stage_named(text) or hang_stage_named(text, staged=False)
    assert found is not None and found[0].kind == kind, found and found[0].kind


@pytest.mark.parametrize("text", [
    "vllm serve hangs after loading the weights",
    "fine-tuned the model, now vLLM inference is stuck on 2 GPUs",
    "after training, the inference server hangs on the first request",
])
def test_a_vllm_server_that_hangs_is_not_an_unstaged_training_hang(text: str) -> None:
    found = hang_stage_named(text, staged=False)
    assert found is None or found[0].kind != "collective_timeout", found[0].kind


@pytest.mark.parametrize("text", [
    "nccl-tests all_reduce_perf hangs on 8 cards RTX 4090; with NCCL_P2P_DISABLE=1 it completes",
    "DDP on 4 x 3090 gets stuck at the first all-reduce",
    "两张显卡 4090 训练卡住不动",
])
def test_a_count_of_consumer_gpus_may_name_its_unit(text: str) -> None:
    found = hang_stage_named(text)
    assert found is not None and found[0].kind == "consumer_gpu_p2p", found and found[0].kind


@pytest.mark.parametrize("text", [
    "deepspeed多机多卡，训练以第一个batch卡住，然后报超时",
    "DeepSpeed ZeRO-3 job hangs at the first forward of step one",
    "用 deepspeed ZeRO3 之后训练进程在向前计算卡住",
])
def test_a_deepspeed_job_that_hangs_past_its_start_up_is_no_start_up_hang(text: str) -> None:
    found = hang_stage_named(text)
    assert found is None or found[0].kind != "deepspeed_init_hang", found[0].kind


@pytest.mark.parametrize(("question", "kinds"), [
    ("两台机器用 deepspeed 多机多卡训练，跑到第一个 batch 就卡住了，然后报 Socket Timeout",
     {"collective_timeout", "nccl_network"}),
    ("deepspeed multi-node training gets stuck at the first batch, then reports a socket timeout",
     {"collective_timeout", "nccl_network"}),
])
@pytest.mark.usefixtures("use_shared_index")
def test_no_likeness_leads_a_kind_whose_stage_the_hang_is_past(cli: Any, question: str, kinds: set[str]) -> None:
    # retrieval and the answering section both read like DeepSpeed's start-up hang: the report's own words put it later
    assert lead_kind(ask_json(cli, question)) in kinds


def test_a_deepspeed_hang_with_no_later_part_named_is_still_its_start_up() -> None:
    found = hang_stage_named("my deepspeed job hangs, nothing is printed after the model loads")
    assert found is not None and found[0].kind == "deepspeed_init_hang"
