"""An extension without kernels for this GPU (runbook extension_arch): CUDA's own message, and the line xformers'
memory-efficient attention kernels (and PyTorch's copy of them) print instead of raising, each pick the runbook; the
same line where only a GPU is named and no extension is PyTorch's own build (arch_mismatch), as the registry's
yields_to says, and a user asking about it gets that answer."""

from __future__ import annotations

import json
from typing import Any

import pytest
from runbook_messages import assert_a_line_per_message, assert_picks

from runbooks.registry import yielded

KIND = "extension_arch"
XFORMERS_LINE = "FATAL: kernel `fmha_cutlassF_f32_aligned_32x128_gmem_sm80` is for sm80-sm90, but was built for sm70"
LINES = [
    "torch.AcceleratorError: CUDA error: no kernel image is available for execution on the device",
    "Search for `cudaErrorNoKernelImageForDevice' in https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html",
    XFORMERS_LINE,
    "RuntimeError: CUDA error: invalid device function",
    "Search for `cudaErrorInvalidDeviceFunction' in https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html",
]


def test_every_message_has_a_line_here_and_both_languages_list_the_same_ones() -> None:
    assert_a_line_per_message(KIND, LINES)


@pytest.mark.parametrize("line", LINES)
def test_each_line_picks_the_runbook(line: str) -> None:
    assert_picks(KIND, [line])


def test_the_kernel_line_with_only_a_gpu_named_is_the_pytorch_build() -> None:
    report = f"On my RTX 5090 every SDPA call prints\n{XFORMERS_LINE.replace('sm70', 'sm120')}"
    assert yielded(KIND, report) is not None and yielded(KIND, report)[0] == "arch_mismatch"
    assert yielded(KIND, f"After enabling xformers on 8 A100s:\n{XFORMERS_LINE}") is None


@pytest.mark.usefixtures("use_shared_index")
def test_a_user_pasting_the_xformers_line_gets_the_extension_runbook(cli: Any) -> None:
    done = cli("ask", "--json", "--no-probes", f"I get this after enabling xformers in my training code:\n{XFORMERS_LINE}")
    assert done.returncode == 0, done.stderr[-800:]
    answer = json.loads(done.stdout)
    assert (answer["lead"] or {}).get("kind") == KIND, answer["answer"][:600]
