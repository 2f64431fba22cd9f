"""A bundle is evidence, not advice: its verdicts are recomputed here from its raw evidence, by the same rules
the probes apply on this machine.

What a bundle says in words (a summary, a finding, a fix) was written elsewhere and may have been edited:
nothing of it is shown as traindoc's. Each result's findings, status and fixes come from traindoc's own
rules run on the bundle's numbers, names and lists (validated by ``tools.bundle``); the bundle's own summary
is only quoted, labelled with where it came from. A result whose evidence cannot be re-judged keeps no
verdict at all.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import fields
from typing import Any

from tools.base import Clock, Finding, ProbeContext, ProbeResult, Status

Judge = Callable[[Mapping[str, Any]], list[Finding]]


def quoted(source: str, text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return f'{source} reports: "{text[:limit]}{"…" if len(text) > limit else ""}"'


def rejudge(result: ProbeResult, source: str) -> ProbeResult:
    """``result`` as traindoc judges its evidence; the bundle's own words only quoted, never a fix."""
    if result.status not in (Status.OK, Status.PROBLEM):
        return ProbeResult(result.probe, result.status, quoted(source, result.summary), (), result.evidence,
                           result.duration_ms)
    judge = JUDGES.get(result.probe)
    try:
        found = judge(result.evidence) if judge is not None else None
    except (KeyError, TypeError, ValueError, AttributeError, IndexError, OverflowError) as exc:
        found = None
        why = f"{type(exc).__name__}: {exc}"[:200]
    else:
        why = "no rule for this probe"
    if found is None:
        return ProbeResult(result.probe, Status.OK, f"not re-checked ({why}); " + quoted(source, result.summary), (),
                           result.evidence, result.duration_ms)
    problems = [f for f in found if f.severity == "problem"]
    if problems:
        summary = "; ".join(f.summary for f in problems[:3]) + (f" (+{len(problems) - 3} more)" if len(problems) > 3 else "")
        return ProbeResult(result.probe, Status.PROBLEM, summary, tuple(found), result.evidence, result.duration_ms)
    return ProbeResult(result.probe, Status.OK, quoted(source, result.summary), tuple(found), result.evidence,
                       result.duration_ms)


def _env_vars(ev: Mapping[str, Any]) -> list[Finding]:
    from tools import env_vars

    variables = {str(k): str(v) for k, v in (ev.get("variables") or {}).items()}
    nics = [str(n) for n in ev.get("interfaces") or []]
    count = ev.get("gpu_count")
    return list(env_vars.probe(ProbeContext(environ=variables), gpu_count=lambda ctx: count, interfaces=lambda: nics).findings)


def _facts(ev: Mapping[str, Any]) -> Any:
    from tools.gpu_inventory import Gpu, GpuFacts

    names = {f.name for f in fields(Gpu)}
    gpus = [Gpu(**{k: v for k, v in g.items() if k in names}) for g in ev.get("gpus") or []]
    return GpuFacts(str(ev.get("source") or "bundle"), str(ev.get("driver_version") or ""), ev.get("cuda_driver_version"), gpus)


def _gpu_inventory(ev: Mapping[str, Any]) -> list[Finding]:
    from tools.gpu_inventory import _findings

    return _findings(_facts(ev))


def _torch_cuda_compat(ev: Mapping[str, Any]) -> list[Finding]:
    from tools.gpu_inventory import Gpu, GpuFacts
    from tools.torch_cuda_compat import _findings

    gpus = ev.get("gpus")
    facts = None if gpus is None else GpuFacts(
        "bundle", str(ev.get("driver_version") or ""), None,
        [Gpu(i, str(g["name"]), str(g["capability"]), 0, 0, None) for i, g in enumerate(gpus)])
    # PATH empty: whether this machine has nvidia-smi says nothing about the bundle's
    return _findings(dict(ev["report"]), facts, ProbeContext(environ={"PATH": ""}),
                     [str(n) for n in ev.get("device_nodes") or []])


def _versions(ev: Mapping[str, Any]) -> list[Finding]:
    from tools.versions import judge

    return judge(dict(ev))


