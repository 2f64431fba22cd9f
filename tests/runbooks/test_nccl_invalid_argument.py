"""A CUDA call inside NCCL failing with 'invalid argument' or 'operation not supported' (runbook
nccl_invalid_argument): NCCL's WARN shapes (runtime calls without the error number, driver calls with it, the NVLS
bind message of NCCL 2.27.3+) and PyTorch's DistBackendError that repeats them each pick the runbook; NCCL's other
CUDA failures (initialization error, illegal memory access, peer access) and its duplicate-GPU check do not."""

from __future__ import annotations

import pytest
import torch
from runbook_messages import assert_a_line_per_message, assert_picks

from runbooks.catalog import runbooks
from runbooks.choose import for_lines

KIND = "nccl_invalid_argument"

# One real-shaped line per message in the runbook's front matter (the same order).
LINES = [
    "node23:12098:12141 [2] transport/nvls.cc:376 NCCL WARN Failed to bind NVLink SHARP (NVLS) Multicast memory of "
    "size 2415919104 : CUDA error 1 'invalid argument'.",
    "node2:242431:242479 [5] transport/nvls.cc:158 NCCL WARN Cuda failure 1 'invalid argument'",
    "sglang:4167:5269 [0] transport/p2p.cc:275 NCCL WARN Cuda failure 'invalid argument'",
    "pod:508:508 [0] transport/nvls.cc:91 NCCL WARN Cuda failure 801 'operation not supported'",
    "ip-10-0-9-191:95209:95228 [0] init.cc:416 NCCL WARN Cuda failure 'operation not supported'",
]

TRACEBACK = [
    "[rank0]: Traceback (most recent call last):",
    '[rank0]:   File "/work/repro.py", line 12, in <module>',
    "[rank0]:     dist.all_reduce(x)",
    "[rank0]: torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/NCCLUtils.cpp:77, "
    "unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.26.2",
    "[rank0]: ncclUnhandledCudaError: Call to CUDA function failed.",
    "[rank0]: Last error:",
    "[rank0]: Cuda failure 1 'invalid argument'",
]

NEIGHBOURS = {
    "node1:2921:4504 [7] NCCL WARN Cuda failure 'initialization error'": "cuda_init_error",
    "node1:2921:4504 [0] enqueue.cc:1500 NCCL WARN Cuda failure 'an illegal memory access was encountered'":
        "cuda_illegal_access",
    "node1:774:854 [0] transport/shm.cc:590 NCCL WARN Cuda failure 217 'peer access is not supported between these two "
    "devices'": "consumer_gpu_p2p",
    "vm:580:580 [0] init.cc:904 NCCL WARN Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 60":
        "duplicate_gpu",
}


def test_every_message_has_a_line_here_and_both_languages_list_the_same_ones() -> None:
    assert_a_line_per_message(KIND, LINES)


@pytest.mark.parametrize("line", LINES)
def test_each_line_nccl_prints_picks_the_runbook(line: str) -> None:
    assert_picks(KIND, [line])


def test_pytorchs_error_with_nccls_last_error_picks_the_runbook() -> None:
    chosen = for_lines(TRACEBACK)
    assert chosen is not None and chosen.kind == KIND


@pytest.mark.parametrize(("line", "kind"), NEIGHBOURS.items())
def test_other_nccl_failures_keep_their_own_runbooks(line: str, kind: str) -> None:
    chosen = for_lines([line])
    assert chosen is not None and chosen.kind == kind, (line, chosen and chosen.kind)


def test_the_driver_and_nccl_versions_check_uses_a_real_torch_api() -> None:
    english = runbooks()[(KIND, "en")]
    assert any("torch.cuda.nccl.version()" in code for item in english.items["checks"] for code in item.code)
    assert callable(torch.cuda.nccl.version)


def test_the_first_fix_turns_nvls_off() -> None:
    english = runbooks()[(KIND, "en")]
    assert "export NCCL_NVLS_ENABLE=0" in english.items["fixes"][0].code[0]
