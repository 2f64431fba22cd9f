"""The probes users compare with ds_report and collect_env: CUDA toolkit (nvcc), compiler, OS/glibc, DeepSpeed
ops. Real subprocesses and the real target-interpreter script; only the GPU-side programs are stand-ins that
print what the real ones print (tests/tools/data/gpu-h100)."""

import os
import sys

import pytest
from fakes.fake_torch import write_fake_torch
from toolkit_fakes import DATA, cuda_home, ds_report_ops, script, write_deepspeed

from tools import compiler, cuda_toolkit, deepspeed_ops, system_info
from tools.base import ProbeContext, Status
from tools.target_python import _memo


@pytest.fixture(autouse=True)
def _fresh_reports():
    _memo.clear()  # each test's fake torch is a new interpreter report


def codes(result):
    return sorted(f.code for f in result.findings)


def context(tmp_path, env, torch_cuda="13.0", version="2.11.0+cu130", **extra):
    site = write_fake_torch(tmp_path / "site", version=version, cuda=torch_cuda)
    environ = {"PATH": str(tmp_path / "bin"), "PYTHONPATH": str(site), **env}
    return ProbeContext(python=sys.executable, environ=environ, timeout_s=30, **extra)


@pytest.mark.parametrize(("release", "expected", "status"), [
    ("13.0", [], Status.OK),
    ("13.1", ["NVCC_TORCH_CUDA_MINOR_DIFFERS"], Status.OK),
    ("12.8", ["NVCC_TORCH_CUDA_MISMATCH"], Status.PROBLEM),
])
def test_nvcc_against_torch_cuda(tmp_path, release, expected, status):
    home = cuda_home(tmp_path / "cuda", release)
    result = cuda_toolkit.probe(context(tmp_path, {"CUDA_HOME": str(home)}))
    assert (codes(result), result.status) == (expected, status)
    assert result.evidence["release"] == release and result.evidence["torch_cuda"] == "13.0"
    assert result.evidence["nvcc"] == str(home / "bin" / "nvcc")


def test_cuda_home_found_like_torch_does(tmp_path):
    """No CUDA_HOME: the folder above the nvcc on PATH (torch.utils.cpp_extension._find_cuda_home)."""
    home = cuda_home(tmp_path / "cuda-12.8", "12.8")
    found, how = cuda_toolkit.find_cuda_home({"PATH": str(home / "bin")}, exists=lambda p: False)
    assert (found, how) == (str(home), "nvcc on PATH")
    assert cuda_toolkit.find_cuda_home({"PATH": "", "CUDA_PATH": "/opt/cuda"})[0] == "/opt/cuda"
    assert cuda_toolkit.find_cuda_home({"PATH": ""}, exists=lambda p: False)[0] is None


def test_no_toolkit_is_a_note_not_a_problem(tmp_path):
    result = cuda_toolkit.probe(ProbeContext(python=str(tmp_path / "none"), environ={"PATH": "", "CUDA_HOME": str(tmp_path)}))
    assert result.status == Status.OK and codes(result) == ["NVCC_NOT_FOUND"]
    assert "runtime-only" in result.findings[0].evidence


def test_nvcc_that_hangs_is_killed(tmp_path):
    nvcc = tmp_path / "cuda" / "bin" / "nvcc"
    nvcc.parent.mkdir(parents=True)
    nvcc.write_text("#!/bin/sh\nsleep 30\n")
    nvcc.chmod(0o755)
    toolkit = cuda_toolkit.read_toolkit(ProbeContext(environ={"CUDA_HOME": str(tmp_path / "cuda"), "PATH": "/usr/bin:/bin"}),
                                        cuda_toolkit.run_command, 0.5)
    assert toolkit.release is None and "timed out" in toolkit.error


def test_compiler_versions_from_their_own_output(tmp_path):
    gcc_line = [line for line in (DATA / "collect_env.txt").read_text().splitlines() if line.startswith("GCC version")][0]
    banner = gcc_line.split(": ", 1)[1]  # "(Ubuntu 13.3.0-6ubuntu2~24.04.1) 13.3.0", as gcc --version prints it
    script(tmp_path / "bin" / "gcc", f"gcc {banner}\nCopyright (C) 2023 Free Software Foundation, Inc.\n")
    script(tmp_path / "bin" / "g++", f"g++ {banner}\n")
    result = compiler.probe(ProbeContext(environ={"PATH": str(tmp_path / "bin")}))
    assert result.status == Status.OK and not result.findings
    assert result.summary == "gcc 13.3.0, g++ 13.3.0"
    assert result.evidence["compilers"]["C++ (CXX)"]["path"] is None  # no c++ on that PATH: said, not guessed