def _disk_and_memory(ev: Mapping[str, Any]) -> list[Finding]:
    from tools.disk_and_memory import disk_findings, memory_findings, shm_findings

    found: list[Finding] = []
    for directory, disk in (ev.get("disks") or {}).items():
        if "free_bytes" in disk and "total_bytes" in disk:
            found += disk_findings(str(disk.get("checked") or directory), int(disk["total_bytes"]), int(disk["free_bytes"]))
    if "shm_bytes" in ev:
        found += shm_findings("/dev/shm", int(ev["shm_bytes"]))
    memory = ev.get("memory") or {}
    if "total_bytes" in memory and "available_bytes" in memory:
        found += memory_findings(int(memory["total_bytes"]), int(memory["available_bytes"]))
    return found


def _port_check(ev: Mapping[str, Any]) -> list[Finding]:
    from tools.port_check import _in_use, _master_addr

    found: list[Finding] = []
    for port, entry in (ev.get("ports") or {}).items():
        if not entry.get("free", True):
            owners = [{"pid": int(o["pid"]), "cmdline": str(o.get("cmdline", "?"))} for o in entry.get("owners") or []]
            found.append(_in_use(int(port), owners, dict(entry.get("bind_errors") or {})))
    master = ev.get("master_addr")
    if master:
        def resolver(host: str, port: int, timeout: float) -> list[str]:
            if "error" in master:
                raise OSError(str(master["error"]))
            return [str(a) for a in master.get("addresses") or [host]]

        def connector(address: str, port: int, timeout: float) -> str:
            return str(master.get("connect_error") or "")

        port = int(master.get("port") or next(iter(ev.get("ports") or {"29500": None})))
        found += _master_addr(ProbeContext(environ={"MASTER_ADDR": str(master["host"])}), port, Clock(5.0), resolver,
                              connector, {})
    return found


def _processes(ev: Mapping[str, Any]) -> list[Finding]:
    from tools.processes import Proc, probe

    procs = [Proc(int(p["pid"]), int(p["ppid"]), str(p["cmdline"]), p.get("age_s")) for p in ev.get("processes") or []]
    return list(probe(ProbeContext(timeout_s=5.0), reader=lambda: procs, self_pid=-1).findings)


def _log_grep(ev: Mapping[str, Any]) -> list[Finding]:
    from tools.log_grep import Group, LogScan, _findings, load_signatures

    signatures = {s.name: s for s in load_signatures()}
    found: list[Finding] = []
    for scan in ev.get("files") or []:
        groups = [Group(signatures[g["signature"]], str(g["example"]), int(g["count"]), int(g["first_line"]),
                        int(g["last_line"]), {int(r) for r in g.get("ranks") or []})
                  for g in scan.get("groups") or [] if g.get("signature") in signatures]
        found += _findings(LogScan(str(scan["path"]), "bundle", groups))
    return found


def _cuda_toolkit(ev: Mapping[str, Any]) -> list[Finding]:
    from tools.cuda_toolkit import judge

    return judge(dict(ev))


def _compiler(ev: Mapping[str, Any]) -> list[Finding]:
    from tools.compiler import judge

    return judge(dict(ev))


def _deepspeed_ops(ev: Mapping[str, Any]) -> list[Finding]:
    from tools.deepspeed_ops import judge, op_compatibility

    facts = dict(ev)
    facts["compatible"] = op_compatibility(facts)  # recomputed from the bundle's facts, not taken from it
    return judge(facts)


JUDGES: dict[str, Judge] = {
    "env_vars": _env_vars,
    "gpu_inventory": _gpu_inventory,
    "torch_cuda_compat": _torch_cuda_compat,
    "versions": _versions,
    "disk_and_memory": _disk_and_memory,
    "port_check": _port_check,
    "processes": _processes,
    "log_grep": _log_grep,
    "system_info": lambda ev: [],  # facts only: nothing to judge
    "cuda_toolkit": _cuda_toolkit,
    "compiler": _compiler,
    "deepspeed_ops": _deepspeed_ops,
}
