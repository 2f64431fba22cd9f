"""`traindoc probe`'s table: the probe results as one row per check a user compares (nvidia-smi, ds_report,
torch's collect_env), each with a verdict and a short value, problems first, and the count line.

Rows are read from each probe's evidence and findings only, so a bundle from another machine gives the same
table. Which row a finding belongs to is data (tools/data/check_rows.json)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from tools.base import Finding, ProbeResult, Status, data_path

VERDICTS = ("problem", "error", "timed out", "note", "ok", "unavailable")  # the table's order
_FROM_STATUS = {Status.ERROR: "error", Status.TIMED_OUT: "timed out", Status.UNAVAILABLE: "unavailable"}
Values = list[tuple[str, str]]  # (check, value) in the probe's order


@dataclass(frozen=True)
class Row:
    check: str
    verdict: str  # one of VERDICTS
    value: str
    probe: str
    findings: tuple[Finding, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"check": self.check, "verdict": self.verdict, "value": self.value, "probe": self.probe,
                "codes": [f.code for f in self.findings]}


@cache
def _table() -> dict[str, Any]:
    with open(data_path("check_rows.json"), encoding="utf-8") as f:
        return json.load(f)


def rows(results: list[ProbeResult]) -> list[Row]:
    """One row per check, problems first (then errors, notes, ok, unavailable), each group in probe order."""
    evidence = {r.probe: r.evidence for r in results if r.status in (Status.OK, Status.PROBLEM)}
    out: list[Row] = []
    for result in results:
        out.extend(_probe_rows(result, evidence))
    return sorted(out, key=lambda row: VERDICTS.index(row.verdict))  # stable: probe order within a verdict


def _probe_rows(result: ProbeResult, evidence: Mapping[str, Mapping[str, Any]]) -> list[Row]:
    label = _table()["labels"].get(result.probe, result.probe)
    if result.status in _FROM_STATUS:
        return [Row(label, _FROM_STATUS[result.status], result.summary, result.probe)]
    values: Values = []
    extract = EXTRACTORS.get(result.probe)
    if extract is not None:
        try:
            values = extract(result.evidence, evidence)
        except (KeyError, TypeError, ValueError, AttributeError, IndexError):  # a bundle's odd evidence: summary only
            values = []
    values = values or [(label, result.summary)]
    owner = _table()["rows_by_code"]
    checks = [check for check, _ in values]
    attached: dict[str, list[Finding]] = {check: [] for check in checks}
    for finding in result.findings:
        check = owner.get(finding.code)
        if check not in attached:  # a row the evidence did not give (e.g. no device): shown as its own row
            if check is None:
                check = checks[0]
            else:
                values.append((check, ""))
                attached[check] = []
        attached[check].append(finding)
    return [_row(check, value, result.probe, tuple(attached[check])) for check, value in values]


def _row(check: str, value: str, probe: str, findings: tuple[Finding, ...]) -> Row:
    problems = [f.summary for f in findings if f.severity == "problem"]
    notes = [f.summary for f in findings if f.severity == "info"]
    if problems:
        return Row(check, "problem", "; ".join(problems), probe, findings)
    if notes:  # the note says more than the plain value (NCCL_DEBUG is not set, ops that cannot build)
        return Row(check, "note", "; ".join(notes), probe, findings)
    return Row(check, "ok", value or "ok", probe, findings)


def summary_line(table: list[Row]) -> str:
    """"2 problems, 1 note, 9 ok, 3 unavailable": every verdict present, in the table's order."""
    counts = {v: sum(1 for r in table if r.verdict == v) for v in VERDICTS}
    words = {"problem": ("problem", "problems"), "error": ("error", "errors"), "note": ("note", "notes")}
    parts = []
    for verdict, n in counts.items():
        if n:
            singular, plural = words.get(verdict, (verdict, verdict))
            parts.append(f"{n} {singular if n == 1 else plural}")
    return ", ".join(parts) or "no checks ran"


# -- each probe's rows, from its evidence ------------------------------------------------------------------

def _gib(n: Any) -> str:
    n = int(n)
    return f"{n / 2**30:.1f} GiB" if n >= 2**30 else f"{n / 2**20:.0f} MiB"


