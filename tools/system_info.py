"""The host itself: OS release, kernel, glibc, CPU architecture and the loaded NVIDIA kernel module (/proc/driver/nvidia/version)."""  # noqa: E501 - the LLM-facing description is one line

from __future__ import annotations

import os
import platform
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tools.base import Clock, ProbeContext, ProbeResult, finish

NAME = "system_info"
ReadText = Callable[[str], str | None]
_MODULE = re.compile(r"Kernel Module(?: for \S+)?\s+(\d+\.\d+(?:\.\d+)?)")


def read_text(path: str) -> str | None:
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace")[:20_000]
    except OSError:
        return None


def os_release(text: str | None) -> str | None:
    if not text:
        return None
    fields = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
    name = fields.get("PRETTY_NAME") or fields.get("NAME")
    return name.strip().strip('"') if name else None


def nvidia_module(text: str | None) -> str | None:
    """The driver version in /proc/driver/nvidia/version ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04 ...")."""  # noqa: E501
    match = _MODULE.search(text or "")
    return match.group(1) if match else None


def glibc() -> str | None:
    try:
        value = os.confstr("CS_GNU_LIBC_VERSION")  # "glibc 2.39"
    except (ValueError, OSError, AttributeError):
        return None
    return value.split()[-1] if value else None


def available(ctx: ProbeContext) -> tuple[bool, str]:
    return True, ""


def probe(ctx: ProbeContext, read: ReadText = read_text) -> ProbeResult:
    """Report the OS release, kernel, glibc, CPU architecture and the NVIDIA kernel module version of this host."""
    clock = Clock(ctx.timeout_s)
    module_text = read("/proc/driver/nvidia/version")
    evidence: dict[str, Any] = {
        "os": os_release(read("/etc/os-release")), "kernel": platform.release(), "arch": platform.machine(),
        "glibc": glibc(), "nvidia_module": nvidia_module(module_text),
        "nvidia_module_line": (module_text or "").strip().splitlines()[0] if module_text else None,
    }
    summary = ", ".join(str(v) for v in (evidence["os"], evidence["arch"], f"glibc {evidence['glibc']}") if v)
    return finish(NAME, clock, [], evidence, summary)
