"""Installing a GPU package that fails to build or does not match torch is its own kind (runbook package_build): each
line pip, flash-attn, apex, xformers or torch's build check prints for it picks the runbook, alone or in a whole
pip paste; a DeepSpeed op built at training time, an extension that does not load after torch changed and
FlashAttention refusing an old GPU keep their own runbooks. pip's and torch's own lines are checked against the
installed pip and torch."""

from __future__ import annotations

import inspect
import subprocess
import sys
from functools import cache

import pytest
import torch.utils.cpp_extension
from runbook_messages import assert_a_line_per_message, assert_picks

from runbooks.catalog import runbooks
from runbooks.choose import for_lines

KIND = "package_build"

# One real-shaped line per message in the runbook's front matter (the same order), as each tool prints it.
LINES = [
    "  Precompiled wheel not found. Building from source...",
    "      RuntimeError: FlashAttention is only supported on CUDA 11.7 and above.  Note: make sure nvcc has a "
    "supported version by running nvcc -V.",
    "RuntimeError: Cuda extensions are being compiled with a version of Cuda that does not match the version used "
    "to compile Pytorch binaries.  Pytorch binaries were compiled with Cuda 12.4.",
    "      The detected CUDA version (12.9) mismatches the version that was used to compile",
    "WARNING[XFORMERS]: xFormers can't load C++/CUDA extensions. xFormers was built for:",
    "RuntimeError: --cuda_ext was requested, but nvcc was not found.  Are you sure your environment has nvcc "
    "available?",
    "      RuntimeError: Error compiling objects for extension",
    "vllm 0.6.3 requires torch==2.4.0, but you have torch 2.5.1 which is incompatible.",
    "  × Getting requirements to build wheel did not run successfully.",
    "  × python setup.py bdist_wheel did not run successfully.",  # pip up to 25.2 built setup.py projects so
    "ERROR: Failed to build installable wheels for some pyproject.toml based projects (flash-attn)",
    "  ERROR: Failed building wheel for flash-attn",
    "  Encountered error while generating package metadata.",  # pip's MetadataGenerationFailed, then its reference:
    "error: metadata-generation-failed",
]

# The tail of a flash-attn source build that failed in nvcc, without MAX_JOBS: torch's ninja line names no -j.
FLASH_ATTN_BUILD = [
    "  Precompiled wheel not found. Building from source...",
    "  FAILED: /tmp/pip-install-x/flash-attn/build/temp.linux-x86_64-cpython-311/csrc/flash_attn/src/"
    "flash_bwd_hdim128_bf16_sm80.o",
    "  ninja: build stopped: subcommand failed.",
    "  subprocess.CalledProcessError: Command '['ninja', '-v']' returned non-zero exit status 1.",
    "  RuntimeError: Error compiling objects for extension",
    "  ERROR: Failed building wheel for flash-attn",
    "ERROR: Failed to build installable wheels for some pyproject.toml based projects (flash-attn)",
]

NEIGHBOURS = {
    "op_build_failure": "RuntimeError: Error building extension 'fused_adam'",
    "cuda_lib_import": "ImportError: /opt/venv/lib/python3.11/site-packages/flash_attn_2_cuda.cpython-311-x86_64-linux-"
                       "gnu.so: undefined symbol: _ZN3c104cuda9SetDeviceEi",
    "flash_attn_gpu": "RuntimeError: FlashAttention only supports Ampere GPUs or newer.",
}
# DeepSpeed's own CUDA check at first use of an op is op_build_failure's, not torch's install-time check.
DEEPSPEED_MISMATCH = ("Exception: >- DeepSpeed Op Builder: Installed CUDA version 11.8 does not match the version torch "
                      "was compiled with 12.1, unable to compile cuda/cpp extensions without a matching cuda version.")


def test_every_message_has_a_line_here_and_both_languages_list_the_same_ones() -> None:
    assert_a_line_per_message(KIND, LINES)


@pytest.mark.parametrize("line", LINES)
def test_each_line_an_install_prints_picks_the_runbook(line: str) -> None:
    assert_picks(KIND, [line])


def test_a_whole_failed_flash_attn_build_picks_it_over_the_run_time_op_build() -> None:
    assert_picks(KIND, FLASH_ATTN_BUILD)


