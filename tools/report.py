"""Rendering probe results, bundling them to JSON for another machine, and comparing bundles across nodes."""

from __future__ import annotations

import json
import socket
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tools.base import Finding, ProbeContext, ProbeResult, Severity
from tools.bundle import BUNDLE_VERSION, BundleError, read_bundle
from tools.env_vars import ifname_matches
from tools.redact import mask_json
from tools.verdicts import rejudge

__all__ = ["BUNDLE_VERSION", "BundleError", "bundle", "compare_bundles", "load_bundle", "read_node", "render_report"]


def evidence_lines(evidence: Any, prefix: str = "", limit: int = 40) -> list[str]:
    """A probe's raw facts as `key: value` lines, nested keys joined with dots (like collect_env)."""
    lines: list[str] = []

    def walk(value: Any, key: str) -> None:
        if len(lines) >= limit:
            return
        if isinstance(value, dict) and value:
            for name, item in value.items():
                walk(item, f"{key}.{name}" if key else str(name))
        elif isinstance(value, list) and value and any(isinstance(v, dict | list) for v in value):
            for index, item in enumerate(value):
                walk(item, f"{key}[{index}]")
        elif key and value is not None and value != "":  # an empty fact is no line (packages.vllm: None)
            lines.append(f"{key}: {_value(key, value)}")

    walk(evidence, prefix)
    return lines[:limit]


def _value(key: str, value: Any) -> str:
    if isinstance(value, int | float) and not isinstance(value, bool) and key.endswith("bytes"):
        return f"{value / 2**30:.1f} GiB" if value >= 2**30 else f"{value / 2**20:.1f} MiB"
    if isinstance(value, list):
        return ", ".join(map(str, value)) or "(none)"
    if isinstance(value, dict):
        return "(none)"
    return _shorten(str(value), 160)


def render_report(results: list[ProbeResult]) -> str:
    """Every probe as readable lines: its verdict and summary, its findings (with the fix), then its
    evidence as `key: value` lines. Plain text: log lines like "[rank3]:" must print verbatim."""
    width = max((len(r.probe) for r in results), default=10) + 2
    out: list[str] = []
    for result in results:
        status = result.status.value
        out.append(f"{result.probe:<{width}}{status.upper() if status == 'problem' else status:<12}{result.summary}")
        for finding in result.findings:
            out.append(f"    {finding.severity}: {finding.code}: {finding.summary}")
            if finding.evidence:
                out.append(f"        evidence: {_shorten(finding.evidence, 300)}")
            if finding.fix:
                out.append(f"        fix: {finding.fix}")
        out.extend(f"    {line}" for line in evidence_lines(result.evidence))
        out.append("")
    return "\n".join(out).rstrip()


def bundle(results: list[ProbeResult], ctx: ProbeContext | None = None) -> dict[str, Any]:
    data = {
        "traindoc_bundle": BUNDLE_VERSION,
        "host": socket.gethostname(),
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "timeout_s": ctx.timeout_s if ctx else None,
        "results": [r.to_dict() for r in results],
    }
    return mask_json(data)


def bundle_cap() -> int:
    """TRAINDOC_MAX_BUNDLE_MB, in bytes (read where no caller passed the cap)."""
    from common.settings import Settings

    return int(Settings.from_env().max_bundle_mb * 2**20)


def read_node(path: str | Path, max_bytes: int | None = None) -> tuple[str | None, list[ProbeResult]]:
    """(the host the bundle says it is from, its results re-judged by traindoc's rules), reading ``path`` once:
    it may be a pipe (``--bundle <(ssh node3 traindoc probe --json)``)."""
    data = read_bundle(path, max_bytes or bundle_cap())
    data = mask_json(data)  # a hand-edited or older bundle may carry secrets: mask on read too
    source = Path(str(path)).name
    try:
        results = [rejudge(ProbeResult.from_dict(r), source) for r in data["results"]]
    except (KeyError, TypeError, ValueError) as exc:  # the schema checked the shape: a bug if this is reached
        raise BundleError(f"{path}: malformed result in bundle ({type(exc).__name__}: {exc})") from exc
    host = data.get("host")
    return (str(host) if host else None), results


def load_bundle(path: str | Path, max_bytes: int | None = None) -> list[ProbeResult]:
    """A bundle's results: bounded read, schema, secrets masked, verdicts recomputed (``tools.verdicts``)."""
    return read_node(path, max_bytes)[1]


def node_facts(results: list[ProbeResult]) -> dict[str, Any]:
    """The facts that must agree across nodes of one job, pulled from each probe's evidence."""
    ev = {r.probe: r.evidence for r in results}
    compat = ev.get("torch_cuda_compat", {}).get("report", {})
    vers = ev.get("versions", {})
    gpu = ev.get("gpu_inventory", {})
    env = ev.get("env_vars", {})
    variables = env.get("variables", {})
    return {
        "python": vers.get("python") or compat.get("python"),
        "torch": (vers.get("packages") or {}).get("torch") or compat.get("torch"),
        "torch CUDA": vers.get("torch_cuda") or compat.get("torch_cuda"),
        "NCCL": vers.get("nccl") or compat.get("nccl"),
        "driver": gpu.get("driver_version") or ev.get("torch_cuda_compat", {}).get("driver_version"),
        "GPU models": ", ".join(sorted({g["name"] for g in gpu.get("gpus", [])})) or None,
        "NCCL variables": {k: v for k, v in variables.items() if k.startswith("NCCL_")} if env else None,
        "_interfaces": env.get("interfaces"),
        "_ifname": variables.get("NCCL_SOCKET_IFNAME"),
    }


def compare_bundles(bundles: Mapping[str, list[ProbeResult]]) -> list[Finding]:
    """Differences between nodes that break multi-node jobs (versions, GPUs, NCCL settings, interfaces)."""
    facts = {node: node_facts(results) for node, results in bundles.items()}
    findings = []
    for key in ("torch", "torch CUDA", "NCCL", "driver", "python", "GPU models", "NCCL variables"):
        values = {node: f[key] for node, f in facts.items() if f[key] is not None}
        if len({json.dumps(v, sort_keys=True) for v in values.values()}) > 1:
            code = "NODES_DIFFER_" + key.upper().replace(" ", "_")
            shown = "; ".join(f"{node}: {_fmt(v)}" for node, v in values.items())
            severity: Severity = "info" if key in ("driver", "GPU models") else "problem"
            findings.append(Finding(code, severity, f"{key} differs across nodes", shown,
                                    f"Make {key} identical on every node (same image / environment).",
                                    ("multi-node", "version mismatch", key.lower(), "nccl hang")))
    for node, f in facts.items():
        if f["_ifname"] and f["_interfaces"] and not ifname_matches(f["_ifname"], f["_interfaces"]):
            findings.append(Finding(
                "NODE_IFNAME_MISSING", "problem", f"NCCL_SOCKET_IFNAME={f['_ifname']} matches no interface on {node}",
                f"{node}: interfaces {', '.join(f['_interfaces'])}",
                "Interface names often differ between nodes (eth0 vs ens5); use a prefix list that matches on "
                "every node, e.g. NCCL_SOCKET_IFNAME=eth,ens, or exclude instead: NCCL_SOCKET_IFNAME=^lo,docker.",
                ("nccl_socket_ifname", "network interface", "multi-node", "nccl hang")))
    return findings


def _fmt(value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k}={v}" for k, v in sorted(value.items())) or "(none)"
    return str(value)


def _shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
