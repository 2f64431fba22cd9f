"""DeepSpeed's C++/CUDA ops as ds_report knows them: which are prebuilt, which can be JIT-compiled here (ninja, CUDA_HOME/nvcc vs torch's CUDA, libaio, CUTLASS), without compiling or importing anything."""  # noqa: E501 - the LLM-facing description is one line

from __future__ import annotations

import json
import os
import shutil
from functools import cache
from typing import Any

from tools.base import Clock, Finding, ProbeContext, ProbeResult, RunCommand, Status, data_path, failed, finish, run_command
from tools.cuda_toolkit import read_toolkit
from tools.target_python import interpreter_available, report_for_probe

NAME = "deepspeed_ops"
TOPICS = ("deepspeed", "ds_report", "jit compile", "deepspeed op")


@cache
def rules() -> dict[str, Any]:
    with open(data_path("deepspeed_ops.json"), encoding="utf-8") as f:
        return json.load(f)


def available(ctx: ProbeContext) -> tuple[bool, str]:
    return interpreter_available(ctx)


def probe(ctx: ProbeContext, run: RunCommand = run_command) -> ProbeResult:
    """Report DeepSpeed's ops like ds_report (prebuilt or JIT-compatible) and its JIT prerequisites: ninja, CUDA_HOME, nvcc matching torch's CUDA."""  # noqa: E501 - the LLM-facing description is one line
    clock = Clock(ctx.timeout_s)
    found = report_for_probe(NAME, "deepspeed", ctx, run, clock)
    if isinstance(found, ProbeResult):
        return found
    python, report = found["python"], found["report"]
    if not report.get("installed"):
        return failed(NAME, clock, Status.UNAVAILABLE, f"DeepSpeed is not installed in {python}", python=python)
    toolkit = read_toolkit(ctx, run, min(clock.left(), 10.0))
    evidence = {
        "python": python, "version": report.get("version"), "path": report.get("path"),
        "torch": report.get("torch"), "torch_cuda": report.get("torch_cuda"), "built_with": report.get("built_with"),
        "ops": list(report.get("ops") or []), "installed_ops": dict(report.get("installed_ops") or {}),
        "ninja": shutil.which("ninja", path=ctx.environ.get("PATH")),
        "nvcc": toolkit.nvcc, "nvcc_release": toolkit.release, "cuda_home": toolkit.cuda_home,
        "ds_skip_cuda_check": ctx.environ.get("DS_SKIP_CUDA_CHECK") == "1",
        "cutlass_path": ctx.environ.get("CUTLASS_PATH"), "packages": dict(report.get("packages") or {}),
        "libaio": libaio_present(),
    }
    evidence["compatible"] = op_compatibility(evidence)
    prebuilt = sum(1 for v in evidence["installed_ops"].values() if v)
    jit = sum(1 for c in evidence["compatible"].values() if c["ok"])
    summary = (f"DeepSpeed {evidence['version']}: {prebuilt} of {len(evidence['ops'])} ops prebuilt, "
               f"{jit} JIT-compatible; ninja {'found' if evidence['ninja'] else 'missing'}")
    return finish(NAME, clock, judge(evidence), evidence, summary)


def libaio_present() -> bool:
    """What async_io's check (a test program calling io_submit) needs: libaio.h and libaio.so, looked for, not compiled."""
    table = rules()
    header = any(os.path.isfile(os.path.join(d, "libaio.h")) for d in table["include_dirs"])
    library = any(name.startswith("libaio.so") for d in table["library_dirs"] if os.path.isdir(d)
                  for name in _listdir(d))
    return header and library


def _listdir(folder: str) -> list[str]:
    try:
        return os.listdir(folder)
    except OSError:
        return []


def cuda_match(ev: dict[str, Any]) -> tuple[str, str]:
    """DeepSpeed's assert_no_cuda_mismatch: ("ok" | "minor" | "skipped" | "mismatch" | "no nvcc" | "no torch cuda", why)."""
    torch_cuda, release = ev.get("torch_cuda"), ev.get("nvcc_release")
    if not torch_cuda:
        return "no torch cuda", f"torch {ev.get('torch')} is not a CUDA build"
    if not release:
        return "no nvcc", f"no nvcc (CUDA_HOME {ev.get('cuda_home') or 'not found'})"
    have, want = ".".join(str(release).split(".")[:2]), ".".join(str(torch_cuda).split(".")[:2])
    if have == want:
        return "ok", f"nvcc {have} = torch CUDA {want}"
    compatible = rules()["cuda_minor_mismatch_ok"].get(have.split(".")[0], [])
    if have in compatible and want in compatible:
        return "minor", f"nvcc {have}, torch CUDA {want}: accepted by DeepSpeed (same major, compatible APIs)"
    if ev.get("ds_skip_cuda_check"):
        return "skipped", f"nvcc {have} ≠ torch CUDA {want}, allowed by DS_SKIP_CUDA_CHECK=1"
    return "mismatch", f"nvcc {have} ≠ torch CUDA {want}"