@pytest.mark.parametrize(("kind", "line"), [*NEIGHBOURS.items(), ("op_build_failure", DEEPSPEED_MISMATCH)])
def test_a_neighbouring_failure_keeps_its_own_runbook(kind: str, line: str) -> None:
    chosen = for_lines([line])
    assert chosen is not None and chosen.kind == kind, (line, chosen and chosen.kind)


def _messages() -> tuple[str, ...]:
    return runbooks()[(KIND, "en")].messages


# pip is run in its own process: importing it here would let setuptools' distutils shim reset distutils for the
# other tests of the session.
PIP_SCRIPT = r"""
import io, logging
from pip._internal.commands.install import InstallCommand
from pip._internal.exceptions import InstallationSubprocessError, InstallWheelBuildError
from pip._internal.operations.build import wheel
from pip._internal.operations.check import PackageDetails
from pip._vendor.packaging.requirements import Requirement
from pip._vendor.packaging.utils import canonicalize_name
from pip._vendor.rich.console import Console

def rendered(error):
    console = Console(file=io.StringIO(), width=200, color_system=None)
    console.print(error)
    return console.file.getvalue()

class Failed:
    name = "flash-attn"

print(rendered(InstallationSubprocessError(command_description="Getting requirements to build wheel", exit_code=1,
                                           output_lines=None)))
# pip up to 25.2 built a setup.py project with "python setup.py bdist_wheel" (operations/build/wheel_legacy.py), its
# failure rendered by the same error class
print(rendered(InstallationSubprocessError(command_description="python setup.py bdist_wheel", exit_code=1,
                                           output_lines=None)))
print(rendered(InstallWheelBuildError([Failed()])))
logger = logging.getLogger("pip._internal.commands.install")
logger.addHandler(logging.StreamHandler(__import__("sys").stdout))
logger.setLevel(logging.DEBUG)
vllm, torch = canonicalize_name("vllm"), canonicalize_name("torch")
packages = {vllm: PackageDetails("0.6.3", [Requirement("torch==2.4.0")]), torch: PackageDetails("2.5.1", [])}
InstallCommand("install", "install")._warn_about_conflicts(
    (packages, ({}, {vllm: [(torch, "2.5.1", Requirement("torch==2.4.0"))]})), "resolvelib")
if '"Failed building wheel for %s"' in __import__("inspect").getsource(wheel):  # the line pip logs for a failed build
    print("Failed building wheel for %s" % "flash-attn")
"""


@cache
def _pip_output() -> str:
    done = subprocess.run([sys.executable, "-c", PIP_SCRIPT], capture_output=True, text=True, timeout=120, check=True)
    return done.stdout


def test_pip_prints_the_build_failures_as_listed() -> None:
    shown = _pip_output()
    for message in ("Getting requirements to build wheel did not run successfully",
                    "python setup.py bdist_wheel did not run successfully",
                    "Failed to build installable wheels for some pyproject.toml based projects",
                    "Failed building wheel for flash-attn"):
        assert message in shown, shown


def test_pip_reports_a_torch_pin_as_requires_torch_and_it_picks_the_runbook() -> None:
    shown = _pip_output()
    conflict = "vllm 0.6.3 requires torch==2.4.0, but you have torch 2.5.1 which is incompatible."
    assert conflict in shown, shown
    assert_picks(KIND, [line for line in shown.splitlines() if "requires torch==" in line])


def test_torchs_install_time_build_prints_the_listed_lines() -> None:
    source = inspect.getsource(torch.utils.cpp_extension)
    assert "error_prefix='Error compiling objects for extension'" in source
    assert "mismatches the version that was used to compile" in torch.utils.cpp_extension.CUDA_MISMATCH_MESSAGE
    # the check runs in BuildExtension (pip install / setup.py), not in the JIT load() path of op_build_failure
    assert "_check_cuda_version(compiler_name, compiler_version)" in inspect.getsource(
        torch.utils.cpp_extension.BuildExtension.build_extensions)


def test_the_messages_name_no_run_time_build() -> None:
    assert not any("ninja" in message or "Error building extension" in message for message in _messages())