def _gpus(ev: Mapping[str, Any], _: Any) -> Values:
    gpus = list(ev.get("gpus") or [])
    kinds: dict[str, int] = {}
    for g in gpus:
        key = f"{g['name']} (sm_{str(g.get('capability', '?')).replace('.', '')})"
        kinds[key] = kinds.get(key, 0) + 1
    shown = ", ".join(f"{n} × {k}" for k, n in kinds.items()) or "none"
    if gpus:
        busiest = max(gpus, key=lambda g: int(g.get("memory_used_mib") or 0))
        shown += (f"; GPU {busiest.get('index', 0)} memory {busiest.get('memory_used_mib')}/"
                  f"{busiest.get('memory_total_mib')} MiB used")
    driver = str(ev.get("driver_version") or "?")
    if ev.get("cuda_driver_version"):
        driver += f" (supports CUDA up to {ev['cuda_driver_version']})"
    return [("GPUs", shown), ("NVIDIA driver", driver)]


def _cudnn_text(value: Any) -> str | None:
    if not isinstance(value, int) or value <= 0:
        return None
    if value >= 90000:  # cuDNN 9: major*10000 + minor*100 + patch
        return f"{value // 10000}.{value % 10000 // 100}.{value % 100}"
    return f"{value // 1000}.{value % 1000 // 100}.{value % 100}"  # cuDNN 8: major*1000 + minor*100 + patch


def _torch(ev: Mapping[str, Any], every: Mapping[str, Mapping[str, Any]]) -> Values:
    report = ev.get("report") or {}
    where = ev.get("python") or report.get("executable")
    if "torch_error" in report:
        return [("torch", f"not importable in {where}")]
    cuda = report.get("torch_cuda")
    devices = report.get("devices") or []
    torch = f"{report.get('torch')}, " + (f"CUDA {cuda}" if cuda else "CPU-only build")
    torch += f", {len(devices)} GPU(s) visible to torch ({where})"
    values: Values = [("torch", torch)]
    archs = list(report.get("arch_list") or [])
    if devices:
        caps = sorted({f"sm_{d['capability'][0]}{d['capability'][1]}" for d in devices})
        values.append(("GPU arch support", f"{', '.join(caps)} in arch list {' '.join(archs) or '(empty)'}"))
    driver_cuda = report.get("driver_cuda")
    if cuda and isinstance(driver_cuda, int) and driver_cuda > 0:
        have = f"{driver_cuda // 1000}.{driver_cuda % 1000 // 10}"
        values.append(("driver vs torch CUDA", f"driver supports CUDA {have}, torch needs {cuda}"))
    loaded = _cudnn_text(report.get("cudnn"))
    packages = (every.get("versions") or {}).get("packages") or {}
    wheels = ", ".join(f"{name} {v}" for name, v in packages.items() if name.startswith("nvidia-cudnn") and v)
    text = f"{loaded} (loaded by torch)" if loaded else "none loaded by torch" + ("" if cuda else " (CPU-only build)")
    values.append(("cuDNN", text + (f"; wheel {wheels}" if wheels else "")))
    return values


def _versions(ev: Mapping[str, Any], _: Any) -> Values:
    packages = ev.get("packages") or {}
    shown = ", ".join(f"{name} {v}" for name, v in packages.items()
                      if v and name != "torch" and not name.startswith("nvidia-"))
    values: Values = [("Python", f"{ev.get('python')} ({ev.get('python_path') or ev.get('executable')})"),
                      ("Python packages", shown or "none of the training stack besides torch")]
    wheels = ", ".join(f"{name} {v}" for name, v in packages.items() if name.startswith("nvidia-nccl") and v)
    if ev.get("nccl") or wheels:
        values.append(("NCCL", f"{ev.get('nccl') or 'none'} (torch)" + (f"; wheel {wheels}" if wheels else "")))
    return values


def _ports(ev: Mapping[str, Any], _: Any) -> Values:
    ports = ev.get("ports") or {}
    text = ", ".join(f"{port} {'free' if entry.get('free', True) else 'in use'}" for port, entry in ports.items())
    values: Values = [("ports", text or "none checked")]
    master = ev.get("master_addr")
    if master:
        values.append(("MASTER_ADDR", f"{master.get('host')} " + ("does not resolve" if master.get("error") else
                       ", ".join(master.get("addresses") or []))))
    return values


