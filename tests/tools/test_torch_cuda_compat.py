import pytest
from fakes.fake_torch import write_fake_torch

from tools import torch_cuda_compat
from tools.base import ProbeContext, Status
from tools.gpu_inventory import Gpu, GpuFacts


def facts(*names_caps, cuda="12.8", driver="570.86.10"):
    gpus = [Gpu(i, n, c, 32607, 0, 0) for i, (n, c) in enumerate(names_caps)]
    return lambda ctx: GpuFacts("nvml", driver, cuda, gpus)


def no_gpus(ctx):
    return None


def run(tmp_path, target_python, base_env, gpu_facts=no_gpus, **torch):
    root = write_fake_torch(tmp_path / "site", **torch)
    ctx = ProbeContext(python=target_python, environ={**base_env, "PYTHONPATH": str(root)}, timeout_s=30)
    return torch_cuda_compat.probe(ctx, gpu_facts=gpu_facts)


def codes(result):
    return sorted(f.code for f in result.findings)


def test_blackwell_on_cu124_build_needs_cu128(tmp_path, target_python, base_env):
    result = run(tmp_path, target_python, base_env, gpu_facts=facts(("NVIDIA GeForce RTX 5090", "12.0")),
                 devices=(("NVIDIA GeForce RTX 5090", (12, 0)),))
    assert result.status == Status.PROBLEM
    assert codes(result) == ["CUDA_ARCH_UNSUPPORTED"]
    finding = result.findings[0]
    assert "cu128" in finding.fix and "PyTorch 2.7" in finding.fix
    assert "cu124" in finding.summary and "stale" in finding.summary
    assert "sm_120" in finding.topics


@pytest.mark.parametrize(
    ("archs", "capability", "expected"),
    [
        (("sm_80", "sm_86", "sm_90"), (9, 0), []),
        (("sm_80",), (8, 6), []),  # SASS is binary compatible within a major
        (("sm_80", "sm_90"), (10, 0), ["CUDA_ARCH_UNSUPPORTED"]),
        (("sm_80", "compute_80"), (8, 9), []),
        (("sm_90", "compute_90"), (12, 0), ["CUDA_ARCH_UNSUPPORTED"]),
        (("sm_90a",), (9, 0), []),
        (("sm_86",), (8, 0), ["CUDA_ARCH_UNSUPPORTED"]),
        (("sm_80", "sm_90", "sm_100", "sm_120"), (12, 0), []),
    ],
)
def test_arch_verdicts(archs, capability, expected):
    ok, _ = torch_cuda_compat.arch_supported(list(archs), capability)
    assert ok == (not expected)


def test_ptx_only_is_info(tmp_path, target_python, base_env):
    result = run(tmp_path, target_python, base_env, archs=("sm_75", "compute_80"), devices=(("NVIDIA L4", (8, 9)),))
    assert result.status == Status.OK
    assert codes(result) == ["CUDA_ARCH_PTX_ONLY"]


def test_cpu_only_build_on_gpu_machine(tmp_path, target_python, base_env):
    result = run(tmp_path, target_python, base_env, gpu_facts=facts(("NVIDIA H100 80GB HBM3", "9.0")),
                 version="2.5.1+cpu", cuda=None, archs=(), devices=(), nccl=None)
    assert codes(result) == ["TORCH_CPU_ONLY"]
    assert "download.pytorch.org/whl/cu128" in result.findings[0].fix


def test_old_driver(tmp_path, target_python, base_env):
    result = run(tmp_path, target_python, base_env,
                 gpu_facts=facts(("Tesla V100-SXM2-16GB", "7.0"), cuda="11.4", driver="470.57.02"),
                 cuda="12.1", devices=(), available=False)
    assert "DRIVER_TOO_OLD" in codes(result)
    finding = next(f for f in result.findings if f.code == "DRIVER_TOO_OLD")
    assert "530.30.02" in finding.fix and "11.4" in finding.evidence


def test_driver_minor_version_behind_is_info(tmp_path, target_python, base_env):
    result = run(tmp_path, target_python, base_env, gpu_facts=facts(("NVIDIA A100", "8.0"), cuda="12.2",
                 driver="535.104.05"), cuda="12.4", devices=(("NVIDIA A100", (8, 0)),))
    assert codes(result) == ["DRIVER_OLDER_THAN_TORCH_CUDA"]
    assert result.status == Status.OK


def test_torch_not_installed(tmp_path, target_python, base_env):
    (tmp_path / "site" / "torch").mkdir(parents=True)
    init = tmp_path / "site" / "torch" / "__init__.py"
    init.write_text("raise ModuleNotFoundError(\"No module named 'torch'\", name='torch')\n")
    ctx = ProbeContext(python=target_python, environ={**base_env, "PYTHONPATH": str(tmp_path / "site")}, timeout_s=30)
    result = torch_cuda_compat.probe(ctx, gpu_facts=no_gpus)
    assert codes(result) == ["TORCH_NOT_INSTALLED"]


def test_missing_interpreter_is_unavailable(tmp_path):
    ctx = ProbeContext(python=str(tmp_path / "nope" / "python"), environ={"PATH": ""})
    assert torch_cuda_compat.available(ctx)[0] is False
    assert torch_cuda_compat.probe(ctx, gpu_facts=no_gpus).status == Status.UNAVAILABLE


def test_interpreter_from_virtual_env(tmp_path, target_python):
    from tools.target_python import find_python

    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(target_python)
    assert find_python(ProbeContext(environ={"VIRTUAL_ENV": str(venv), "PATH": ""})) == str(venv / "bin" / "python")
