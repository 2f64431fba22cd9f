"""bitsandbytes failing to load its CUDA library is its own failure (runbook bnb_cuda_setup): each line shape the
library prints, in the old cuda_setup search (<= 0.43.0) and in the current loader (0.43.1 on), picks it; an
unrelated CUDA or NCCL error, or a bare missing CUDA library outside bitsandbytes, does not."""

from __future__ import annotations

import pytest
from runbook_messages import assert_a_line_per_message, assert_picks

from runbooks.choose import for_lines

KIND = "bnb_cuda_setup"
SITE = "/opt/venv/lib/python3.11/site-packages/bitsandbytes"

# One real-shaped line per message in the runbook's front matter (the same order), as bitsandbytes prints it.
LINES = [
    "RuntimeError: CUDA Setup failed despite GPU being available. Please run the following command to get more information:",
    "CUDA Setup failed despite CUDA being available. Please run the following command to get more information:",
    "Attempted to use bitsandbytes native library functionality but it's not available.",
    "UserWarning: The installed version of bitsandbytes was compiled without GPU support. 8-bit optimizers, "
    "8-bit multiplication, and GPU quantization are unavailable.",
    "CUDA 12.x runtime libraries were not found in the LD_LIBRARY_PATH.",
    "RuntimeError: Method 'cquantize_blockwise_fp16_nf4' not available in CPU-only version of bitsandbytes.",
    f"Could not find the bitsandbytes CUDA binary at PosixPath('{SITE}/libbitsandbytes_cuda126.so')",
    "Could not load bitsandbytes native library: libcusparse.so.12: cannot open shared object file: No such file or directory",
    "🚨 Failed to load CPU-only bitsandbytes library 🚨",
    f"{SITE}/libbitsandbytes_cpu.so: undefined symbol: cadam32bit_grad_fp32",
    "CUDA SETUP: Required library version not found: libbitsandbytes_cuda124.so. Maybe you need to compile it from source?",
    "🚨 CUDA SETUP ERROR: Missing dependency: libcudart.so.12 🚨",
    "CUDA SETUP: Defaulting to libbitsandbytes_cpu.so...",
    "CUDA SETUP: CUDA detection failed! Possible reasons:",
    f"bitsandbytes library load error: Configured CUDA binary not found at {SITE}/libbitsandbytes_cuda124.so",
    f"RuntimeError: No compatible CUDA binary found at {SITE}/libbitsandbytes_cuda131.so",
    "No compatible CUDA library found (tried: libbitsandbytes_cuda131.so). You may need to compile from source:",
    "ERROR:bitsandbytes.cextension:bitsandbytes library load error: libcudart.so.13: cannot open shared object file",
    "CUDA SETUP: Setup Failed!",
]

UNRELATED = [
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
    "79.10 GiB of which 1.19 GiB is free. Including non-PyTorch memory, this process has 77.90 GiB memory in use.",
    "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, "
    "unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5",
    "RuntimeError: CUDA error: an illegal memory access was encountered",
    # a CUDA library missing for torch or another extension is the general import failure, not bitsandbytes
    "ImportError: libcudart.so.12: cannot open shared object file: No such file or directory",
]


def test_every_message_has_a_line_here_and_both_languages_list_the_same_ones() -> None:
    assert_a_line_per_message(KIND, LINES)


@pytest.mark.parametrize("line", LINES)
def test_each_line_bitsandbytes_prints_picks_its_runbook(line: str) -> None:
    assert_picks(KIND, [line])


def test_a_whole_missing_dependency_block_picks_it_over_the_generic_library_error() -> None:
    # bitsandbytes >= 0.46 quotes the loader's "cannot open shared object file", which alone is cuda_lib_import's
    block = [
        "RuntimeError: ",
        "🚨 CUDA SETUP ERROR: Missing dependency: libcudart.so.12 🚨",
        "CUDA 12.x runtime libraries were not found in the LD_LIBRARY_PATH.",
        "Original error: libcudart.so.12: cannot open shared object file: No such file or directory",
        "🔍 Run this command for detailed diagnostics:",
        "python -m bitsandbytes",
    ]
    chosen = for_lines(block)
    assert chosen is not None and chosen.kind == KIND
    assert for_lines([block[3]]) is not None and for_lines([block[3]]).kind != KIND  # type: ignore[union-attr]


# Old bitsandbytes prints this path search on working set-ups too (it then finds the runtime in a backup path):
# a warning, not the failure, so it routes nowhere and never outranks the error a log ends with.
PATH_SEARCH_WARNING = "CUDA_SETUP: WARNING! libcudart.so not found in any environmental path. Searching in backup paths..."


def test_the_path_search_warning_names_no_failure_and_leaves_the_real_error_its_runbook() -> None:
    assert for_lines([PATH_SEARCH_WARNING]) is None
    oom = for_lines([PATH_SEARCH_WARNING, UNRELATED[0]])
    assert oom is not None and oom.kind == "cuda_oom"


@pytest.mark.parametrize("line", UNRELATED)
def test_an_unrelated_cuda_or_nccl_error_picks_no_bitsandbytes_runbook(line: str) -> None:
    chosen = for_lines([line])
    assert chosen is None or chosen.kind != KIND, (line, chosen.kind)
