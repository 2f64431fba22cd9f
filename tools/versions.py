"""Versions of python, torch, deepspeed, transformers, accelerate, vllm, flash-attn and NCCL in the user's interpreter."""  # noqa: E501 - the LLM-facing description is one line

from __future__ import annotations

from typing import Any

from tools.base import Clock, Finding, ProbeContext, ProbeResult, RunCommand, finish, run_command
from tools.target_python import interpreter_available, report_for_probe

NAME = "versions"


def available(ctx: ProbeContext) -> tuple[bool, str]:
    return interpreter_available(ctx)


def probe(ctx: ProbeContext, run: RunCommand = run_command) -> ProbeResult:
    """Report python, torch, deepspeed, transformers, accelerate, vllm, flash-attn and NCCL versions in the user's interpreter and flag packages that pin a different torch."""  # noqa: E501 - the LLM-facing description is one line
    clock = Clock(ctx.timeout_s)
    found = report_for_probe(NAME, "versions", ctx, run, clock)
    if isinstance(found, ProbeResult):
        return found
    python, report = found["python"], found["report"]
    packages = report.get("packages", {})
    findings = judge(report)
    installed = ", ".join(f"{k} {v}" for k, v in packages.items() if v)
    summary = f"Python {report.get('python')}; {installed}; NCCL {report.get('nccl') or 'n/a'}"
    return finish(NAME, clock, findings, {"python_path": python, **report}, summary)


def judge(report: dict[str, Any]) -> list[Finding]:
    """The verdicts on an interpreter's report (this machine's, or a bundle's raw evidence)."""
    packages = report.get("packages", {})
    findings = [
        Finding("TORCH_VERSION_CONFLICT", "problem",
                f"{c['package']} {c['version']} requires {c['requires']}, installed torch is {packages.get('torch')}",
                f"importlib.metadata.requires({c['package']!r}) -> {c['requires']}; torch {packages.get('torch')}",
                f"Install a {c['package']} release built for torch {packages.get('torch')}, or install the torch it "
                f"pins (`pip install '{c['requires']}'` with the right --index-url for your CUDA).",
                ("version mismatch", c["package"], "undefined symbol", "torch version"))
        for c in report.get("torch_pins", [])
    ]
    pip_nccl = packages.get("nvidia-nccl-cu12") or packages.get("nvidia-nccl-cu13")
    if pip_nccl and report.get("nccl") and not pip_nccl.startswith(report["nccl"]):
        findings.append(Finding("NCCL_VERSION_DIFFERS", "info",
                                f"torch reports NCCL {report['nccl']} but the nvidia-nccl wheel is {pip_nccl}",
                                f"torch.cuda.nccl.version() = {report['nccl']}; nvidia-nccl = {pip_nccl}",
                                "Another libnccl is loaded first (LD_LIBRARY_PATH / LD_PRELOAD / NCCL built into "
                                "torch); make every node use the same one.", ("nccl version", "ld_library_path")))
    return findings
