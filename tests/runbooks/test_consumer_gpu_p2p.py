"""NCCL's peer-to-peer transport on PCIe GPUs that cannot really reach each other (runbook consumer_gpu_p2p): the
CUDA peer-access error NCCL prints, vLLM's failed P2P test and the P2P channel lines a hang ends on each pick the
runbook; an explicit 'invalid argument' from NCCL, a collective timeout and the SHM transport's lines do not."""

from __future__ import annotations

import pytest
import torch
from runbook_messages import assert_a_line_per_message, assert_picks

from runbooks.catalog import runbooks
from runbooks.choose import for_lines

KIND = "consumer_gpu_p2p"

# One real-shaped line per message in the runbook's front matter (the same order).
LINES = [
    "node1:774:854 [0] transport/shm.cc:590 NCCL WARN Cuda failure 217 'peer access is not supported between these two devices'",
    "(VllmWorkerProcess pid=58476) WARNING 04-07 10:43:44 [custom_all_reduce.py:147] Custom allreduce is disabled because "
    "your platform lacks GPU P2P capability or P2P test failed. To silence this warning, specify "
    "disable_custom_all_reduce=True explicitly.",
    "node1:2338:2379 [2] NCCL INFO Channel 19/0 : 2[2] -> 1[1] via P2P/CUMEM",
    "node1:909608:910337 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC",
    # accelerate's own check (accelerate/state.py) on RTX 40xx cards whose driver reports no P2P, before any NCCL call
    "NotImplementedError: Using RTX 4000 series doesn't support faster communication broadband via P2P or IB. Please set "
    '`NCCL_P2P_DISABLE="1"` and `NCCL_IB_DISABLE="1" or use `accelerate launch` which will do this automatically.',
]
# Older NCCL printed the peer-access error from its P2P transport; PyTorch repeats NCCL's text under "Last error:".
OTHER_SHAPES = [
    "z-pc:909608:910337 [0] transport/p2p.cc:238 NCCL WARN failed to open CUDA IPC handle : 217 peer access is not "
    "supported between these two devices",
    "[rank1]: Cuda failure 217 'peer access is not supported between these two devices'",
    "node1:2338:2379 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC/read",
]

HANG_THEN_TIMEOUT = [
    "node1:909608:910337 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC",
    "[rank0]:[E1127 10:00:00 ProcessGroupNCCL.cpp:632] [Rank 0] Some NCCL operations have failed or timed out. Due to the "
    "asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data.",
]
NOT_THIS_KIND = [
    # NCCL already went through host memory: P2P is not in use between these GPUs
    "node1:909608:910337 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via SHM/direct/direct",
    # an explicit invalid argument from NCCL's P2P transport is the nccl_invalid_argument runbook's
    "sglang:4167:5269 [0] transport/p2p.cc:275 NCCL WARN Cuda failure 'invalid argument'",
]


def test_every_message_has_a_line_here_and_both_languages_list_the_same_ones() -> None:
    assert_a_line_per_message(KIND, LINES)


@pytest.mark.parametrize("line", LINES + OTHER_SHAPES)
def test_each_line_picks_the_runbook(line: str) -> None:
    assert_picks(KIND, [line])


def test_a_timeout_after_p2p_channel_lines_is_answered_as_a_collective_timeout() -> None:
    chosen = for_lines(HANG_THEN_TIMEOUT)
    assert chosen is not None and chosen.kind == "collective_timeout"


@pytest.mark.parametrize("line", NOT_THIS_KIND)
def test_a_neighbouring_line_does_not_pick_it(line: str) -> None:
    chosen = for_lines([line])
    assert chosen is None or chosen.kind != KIND, (line, chosen.kind)


def test_the_peer_access_matrix_in_the_checks_uses_a_real_torch_api() -> None:
    english = runbooks()[(KIND, "en")]
    assert any("torch.cuda.can_device_access_peer(i, j)" in code for item in english.items["checks"] for code in item.code)
    assert callable(torch.cuda.can_device_access_peer)


def test_the_first_fix_is_the_nccl_switch_that_turns_p2p_off() -> None:
    english = runbooks()[(KIND, "en")]
    assert "export NCCL_P2P_DISABLE=1" in english.items["fixes"][0].code[0]


@pytest.mark.parametrize(("report", "named"), [
    ("training with multi-GPU hangs on our box of 10 1080Ti; one GPU is fine", True),
    ("vllm serve --tensor-parallel-size 2 hangs with two RTX A6000 GPUs at 100% utilisation", True),
    ("RTX 2080 Ti multi-gpu training hangs at the first step", True),
    ("DDP on 8 x A100 SXM hangs at step 300", False),  # NVLink: not a PCIe pair
    ("one 4090 hangs at the first step of training", False),  # one GPU needs no P2P
])
def test_a_hang_on_several_pcie_gpus_of_any_generation_names_the_p2p_stage(report: str, named: bool) -> None:
    from runbooks.choose import hang_stage_named

    found = hang_stage_named(report)
    assert (found is not None and found[0].kind == KIND) is named, found and found[0].kind
