"""Does the user's torch build have kernels for their GPUs, and can their driver run it?"""

from __future__ import annotations

import glob
import json
import re
import shutil
from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import cache
from typing import Any

from tools import gpu_inventory
from tools.base import (
    Clock,
    Finding,
    ProbeContext,
    ProbeResult,
    RunCommand,
    data_path,
    finish,
    run_command,
)
from tools.target_python import guessed, interpreter_available, report_for_probe

NAME = "torch_cuda_compat"
GpuFactsFn = Callable[[ProbeContext], "gpu_inventory.GpuFacts | None"]
DeviceNodesFn = Callable[[], list[str]]
_ARCH = re.compile(r"^(sm|compute)_(\d+)([af]?)$")


@cache
def support_table() -> dict[str, Any]:
    with open(data_path("cuda_arch_support.json"), encoding="utf-8") as f:
        return json.load(f)


def available(ctx: ProbeContext) -> tuple[bool, str]:
    return interpreter_available(ctx)


def arch_supported(arch_list: list[str], capability: tuple[int, int]) -> tuple[bool, str]:
    """Whether a device of ``capability`` can run this build: SASS for the same major at or below its minor
    (binary compatible), or PTX (compute_XY) of the same major at or below it that the driver can JIT."""
    major, minor = capability
    sass: list[str] = []
    ptx: list[str] = []
    for arch in arch_list:
        m = _ARCH.match(arch)
        if not m:
            continue
        value = int(m.group(2))
        arch_major, arch_minor = value // 10, value % 10
        if arch_major != major or arch_minor > minor:
            continue
        if m.group(3) and arch_minor != minor:  # sm_90a / sm_100f run only on that exact arch family
            continue
        (sass if m.group(1) == "sm" else ptx).append(arch)
    if sass:
        return True, f"SASS {', '.join(sass)}"
    if ptx:
        return True, f"PTX {', '.join(ptx)} (JIT-compiled at first use: slow start)"
    return False, "no sm_/compute_ entry for this major at or below it"


def device_nodes() -> list[str]:
    """/dev/nvidia0, /dev/nvidia1, ...: the GPUs the kernel exposes here, even where NVML cannot load."""
    return sorted(glob.glob("/dev/nvidia[0-9]*"))


def gpu_visible(facts: gpu_inventory.GpuFacts | None, ctx: ProbeContext, nodes: Sequence[str] = ()) -> bool:
    """A GPU is visible here: NVML lists one, nvidia-smi is on PATH, or /dev/nvidia<N> exists."""
    return (facts is not None and bool(facts.gpus)) or bool(nodes) \
        or bool(shutil.which("nvidia-smi", path=ctx.environ.get("PATH")))


def probe(
    ctx: ProbeContext,
    run: RunCommand = run_command,
    gpu_facts: GpuFactsFn = gpu_inventory.gpu_facts,
    nodes: DeviceNodesFn = device_nodes,
) -> ProbeResult:
    """Check the user's torch build against their GPUs: arch list vs compute capability (sm_XY), CPU-only builds, driver too old for torch's CUDA."""  # noqa: E501 - the LLM-facing description is one line
    clock = Clock(ctx.timeout_s)
    found = report_for_probe(NAME, "torch", ctx, run, clock)
    if isinstance(found, ProbeResult):
        return found
    python, report = found["python"], found["report"]
    facts = gpu_facts(ctx)
    device_files = nodes()
    evidence = {"python": python, "report": report,
                "gpus": [{"name": g.name, "capability": g.capability} for g in facts.gpus] if facts else None,
                "driver_version": facts.driver_version if facts else None, "device_nodes": device_files}
    findings = _findings(report, facts, ctx, device_files)
    if guessed(ctx):  # not the job's own interpreter: what it shows is said, and does not lead the answer,
        # except a CPU-only torch where a GPU is visible: whichever interpreter the job uses, that one is wrong
        keep = gpu_visible(facts, ctx, device_files)
        findings = [replace(f, summary=f"{f.summary} (in {python}, the first python on PATH)")
                    if keep and f.code == "TORCH_CPU_ONLY" else _not_leading(f, python) for f in findings]
    if "torch_error" in report:
        summary = f"torch not importable in {python}"
    else:
        summary = (f"torch {report.get('torch')} (CUDA {report.get('torch_cuda')}), arch list "
                   f"{' '.join(report.get('arch_list') or []) or 'empty'}, {len(report.get('devices', []))} device(s)")
    return finish(NAME, clock, findings, evidence, summary)


