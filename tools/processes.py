"""Leftover training processes (torchrun, deepspeed, accelerate, *train*.py, vllm, ray workers) that still hold GPUs or ports."""  # noqa: E501 - the LLM-facing description is one line

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from tools.base import Clock, Finding, ProbeContext, ProbeResult, finish
from tools.redact import mask_text

NAME = "processes"
MAX_LISTED = 30
_TRAINING = re.compile(
    r"(^|[/\s])(torchrun|deepspeed|accelerate(-launch)?\s+launch|accelerate-launch)(\s|$)"
    r"|torch\.distributed\.(run|launch)"
    r"|python[\d.]*\s+(-\S+\s+)*\S*train\S*\.py"
    r"|(^|[/\s])vllm(\s|$)|vllm\.entrypoints"
    r"|^ray::|default_worker\.py|raylet"
)


@dataclass(frozen=True)
class Proc:
    pid: int
    ppid: int
    cmdline: str
    age_s: float | None


ProcReader = Callable[[], list[Proc]]


def available(ctx: ProbeContext) -> tuple[bool, str]:
    if not Path("/proc/self").exists():
        return False, "/proc not found (not Linux)"
    return True, ""


def read_procs(proc_root: Path = Path("/proc")) -> list[Proc]:
    """Every process we can read; vanished or foreign ones are skipped."""
    ticks = os.sysconf("SC_CLK_TCK")
    try:
        uptime = float((proc_root / "uptime").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        uptime = None
    procs = []
    for pid_dir in proc_root.iterdir():
        if not pid_dir.name.isdigit():
            continue
        try:
            cmdline = (pid_dir / "cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace").strip()
            stat = (pid_dir / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()  # the command name may contain spaces and parentheses
        ppid, start = int(fields[1]), int(fields[19])
        age = round(uptime - start / ticks, 1) if uptime is not None else None
        procs.append(Proc(int(pid_dir.name), ppid, cmdline, age))
    return procs


def ancestors(pid: int, parents: dict[int, int]) -> set[int]:
    seen = {pid}
    while pid in parents and parents[pid] not in seen and parents[pid] > 0:
        pid = parents[pid]
        seen.add(pid)
    return seen


def probe(ctx: ProbeContext, reader: ProcReader = read_procs, self_pid: int | None = None) -> ProbeResult:
    """List leftover training processes (torchrun, deepspeed, accelerate launch, python *train*.py, vllm, ray workers) with pid, age and command line; never kills anything."""  # noqa: E501 - the LLM-facing description is one line
    clock = Clock(ctx.timeout_s)
    procs = reader()
    parents = {p.pid: p.ppid for p in procs}
    skip = ancestors(self_pid if self_pid is not None else os.getpid(), parents)
    by_pid = {p.pid: p for p in procs}
    hits = [p for p in procs if p.pid not in skip and _TRAINING.search(p.cmdline)]
    hits.sort(key=lambda p: p.pid)
    listed = [
        {**asdict(p), "cmdline": mask_text(p.cmdline)[:300],
         "parent": mask_text(by_pid[p.ppid].cmdline)[:120] if p.ppid in by_pid else None}
        for p in hits[:MAX_LISTED]
    ]
    findings = []
    if hits:
        # Children of a listed launcher die with it: suggest killing only the top of each tree.
        roots = [p for p in hits if p.ppid not in {h.pid for h in hits}]
        evidence_lines = "; ".join(f"pid {p['pid']} (age {_age(p['age_s'])}): {p['cmdline'][:120]}" for p in listed[:5])
        findings.append(Finding(
            "LEFTOVER_TRAINING_PROCESS", "problem",
            f"{len(hits)} training-like process(es) still running (oldest {_age(max((p.age_s or 0) for p in hits))})",
            evidence_lines + (f" (+{len(hits) - 5} more)" if len(hits) > 5 else ""),
            f"If they are leftovers from an earlier run, stop them: `kill {' '.join(str(p.pid) for p in roots[:10])}` "
            "(or `pkill -f torchrun`); check `nvidia-smi` afterwards. traindoc never kills processes itself.",
            ("leftover process", "zombie process", "address already in use", "cuda out of memory")))
    evidence = {"processes": listed, "matched": len(hits), "scanned": len(procs)}
    return finish(NAME, clock, findings, evidence, f"no training processes running ({len(procs)} scanned)")


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f}min"
    return f"{seconds / 3600:.1f}h"