def test_no_compiler_is_a_note(tmp_path):
    result = compiler.probe(ProbeContext(environ={"PATH": str(tmp_path)}))
    assert codes(result) == ["COMPILER_NOT_FOUND"] and result.status == Status.OK


def test_system_info_reads_the_nvidia_module_line():
    text = (DATA / "proc-driver-nvidia-version.txt").read_text()
    files = {"/proc/driver/nvidia/version": text, "/etc/os-release": 'NAME="Ubuntu"\nPRETTY_NAME="Ubuntu 24.04.3 LTS"\n'}
    result = system_info.probe(ProbeContext(environ={}), read=files.get)
    assert result.evidence["nvidia_module"] == "580.159.04"
    assert result.evidence["os"] == "Ubuntu 24.04.3 LTS"
    assert result.evidence["glibc"] == os.confstr("CS_GNU_LIBC_VERSION").split()[-1]
    assert system_info.nvidia_module("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19") == "535.104.05"


# -- DeepSpeed, as ds_report knows it ---------------------------------------------------------------------

def deepspeed(tmp_path, release="13.0", ninja=True, installed=None, torch_info=None, env=None):
    ops = ds_report_ops()
    site = write_fake_torch(tmp_path / "site", version="2.11.0+cu130", cuda="13.0")
    write_deepspeed(site, ops, installed or dict.fromkeys(ops, False),
                    torch_info or {"version": "2.11", "cuda_version": "13.0", "hip_version": "0.0"})
    if ninja:
        script(tmp_path / "bin" / "ninja", "1.13.0\n")
    (tmp_path / "bin").mkdir(exist_ok=True)
    home = cuda_home(tmp_path / "cuda", release)
    environ = {"PATH": str(tmp_path / "bin"), "PYTHONPATH": str(site), "CUDA_HOME": str(home), **(env or {})}
    return deepspeed_ops.probe(ProbeContext(python=sys.executable, environ=environ, timeout_s=30))


def test_deepspeed_ops_are_read_without_importing_deepspeed(tmp_path):
    result = deepspeed(tmp_path)
    assert result.status == Status.OK, result.summary
    assert result.evidence["ops"] == sorted(ds_report_ops()) and len(result.evidence["ops"]) == 23
    assert result.evidence["version"] == "0.19.8" and result.evidence["nvcc_release"] == "13.0"
    compatible = result.evidence["compatible"]
    assert compatible["fused_adam"] == {"ok": True, "why": ""}
    assert not compatible["evoformer_attn"]["ok"] and "CUTLASS" in compatible["evoformer_attn"]["why"]  # as ds_report


def test_cutlass_path_makes_evoformer_compatible(tmp_path):
    result = deepspeed(tmp_path, env={"CUTLASS_PATH": str(tmp_path)})
    assert result.evidence["compatible"]["evoformer_attn"]["ok"]


def test_ninja_missing_is_a_problem_when_ops_must_be_jit_compiled(tmp_path):
    result = deepspeed(tmp_path, ninja=False)
    assert result.status == Status.PROBLEM and "DS_NINJA_MISSING" in codes(result)


def test_every_op_prebuilt_needs_no_ninja(tmp_path):
    result = deepspeed(tmp_path, ninja=False, installed=dict.fromkeys(ds_report_ops(), True))
    assert "DS_NINJA_MISSING" not in codes(result)


@pytest.mark.parametrize(("release", "env", "problem"), [
    ("12.8", {}, True),  # another major: DeepSpeed refuses
    ("13.1", {}, True),  # 13.x is not in DeepSpeed's minor-compatible table
    ("13.1", {"DS_SKIP_CUDA_CHECK": "1"}, False),
    ("13.0", {}, False),
])
def test_nvcc_vs_torch_cuda_by_deepspeeds_rule(tmp_path, release, env, problem):
    result = deepspeed(tmp_path, release=release, env=env)
    assert ("DS_CUDA_MISMATCH" in codes(result)) is problem


def test_prebuilt_ops_for_another_torch(tmp_path):
    result = deepspeed(tmp_path, installed={"fused_adam": True},
                       torch_info={"version": "2.9", "cuda_version": "12.8", "hip_version": "0.0"})
    assert "DS_OPS_BUILT_FOR_OTHER_TORCH" in codes(result)


def test_no_deepspeed_is_unavailable_and_says_why(tmp_path):
    result = deepspeed_ops.probe(context(tmp_path, {}))
    assert result.status == Status.UNAVAILABLE and result.summary.startswith("DeepSpeed is not installed in ")


def test_deepspeed_verdicts_are_recomputed_from_a_bundle(tmp_path):
    from tools.verdicts import rejudge

    result = deepspeed(tmp_path, ninja=False)
    again = rejudge(result, "node3.json")
    assert codes(again) == codes(result) and again.status == Status.PROBLEM
