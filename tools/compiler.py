"""The C/C++ compilers that JIT builds use (torch.utils.cpp_extension, DeepSpeed ops, Triton's launcher), read by running `--version`."""  # noqa: E501 - the LLM-facing description is one line

from __future__ import annotations

import os
import re
import shutil
from typing import Any

from tools.base import Clock, Finding, ProbeContext, ProbeResult, RunCommand, finish, run_command

NAME = "compiler"
_VERSION = re.compile(r"(\d+\.\d+(?:\.\d+)?)\s*$")
TOPICS = ("c++ compiler", "gcc", "jit compile", "cpp_extension", "failed to find c compiler")


def compilers(environ: Any) -> dict[str, str]:
    """The compilers a JIT build calls: $CXX or c++ (torch.utils.cpp_extension), $CC or cc (Triton), gcc, g++."""
    wanted = {"gcc": "gcc", "g++": "g++", "C++ (CXX)": environ.get("CXX") or "c++", "C (CC)": environ.get("CC") or "cc"}
    return {role: name for role, name in wanted.items()}


def available(ctx: ProbeContext) -> tuple[bool, str]:
    return True, ""  # "no compiler" is itself the answer


def probe(ctx: ProbeContext, run: RunCommand = run_command) -> ProbeResult:
    """Report the C and C++ compilers (gcc/g++ versions, $CC/$CXX) that JIT-compiled extensions and Triton need."""
    clock = Clock(ctx.timeout_s)
    found: dict[str, Any] = {}
    for role, name in compilers(ctx.environ).items():
        path = shutil.which(name.split()[0], path=ctx.environ.get("PATH"))
        if path is None:
            found[role] = {"command": name, "path": None, "version": None}
            continue
        result = run([path, "--version"], min(clock.left(), 5.0), ctx.environ)
        first = (result.stdout.strip().splitlines() or [""])[0].strip()
        error = "" if result.returncode == 0 and first else (
            "timed out (killed)" if result.timed_out else (result.error or result.stderr.strip()[-200:] or f"exit {result.returncode}"))
        found[role] = {"command": name, "path": path, "real_path": os.path.realpath(path), "version": first or None,
                       "error": error}
    evidence = {"compilers": found}
    return finish(NAME, clock, judge(evidence), evidence, summary(evidence))


def summary(ev: dict[str, Any]) -> str:
    """"gcc 12.2.0, g++ 12.2.0": one entry per compiler and version (c++ is usually g++; $CXX=/opt/gcc/bin/g++ of
    the same version is the same entry), the version's number only."""
    shown: dict[str, str] = {}
    for c in (ev.get("compilers") or {}).values():
        if c.get("version"):
            match = _VERSION.search(str(c["version"]))
            text = f"{os.path.basename(str(c['command']))} {match.group(1) if match else c['version']}"
            shown.setdefault(str(c.get("real_path") or c.get("path")), text)
    return ", ".join(dict.fromkeys(shown.values())) or "no C/C++ compiler found"


def judge(ev: dict[str, Any]) -> list[Finding]:
    table = ev.get("compilers") or {}
    missing = [f"{role}: {c.get('command')}" for role, c in table.items() if not c.get("version")]
    if table and len(missing) == len(table):
        return [Finding("COMPILER_NOT_FOUND", "info", "no C/C++ compiler: JIT builds and Triton kernels cannot compile here",
                        "not found or not runnable: " + ", ".join(missing),
                        "Install one (`apt install build-essential`, or `conda install gxx_linux-64`), or set CC/CXX; "
                        "torch.compile's Triton kernels and DeepSpeed ops that are not prebuilt need it.", TOPICS)]
    return []