def _env(ev: Mapping[str, Any], _: Any) -> Values:
    variables = ev.get("variables") or {}
    shown = ", ".join(f"{k}={v}" for k, v in variables.items()) or "no NCCL/CUDA/torch variables set"
    return [("environment", f"{shown}; interfaces {', '.join(ev.get('interfaces') or []) or 'none'}")]


def _processes(ev: Mapping[str, Any], _: Any) -> Values:
    jobs = ev.get("jobs") or []
    text = f"{len(jobs)} job(s)" if jobs else "none running"
    return [("training processes", f"{text} ({ev.get('scanned', '?')} processes scanned)")]


def _log(ev: Mapping[str, Any], _: Any) -> Values:
    files = ev.get("files") or []
    groups = sum(len(f.get("groups") or []) for f in files)
    return [("log scan", f"{len(files)} file(s), {groups} known error signature(s)")]


def _disk(ev: Mapping[str, Any], _: Any) -> Values:
    values: Values = []
    memory = ev.get("memory") or {}
    if "available_bytes" in memory or "shm_bytes" in ev:
        ram = (f"{_gib(memory['available_bytes'])} available of {_gib(memory['total_bytes'])}"
               if "available_bytes" in memory else "unknown")
        values.append(("RAM, /dev/shm", ram + (f"; /dev/shm {_gib(ev['shm_bytes'])}" if "shm_bytes" in ev else "")))
    disks = ev.get("disks") or {}
    text = "; ".join(f"{d}: {_gib(v['free_bytes'])} free of {_gib(v['total_bytes'])}" if "free_bytes" in v
                     else f"{d}: {v.get('error', '?')}" for d, v in disks.items())
    if text:
        values.append(("disk", text))
    return values


def _system(ev: Mapping[str, Any], every: Mapping[str, Mapping[str, Any]]) -> Values:
    values: Values = [("OS", f"{ev.get('os') or 'unknown'}, kernel {ev.get('kernel')}, {ev.get('arch')}"),
                      ("glibc", str(ev.get("glibc") or "unknown (not glibc)"))]
    module, library = ev.get("nvidia_module"), (every.get("gpu_inventory") or {}).get("driver_version")
    if module and module != library:  # the same as NVML's driver row says nothing new; a different one does
        values.append(("NVIDIA kernel module", str(module) + (f" (NVML's library is {library})" if library else "")))
    return values


def _toolkit(ev: Mapping[str, Any], _: Any) -> Values:
    if ev.get("release"):
        text = f"{ev['release']}, {ev.get('nvcc')} (CUDA_HOME {ev.get('cuda_home')}, from {ev.get('found_by')})"
    else:
        text = f"no nvcc: {ev.get('error') or ev.get('found_by')}"
    return [("CUDA toolkit (nvcc)", text)]


def _compiler(ev: Mapping[str, Any], _: Any) -> Values:
    from tools.compiler import summary

    return [("C/C++ compiler", summary(dict(ev)))]


def _deepspeed(ev: Mapping[str, Any], _: Any) -> Values:
    from tools.deepspeed_ops import cuda_match

    ops = list(ev.get("ops") or [])
    built = [op for op, v in (ev.get("installed_ops") or {}).items() if v]
    compatible = ev.get("compatible") or {}
    not_ok = sorted(op for op, c in compatible.items() if not c.get("ok") and op not in built)
    jit = (f"ninja {'found' if ev.get('ninja') else 'missing'}; {cuda_match(dict(ev))[1]}")
    listed = f"{len(built)} of {len(ops)} prebuilt" + (f" ({', '.join(built)})" if 0 < len(built) <= 4 else "")
    listed += f", {len(ops) - len(built) - len(not_ok)} more JIT-compatible"
    return [("DeepSpeed", f"{ev.get('version')} ({ev.get('path')})"), ("DeepSpeed JIT", jit), ("DeepSpeed ops", listed)]


EXTRACTORS: dict[str, Callable[[Mapping[str, Any], Mapping[str, Mapping[str, Any]]], Values]] = {
    "gpu_inventory": _gpus,
    "torch_cuda_compat": _torch,
    "versions": _versions,
    "port_check": _ports,
    "env_vars": _env,
    "processes": _processes,
    "log_grep": _log,
    "disk_and_memory": _disk,
    "system_info": _system,
    "cuda_toolkit": _toolkit,
    "compiler": _compiler,
    "deepspeed_ops": _deepspeed,
}
