"""Runs the real probes against a real GPU; skipped where there is none."""

import shutil
import sys

import pytest

from tools import gpu_inventory, torch_cuda_compat
from tools.base import ProbeContext, Status


def _nvml_works() -> bool:
    nvml = gpu_inventory.load_nvml()
    if nvml is None or not shutil.which("nvidia-smi"):
        return False
    try:
        nvml.nvmlInit()
        nvml.nvmlShutdown()
    except Exception:
        return False
    return True


pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not _nvml_works(), reason="no NVIDIA GPU / NVML here")]


def test_real_gpu_inventory():
    result = gpu_inventory.probe(ProbeContext())
    assert result.status in (Status.OK, Status.PROBLEM)
    assert result.evidence["gpus"] and result.evidence["driver_version"]


def test_real_torch_cuda_compat():
    result = torch_cuda_compat.probe(ProbeContext(python=sys.executable, timeout_s=60))
    assert result.status in (Status.OK, Status.PROBLEM)
    assert "report" in result.evidence
