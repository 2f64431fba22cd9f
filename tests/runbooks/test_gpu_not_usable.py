"""A process that cannot use any GPU is its own failure (runbook gpu_not_usable): a PyTorch wheel without CUDA, a
container or WSL 2 without the driver's GPU, Windows without NCCL, or a job quietly falling back to the CPU. Each
line shape the libraries print for it picks the runbook; a GPU that is visible but fails to initialise
(cuda_init_error) or a driver too old for the wheel (cuda_lib_import) does not. Where this machine's torch is itself
a CPU-only build, the messages are checked against what it really raises and warns."""

from __future__ import annotations

import io
import warnings
from pathlib import Path

import pytest
import torch
from runbook_messages import assert_a_line_per_message, assert_picks

from runbooks.catalog import runbooks
from runbooks.choose import for_lines

KIND = "gpu_not_usable"
SITE = "/opt/venv/lib/python3.11/site-packages"

# One real-shaped line per message in the runbook's front matter (the same order), as the failure prints it.
LINES = [
    "RuntimeError: Attempting to deserialize object on a CUDA device but torch.cuda.is_available() is False. If you "
    "are running on a CPU-only machine, please use torch.load with map_location=torch.device('cpu') to map your "
    "storages to the CPU.",
    "[2026-03-02 10:14:07,512] [WARNING] [real_accelerator.py:203:get_accelerator] Setting accelerator to CPU. If you "
    "have GPU or other accelerator, we were unable to detect it.",
    "[rank0]: ValueError: ProcessGroupNCCL is only supported with GPUs, no GPUs found!",
    f"{SITE}/torch/amp/autocast_mode.py:250: UserWarning: User provided device_type of 'cuda', but CUDA is not "
    "available. Disabling",
    f"{SITE}/torch/amp/grad_scaler.py:136: UserWarning: torch.cuda.amp.GradScaler is enabled, but CUDA is not "
    "available.  Disabling.",
    "RuntimeError: Distributed package doesn't have NCCL built in",
    f"{SITE}/torch/amp/autocast_mode.py:285: UserWarning: CUDA is not available or torch_xla is imported. Disabling "
    "autocast.",
    "Failed to initialize NVML: GPU access blocked by the operating system",
    "RuntimeError: Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU and installed a "
    "driver from http://www.nvidia.com/Download/index.aspx",
    "Failed to initialize NVML: Unknown Error",
    "AssertionError: Torch not compiled with CUDA enabled",
    "AttributeError: module 'torch._C' has no attribute '_cuda_setDevice'",
    'docker: Error response from daemon: could not select device driver "" with capabilities: [[gpu]].',
    "RuntimeError: Failed to infer device type, please set the environment variable `VLLM_LOGGING_LEVEL=DEBUG` to "
    "turn on verbose logging to help debug the issue.",
    "ValueError: torch.cuda.is_available() should be True but is False. xformers' memory efficient attention is only "
    "available for GPU ",  # diffusers' xformers attention on a process that sees no GPU
]

TRACEBACK = [
    "[rank1]: Traceback (most recent call last):",
    '[rank1]:   File "/work/train.py", line 21, in <module>',
    "[rank1]:     torch.cuda.set_device(local_rank)",
    f'[rank1]:   File "{SITE}/torch/cuda/__init__.py", line 567, in set_device',
    "[rank1]:     torch._C._cuda_setDevice(device)",
    "[rank1]: AttributeError: module 'torch._C' has no attribute '_cuda_setDevice'",
]

# A GPU that the process sees but cannot start, and a driver too old for the wheel: the neighbouring kinds.
NEIGHBOURS = [
    ("RuntimeError: No CUDA GPUs are available", "cuda_init_error"),
    ("[default1]:torch.AcceleratorError: CUDA error: invalid device ordinal", "cuda_init_error"),
    ("RuntimeError: The NVIDIA driver on your system is too old (found version 11040). Please update your GPU driver "
     "by downloading and installing a new version from the URL: http://www.nvidia.com/Download/index.aspx", "cuda_lib_import"),
]

CPU_ONLY_TORCH = pytest.mark.skipif(torch.backends.cuda.is_built(), reason="this torch is built with CUDA")


def _message(i: int) -> str:
    return runbooks()[(KIND, "en")].messages[i]


def test_every_message_has_a_line_here_and_both_languages_list_the_same_ones() -> None:
    assert_a_line_per_message(KIND, LINES)


@pytest.mark.parametrize("line", LINES)
def test_each_line_the_failure_prints_picks_the_runbook(line: str) -> None:
    assert_picks(KIND, [line])


def test_a_whole_traceback_ending_in_the_message_picks_it() -> None:
    chosen = for_lines(TRACEBACK)
    assert chosen is not None and chosen.kind == KIND


@pytest.mark.parametrize("line, kind", NEIGHBOURS)
def test_a_neighbouring_failure_picks_its_own_runbook(line: str, kind: str) -> None:
    chosen = for_lines([line])
    assert chosen is not None and chosen.kind == kind, (line, chosen and chosen.kind)


@CPU_ONLY_TORCH
def test_a_cpu_only_torch_raises_the_not_compiled_message() -> None:
    assert torch.version.cuda is None and not torch.cuda.is_available()  # the runbook's first check
    with pytest.raises(AssertionError, match=_message(10)):
        torch.zeros(1, device="cuda")


@CPU_ONLY_TORCH
def test_a_cpu_only_torch_has_no_set_device_binding() -> None:
    with pytest.raises(AttributeError) as raised:
        torch.cuda.set_device(0)
    assert _message(11) in str(raised.value)


@CPU_ONLY_TORCH
def test_a_gpu_checkpoint_cannot_be_loaded_onto_cuda_but_maps_to_the_cpu() -> None:
    buffer = io.BytesIO()
    torch.save(torch.ones(2), buffer)
    buffer.seek(0)
    with pytest.raises(RuntimeError) as raised:
        torch.load(buffer, map_location="cuda")
    assert _message(0) in str(raised.value)
    buffer.seek(0)
    assert torch.load(buffer, map_location="cpu").device.type == "cpu"  # the runbook's fix 6


@CPU_ONLY_TORCH
def test_a_cpu_only_torch_has_no_nccl(tmp_path: Path) -> None:
    dist = torch.distributed
    if not dist.is_available():
        pytest.skip("this torch has no torch.distributed")
    assert not dist.is_nccl_available() and dist.is_gloo_available()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Attempted to get default timeout for nccl backend"
        with pytest.raises(RuntimeError, match=_message(5)):
            dist.init_process_group("nccl", init_method=f"file://{tmp_path}/store", rank=0, world_size=1)
    assert not dist.is_initialized()


@CPU_ONLY_TORCH
def test_amp_on_a_cpu_only_torch_only_warns_and_is_switched_off() -> None:
    with pytest.warns(UserWarning, match=_message(4)):
        scaler = torch.amp.GradScaler("cuda")
    assert not scaler.is_enabled()
    with pytest.warns(UserWarning, match=_message(6)), torch.autocast("cuda"):
        assert not torch.is_autocast_enabled("cuda")
