"""The CUDA toolkit that extensions compile with: CUDA_HOME as torch.utils.cpp_extension finds it, its nvcc's release, and torch's CUDA beside it."""  # noqa: E501 - the LLM-facing description is one line

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass
from typing import Any

from tools.base import Clock, Finding, ProbeContext, ProbeResult, RunCommand, finish, run_command
from tools.target_python import ScriptError, find_python, target_report

NAME = "cuda_toolkit"
_RELEASE = re.compile(r"release (\d+)\.(\d+)")
TOPICS = ("nvcc", "cuda_home", "cuda toolkit", "cpp_extension", "jit compile")


@dataclass(frozen=True)
class Toolkit:
    cuda_home: str | None  # as torch.utils.cpp_extension._find_cuda_home finds it
    how: str  # "CUDA_HOME", "CUDA_PATH", "nvcc on PATH", "/usr/local/cuda" or why none
    nvcc: str | None  # the nvcc torch and DeepSpeed run: CUDA_HOME/bin/nvcc
    release: str | None  # "13.0"
    error: str = ""  # the exact call and its message when nvcc could not be read

    def to_dict(self) -> dict[str, Any]:
        return {"cuda_home": self.cuda_home, "found_by": self.how, "nvcc": self.nvcc, "release": self.release,
                "error": self.error}


def find_cuda_home(environ: dict[str, str] | Any, exists: Any = os.path.exists) -> tuple[str | None, str]:
    """torch.utils.cpp_extension._find_cuda_home: CUDA_HOME or CUDA_PATH, else the folder above nvcc on PATH,
    else /usr/local/cuda when it exists."""
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if environ.get(var):
            return environ[var], var
    nvcc = shutil.which("nvcc", path=environ.get("PATH"))
    if nvcc:
        return os.path.dirname(os.path.dirname(nvcc)), "nvcc on PATH"
    if exists("/usr/local/cuda"):
        return "/usr/local/cuda", "/usr/local/cuda"
    return None, "CUDA_HOME and CUDA_PATH unset, no nvcc on PATH, no /usr/local/cuda"


def read_toolkit(ctx: ProbeContext, run: RunCommand, timeout_s: float) -> Toolkit:
    """Runs ``$CUDA_HOME/bin/nvcc --version`` (read-only, bounded); never compiles anything."""
    home, how = find_cuda_home(ctx.environ)
    if home is None:
        return Toolkit(None, how, None, None)
    nvcc = os.path.join(home, "bin", "nvcc")
    if not os.access(nvcc, os.X_OK):
        return Toolkit(home, how, None, None, f"{nvcc}: not found (a runtime-only CUDA install has no nvcc)")
    result = run([nvcc, "--version"], timeout_s, ctx.environ)
    match = _RELEASE.search(result.stdout)
    if result.timed_out or result.returncode != 0 or not match:
        why = "timed out (killed)" if result.timed_out else (result.error or result.stderr.strip()[-300:]
                                                            or result.stdout.strip()[-300:] or f"exit {result.returncode}")
        return Toolkit(home, how, nvcc, None, f"`{result.call}`: {why}")
    return Toolkit(home, how, nvcc, f"{match.group(1)}.{match.group(2)}")


def available(ctx: ProbeContext) -> tuple[bool, str]:
    return True, ""  # "no toolkit" is itself the answer


def probe(ctx: ProbeContext, run: RunCommand = run_command) -> ProbeResult:
    """Find the CUDA toolkit (CUDA_HOME, nvcc release) that JIT-compiled extensions use and compare it with the CUDA torch was built with."""  # noqa: E501 - the LLM-facing description is one line
    clock = Clock(ctx.timeout_s)
    toolkit = read_toolkit(ctx, run, min(clock.left(), 10.0))
    torch_cuda, torch_note = None, ""
    python = find_python(ctx)
    if python is not None:
        try:
            torch_cuda = target_report(python, ctx, run, clock.left(), "toolkit").get("torch_cuda")
        except ScriptError as exc:
            torch_note = f"`{exc.result.call}` failed: {exc.message}"
    evidence = {**toolkit.to_dict(), "torch_cuda": torch_cuda, "python": python, "torch_error": torch_note}
    summary = (f"nvcc {toolkit.release} at {toolkit.nvcc}" if toolkit.release
               else f"no nvcc ({toolkit.error or toolkit.how})")
    return finish(NAME, clock, judge(evidence), evidence, summary)


def judge(ev: dict[str, Any]) -> list[Finding]:
    """The verdicts on the toolkit facts (this machine's, or a bundle's raw evidence)."""
    release, torch_cuda = ev.get("release"), ev.get("torch_cuda")
    if not release:
        return [Finding("NVCC_NOT_FOUND", "info", "no CUDA compiler (nvcc): extensions cannot be JIT-compiled here",
                        str(ev.get("error") or ev.get("found_by") or "no CUDA_HOME"),
                        "Only needed to compile CUDA extensions (DeepSpeed ops not prebuilt, flash-attn from source): "
                        "install the CUDA toolkit matching torch's CUDA and set CUDA_HOME to it.", TOPICS)]
    if not torch_cuda:
        return []
    have, want = release.split(".")[:2], str(torch_cuda).split(".")[:2]
    evidence = f"{ev.get('nvcc')} --version: release {release}; torch.version.cuda = {torch_cuda}"
    if have[0] != want[0]:
        return [Finding("NVCC_TORCH_CUDA_MISMATCH", "problem",
                        f"nvcc is CUDA {release} but torch was built with CUDA {torch_cuda}: CUDA extensions will not build",
                        evidence,
                        f"Point CUDA_HOME at a CUDA {want[0]}.x toolkit (e.g. /usr/local/cuda-{'.'.join(want)}), or install "
                        f"the torch build for CUDA {release}; torch.utils.cpp_extension refuses a different major version.",
                        (*TOPICS, "cuda version mismatch", "the detected cuda version mismatches"))]
    if have != want:
        return [Finding("NVCC_TORCH_CUDA_MINOR_DIFFERS", "info",
                        f"nvcc is CUDA {release}, torch's is {torch_cuda}: extensions build with a warning",
                        evidence, "", (*TOPICS, "cuda version mismatch"))]
    return []