def op_compatibility(ev: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per op, whether its JIT build can start here, by the checks its builder's is_compatible makes."""
    table = rules()
    cuda_state, cuda_why = cuda_match(ev)
    cuda_ok = cuda_state in ("ok", "minor", "skipped")
    torch_major = int(str(ev.get("torch") or "0").split(".")[0] or 0)
    packages = ev.get("packages") or {}
    result: dict[str, dict[str, Any]] = {}
    for op in ev.get("ops") or []:
        needs: list[str] = []
        if op not in table["cpu_ops"] and not cuda_ok:
            needs.append(cuda_why)
        pre = table["prerequisites"].get(op, {})
        if pre.get("headers") and not ev.get("libaio"):
            needs.append(pre["needs"])
        elif pre.get("packages") and not (any(packages.get(p) for p in pre["packages"])
                                          or any(ev.get(e.lower()) for e in pre.get("env", []))):
            needs.append(pre["needs"])
        if pre.get("never_with_torch_2") and torch_major >= 2:
            needs.append(pre["needs"])
        result[op] = {"ok": not needs, "why": "; ".join(needs)}
    return result


def judge(ev: dict[str, Any]) -> list[Finding]:
    """The verdicts on DeepSpeed's facts (this machine's, or a bundle's raw evidence)."""
    installed = {op for op, built in (ev.get("installed_ops") or {}).items() if built}
    jit_ops = [op for op in ev.get("ops") or [] if op not in installed]
    found: list[Finding] = []
    where = f"DeepSpeed {ev.get('version')} in {ev.get('python')}"
    if jit_ops and not ev.get("ninja"):
        found.append(Finding("DS_NINJA_MISSING", "problem", "ninja is missing: DeepSpeed ops that are not prebuilt cannot be JIT-compiled",
                             f"{where}: ninja not on PATH; {len(jit_ops)} op(s) not prebuilt",
                             "`pip install ninja` in the job's environment (ds_report: 'JIT compiled ops requires ninja').",
                             (*TOPICS, "ninja")))
    state, why = cuda_match(ev)
    cuda_ops = [op for op in jit_ops if op not in rules()["cpu_ops"]]
    if cuda_ops and state == "mismatch":
        found.append(Finding("DS_CUDA_MISMATCH", "problem",
                             f"DeepSpeed will refuse to JIT-compile its CUDA ops: {why}",
                             f"{where}: {ev.get('nvcc')} release {ev.get('nvcc_release')}; torch.version.cuda = {ev.get('torch_cuda')}",
                             f"Point CUDA_HOME at a CUDA {ev.get('torch_cuda')} toolkit, or install the torch build for CUDA "
                             f"{ev.get('nvcc_release')} (DS_SKIP_CUDA_CHECK=1 skips the check at your own risk).",
                             (*TOPICS, "cuda version mismatch", "installed cuda version does not match")))
    elif cuda_ops and state == "no nvcc":
        found.append(Finding("DS_NO_NVCC", "problem", "DeepSpeed's CUDA ops are not prebuilt and there is no nvcc to JIT-compile them",
                             f"{where}: {why}",
                             "Install the CUDA toolkit matching torch's CUDA and set CUDA_HOME, or install a DeepSpeed "
                             "build with the ops you use prebuilt (DS_BUILD_OPS=1 / DS_BUILD_<OP>=1 at install).",
                             (*TOPICS, "cuda_home does not exist", "nvcc")))
    built = ev.get("built_with") or {}
    if installed and built.get("version") and ev.get("torch"):
        now = ".".join(str(ev["torch"]).split(".")[:2])
        if str(built["version"]) != now or (ev.get("torch_cuda") and built.get("cuda_version")
                                             and str(built["cuda_version"]) != ".".join(str(ev["torch_cuda"]).split(".")[:2])):
            found.append(Finding("DS_OPS_BUILT_FOR_OTHER_TORCH", "problem",
                                 f"DeepSpeed's prebuilt ops were built for torch {built['version']} / CUDA "
                                 f"{built.get('cuda_version')}, not torch {now} / CUDA {ev.get('torch_cuda')}",
                                 f"{where}: git_version_info_installed.torch_info = {built}",
                                 "Reinstall DeepSpeed against this torch (`pip install --no-cache-dir --force-reinstall "
                                 "deepspeed`, with DS_BUILD_OPS as before), or switch back to the torch it was built with.",
                                 (*TOPICS, "pytorch version mismatch", "cuda version mismatch")))
    incompatible = {op: c["why"] for op, c in (ev.get("compatible") or {}).items()
                    if not c.get("ok") and op not in installed}
    if incompatible:
        found.append(Finding("DS_OPS_NOT_COMPATIBLE", "info",
                             f"{len(incompatible)} DeepSpeed op(s) cannot be JIT-compiled here: {', '.join(sorted(incompatible))}",
                             "; ".join(f"{op}: {why}" for op, why in sorted(incompatible.items())),
                             "Only matters for the ops your config uses (ds_report shows them as compatible [NO]).", TOPICS))
    return found
