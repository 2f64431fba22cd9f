"""Free disk space where checkpoints go, /dev/shm size (DataLoader workers, NCCL) and system RAM."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tools.base import Clock, Finding, ProbeContext, ProbeResult, Status, failed, finish

NAME = "disk_and_memory"
GIB = 1024**3
DISK_MIN_FRACTION, DISK_MIN_BYTES = 0.05, 10 * GIB
SHM_MIN_BYTES = 1 * GIB
MEM_MIN_FRACTION, MEM_MIN_BYTES = 0.10, 2 * GIB
StatVfs = Callable[[str], Any]  # os.statvfs-like: f_frsize, f_blocks, f_bavail


def available(ctx: ProbeContext) -> tuple[bool, str]:
    return True, ""


def read_meminfo() -> str:
    with open("/proc/meminfo", encoding="ascii") as f:
        return f.read()


def parse_meminfo(text: str) -> dict[str, int]:
    """Field -> bytes."""
    values = {}
    for line in text.splitlines():
        name, _, rest = line.partition(":")
        parts = rest.split()
        if parts and parts[0].isdigit():
            values[name.strip()] = int(parts[0]) * (1024 if parts[1:] == ["kB"] else 1)
    return values


def probe(
    ctx: ProbeContext,
    statvfs: StatVfs = os.statvfs,
    meminfo: Callable[[], str] = read_meminfo,
    shm_path: str = "/dev/shm",
) -> ProbeResult:
    """Check free disk space on the output/checkpoint directories, the size of /dev/shm, and available system RAM."""
    clock = Clock(ctx.timeout_s)
    findings: list[Finding] = []
    disks: dict[str, Any] = {}
    for directory in ctx.output_dirs or (Path.cwd(),):
        where = _existing(Path(directory))
        try:
            st = statvfs(os.fspath(where))
        except OSError as exc:
            disks[str(directory)] = {"error": f"statvfs({str(where)!r}): {exc}"}
            continue
        total, free = st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize
        disks[str(directory)] = {"checked": str(where), "total_bytes": total, "free_bytes": free}
        findings.extend(disk_findings(str(where), total, free))
    evidence: dict[str, Any] = {"disks": disks}
    try:
        st = statvfs(shm_path)
        shm = st.f_blocks * st.f_frsize
        evidence["shm_bytes"] = shm
        findings.extend(shm_findings(shm_path, shm))
    except OSError as exc:
        evidence["shm_error"] = f"statvfs({shm_path!r}): {exc}"
    try:
        mem = parse_meminfo(meminfo())
    except OSError as exc:
        return failed(NAME, clock, Status.ERROR, f"reading /proc/meminfo failed: {exc}", **evidence)
    total, avail = mem.get("MemTotal", 0), mem.get("MemAvailable", mem.get("MemFree", 0))
    evidence["memory"] = {"total_bytes": total, "available_bytes": avail, "swap_free_bytes": mem.get("SwapFree")}
    findings.extend(memory_findings(total, avail))
    summary = (f"RAM {_gib(avail)} available of {_gib(total)}; /dev/shm {_gib(evidence.get('shm_bytes', 0))}; "
               + ", ".join(f"{d}: {_gib(v['free_bytes'])} free" for d, v in disks.items() if "free_bytes" in v))
    return finish(NAME, clock, findings, evidence, summary)


def disk_findings(where: str, total: int, free: int) -> list[Finding]:
    if not total or (free >= DISK_MIN_FRACTION * total and free >= DISK_MIN_BYTES):
        return []
    return [Finding(
        "DISK_NEARLY_FULL", "problem", f"only {_gib(free)} free on {where} ({100 * free / total:.1f}%)",
        f"statvfs({where}): {_gib(free)} free of {_gib(total)}",
        "Free space or point the output/checkpoint directory at a larger disk before saving; a full disk "
        "truncates checkpoints (`No space left on device`). `du -sh` the run directory for old checkpoints.",
        ("no space left on device", "checkpoint save", "disk full"))]


def shm_findings(shm_path: str, shm: int) -> list[Finding]:
    if shm >= SHM_MIN_BYTES:
        return []
    return [Finding(
        "SHM_TOO_SMALL", "problem", f"{shm_path} is only {shm // (1024 * 1024)} MiB",
        f"statvfs({shm_path}): {shm} bytes total (docker's default is 64 MB)",
        "Start the container with `--shm-size=16g` or `--ipc=host` (Kubernetes: an emptyDir with "
        "medium: Memory mounted at /dev/shm); or use fewer DataLoader workers.",
        ("/dev/shm", "shm-size", "bus error", "dataloader worker"))]


def memory_findings(total: int, avail: int) -> list[Finding]:
    if not total or (avail >= MEM_MIN_FRACTION * total and avail >= MEM_MIN_BYTES):
        return []
    return [Finding(
        "LOW_MEMORY", "problem", f"only {_gib(avail)} of {_gib(total)} RAM available",
        f"/proc/meminfo: MemAvailable {avail} bytes, MemTotal {total} bytes",
        "Processes may be killed by the OOM killer (`Killed`, exit code 137): reduce DataLoader workers/prefetch, "
        "stop leftover processes, or load checkpoints with mmap.",
        ("host oom", "killed", "exit code 137", "dataloader"))]


def _existing(path: Path) -> Path:
    """The nearest existing ancestor: the output dir may not exist before the first save."""
    path = path.absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def _gib(value: int) -> str:
    return f"{value / GIB:.1f} GiB"