def _findings(report: dict[str, Any], facts: gpu_inventory.GpuFacts | None, ctx: ProbeContext,
              nodes: Sequence[str] = ()) -> list[Finding]:
    if "torch_error" in report:
        code = "TORCH_NOT_INSTALLED" if report.get("torch_missing") else "TORCH_IMPORT_FAILED"
        return [Finding(code, "problem", f"`import torch` fails in {report.get('executable')}", report["torch_error"],
                        "Install a CUDA build of torch into this interpreter, e.g. "
                        "`pip install torch --index-url https://download.pytorch.org/whl/cu128`.",
                        ("torch install", "import torch", "pytorch build"))]
    found: list[Finding] = []
    arch_list = list(report.get("arch_list") or [])
    for device in report.get("devices", []):
        capability = (int(device["capability"][0]), int(device["capability"][1]))
        ok, why = arch_supported(arch_list, capability)
        if not ok:
            found.append(_arch_finding(report, device["name"], capability, arch_list))
        elif why.startswith("PTX"):
            found.append(Finding("CUDA_ARCH_PTX_ONLY", "info", f"{device['name']} runs torch kernels through PTX JIT",
                                 f"sm_{capability[0]}{capability[1]}: {why}", "", ("ptx", "cuda capability")))
    has_gpu = gpu_visible(facts, ctx, nodes)
    if report.get("torch_cuda") is None and not has_gpu:
        found.append(Finding(
            "TORCH_CPU_ONLY", "problem",
            f"torch {report.get('torch')} is a CPU-only build, and no NVIDIA driver is visible here: "
            "torch.cuda.is_available() is False for both reasons",
            f"torch.version.cuda is None; torch.__version__ = {report.get('torch')}; no NVML library and no nvidia-smi",
            "Install a CUDA build of torch (`pip install torch --index-url https://download.pytorch.org/whl/cu128`); "
            "in a container, also start it with the GPUs passed in (`docker run --gpus all ...`, NVIDIA Container "
            "Toolkit) so the driver's libraries and /dev/nvidia* are inside.",
            ("cpu-only torch", "torch.cuda.is_available false", "pytorch build", "docker gpus")))
    if report.get("torch_cuda") is None and has_gpu:
        found.append(Finding(
            "TORCH_CPU_ONLY", "problem", f"torch {report.get('torch')} is a CPU-only build but this machine has NVIDIA GPUs",  # noqa: E501
            f"torch.version.cuda is None; torch.__version__ = {report.get('torch')}; GPUs: "
            + (", ".join(g.name for g in facts.gpus) if facts and facts.gpus
               else ", ".join(nodes) if nodes else "nvidia-smi present"),
            "Reinstall a CUDA build: `pip install torch --index-url https://download.pytorch.org/whl/cu128` "
            "(cu126 for pre-Turing GPUs); with conda, install `pytorch-cuda` rather than the cpuonly package.",
            ("cpu-only torch", "torch.cuda.is_available false", "pytorch build")))
    found.extend(_driver_findings(report, facts))
    if report.get("torch_cuda") and report.get("is_available") is False and has_gpu:
        found.append(Finding(
            "CUDA_NOT_AVAILABLE", "problem", "torch.cuda.is_available() is False although GPUs are present",
            report.get("cuda_error")
            or f"CUDA build {report.get('torch_cuda')}, device_count={report.get('device_count')}",
            "Check CUDA_VISIBLE_DEVICES, the container's --gpus flag and that the driver supports this CUDA version.",
            ("torch.cuda.is_available false", "cuda init")))
    if "cuDNN version incompatibility" in str(report.get("cudnn_error") or ""):
        found.append(Finding(
            "CUDNN_VERSION_MISMATCH", "problem", "the cuDNN library loaded is not the one torch was built for",
            str(report["cudnn_error"])[:500],
            "Let torch load its own cuDNN: remove other libcudnn folders from LD_LIBRARY_PATH, or install the "
            "nvidia-cudnn wheel version torch pins (`pip install torch --force-reinstall` with the right --index-url).",
            ("cudnn", "cudnn version incompatibility", "ld_library_path")))
    return found


def _not_leading(finding: Finding, python: str) -> Finding:
    """A problem seen in an interpreter traindoc only guessed (python on PATH): said, as information."""
    if finding.severity != "problem":
        return finding
    return replace(finding, severity="info",
                   summary=f"{finding.summary} (in {python}, the first python on PATH: pass --python with your job's)")


def _arch_finding(report: dict[str, Any], name: str, capability: tuple[int, int], arch_list: list[str]) -> Finding:
    table = support_table()
    key = f"{capability[0]}.{capability[1]}"
    row = table["capabilities"].get(key, table["fallback"])
    sm = f"sm_{capability[0]}{capability[1]}"
    summary = (f"torch {report.get('torch')} has no kernels for {name} ({sm}, {row['arch']}): "
               f"needs a CUDA {row['min_cuda']}+ build, PyTorch {row['min_torch']} or later")
    fix = f"`{row['pip']}` (PyTorch {row['min_torch']}+ built with CUDA {row['min_cuda']}+). {row['note']}".strip()
    if capability[0] >= 10:
        summary += "; advice to use cu124 for Blackwell is stale"
    return Finding(
        "CUDA_ARCH_UNSUPPORTED", "problem", summary,
        f"device {name} capability {key}; torch.cuda.get_arch_list() = {arch_list}; torch.version.cuda = "
        f"{report.get('torch_cuda')}",
        fix, (sm, "cuda capability", "no kernel image is available", "pytorch build", row["arch"].lower()),
    )


def _driver_findings(report: dict[str, Any], facts: gpu_inventory.GpuFacts | None) -> list[Finding]:
    torch_cuda = _version(report.get("torch_cuda"))
    driver_cuda = _version(facts.cuda_driver_version if facts else None) or _cuda_from_int(report.get("driver_cuda"))
    if torch_cuda is None or driver_cuda is None or driver_cuda >= torch_cuda:
        return []
    need = support_table()["min_driver"]
    full = need["toolkit"].get(f"{torch_cuda[0]}.{torch_cuda[1]}", "newer")
    floor = need["minor_compat_floor"].get(str(torch_cuda[0]))
    driver = facts.driver_version if facts and facts.driver_version else "unknown"
    driver_v, floor_v = _version(driver), _version(floor)
    evidence = (f"torch.version.cuda = {report.get('torch_cuda')}; driver supports CUDA up to "
                f"{driver_cuda[0]}.{driver_cuda[1]} (driver {driver})")
    topics = ("driver too old", "cuda driver version is insufficient", "nvidia driver")
    if driver_cuda[0] < torch_cuda[0] or (driver_v and floor_v and driver_v < floor_v):
        return [Finding("DRIVER_TOO_OLD", "problem",
                        f"NVIDIA driver supports CUDA {driver_cuda[0]}.{driver_cuda[1]} but torch was built for "
                        f"CUDA {report.get('torch_cuda')}", evidence,
                        f"Upgrade the NVIDIA driver to {full} or newer, or install a torch build for CUDA "
                        f"{driver_cuda[0]}.x (e.g. `pip install torch --index-url "
                        f"https://download.pytorch.org/whl/cu{driver_cuda[0]}{driver_cuda[1]}` if that index exists).",
                        topics)]
    return [Finding("DRIVER_OLDER_THAN_TORCH_CUDA", "info",
                    f"driver's CUDA {driver_cuda[0]}.{driver_cuda[1]} is older than torch's CUDA "
                    f"{report.get('torch_cuda')}: works through minor version compatibility, without PTX JIT",
                    evidence, f"Upgrade the driver to {full} or newer for full support.", topics)]


def _version(text: Any) -> tuple[int, ...] | None:
    if not text:
        return None
    parts = re.findall(r"\d+", str(text))
    return tuple(int(p) for p in parts) or None


def _cuda_from_int(value: Any) -> tuple[int, int] | None:
    return (int(value) // 1000, int(value) % 1000 // 10) if isinstance(value, int) and value > 0 else None
