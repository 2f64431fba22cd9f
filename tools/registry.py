"""The one table of probes, running them concurrently with a deadline, and picking probes for a question."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from functools import cache

from tools import (
    compiler,
    cuda_toolkit,
    deepspeed_ops,
    disk_and_memory,
    env_vars,
    gpu_inventory,
    log_grep,
    port_check,
    processes,
    system_info,
    torch_cuda_compat,
    versions,
)
from tools.base import ProbeContext, ProbeResult, Status, data_path
from tools.redact import masked

ProbeFn = Callable[[ProbeContext], ProbeResult]
AvailableFn = Callable[[ProbeContext], tuple[bool, str]]


@dataclass(frozen=True)
class ProbeSpec:
    name: str
    run: ProbeFn
    available: AvailableFn

    @property
    def description(self) -> str:
        """The first docstring line: what the LLM sees."""
        return (self.run.__doc__ or "").strip().splitlines()[0]


def build_table(*rows: tuple[str, ProbeFn, AvailableFn]) -> dict[str, ProbeSpec]:
    table: dict[str, ProbeSpec] = {}
    for name, run, available in rows:
        if name in table:
            raise ValueError(f"duplicate probe name in registry: {name!r}")
        table[name] = ProbeSpec(name, run, available)
    return table


PROBES: dict[str, ProbeSpec] = build_table(
    # name                 probe function              availability check
    ("gpu_inventory",      gpu_inventory.probe,        gpu_inventory.available),
    ("torch_cuda_compat",  torch_cuda_compat.probe,    torch_cuda_compat.available),
    ("port_check",         port_check.probe,           port_check.available),
    ("env_vars",           env_vars.probe,             env_vars.available),
    ("processes",          processes.probe,            processes.available),
    ("log_grep",           log_grep.probe,             log_grep.available),
    ("disk_and_memory",    disk_and_memory.probe,      disk_and_memory.available),
    ("versions",           versions.probe,             versions.available),
    ("system_info",        system_info.probe,          system_info.available),
    ("cuda_toolkit",       cuda_toolkit.probe,         cuda_toolkit.available),
    ("compiler",           compiler.probe,             compiler.available),
    ("deepspeed_ops",      deepspeed_ops.probe,        deepspeed_ops.available),
)  # fmt: skip


def run_probes(
    names: Iterable[str] | None,
    ctx: ProbeContext,
    max_workers: int = 8,
    table: dict[str, ProbeSpec] | None = None,
) -> list[ProbeResult]:
    """Runs the named probes (all when None) concurrently; results come back in table order. A probe still
    running at ctx.timeout_s is reported timed_out (its own subprocesses have the same deadline and die)."""
    table = table if table is not None else PROBES
    wanted = set(names) if names is not None else set(table)
    unknown = wanted - set(table)
    specs = [spec for name, spec in table.items() if name in wanted]
    results: dict[str, ProbeResult] = {
        name: ProbeResult(name, Status.ERROR, f"unknown probe {name!r}; known: {', '.join(table)}") for name in unknown
    }
    pool = ThreadPoolExecutor(max_workers=max(1, max_workers), thread_name_prefix="probe")
    try:
        futures: dict[str, Future[ProbeResult]] = {s.name: pool.submit(_run_one, s, ctx) for s in specs}
        deadline = time.monotonic() + ctx.timeout_s + 1.0  # probes stop their own work at timeout_s
        for name, future in futures.items():
            try:
                results[name] = future.result(timeout=max(0.0, deadline - time.monotonic()))
            except TimeoutError:
                results[name] = ProbeResult(name, Status.TIMED_OUT, f"did not finish within {ctx.timeout_s:.1f}s",
                                            duration_ms=ctx.timeout_s * 1000)
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    order = [s.name for s in specs] + sorted(unknown)
    return [results[name] for name in order]


def _run_one(spec: ProbeSpec, ctx: ProbeContext) -> ProbeResult:
    start = time.monotonic()
    try:
        ok, reason = spec.available(ctx)
        if not ok:
            return ProbeResult(spec.name, Status.UNAVAILABLE, reason, duration_ms=_ms(start))
        return masked(spec.run(ctx))
    except Exception as exc:  # a probe bug must not take down the sweep
        return masked(ProbeResult(spec.name, Status.ERROR, f"{spec.name} crashed: {type(exc).__name__}: {exc}",
                                  evidence={"exception": repr(exc)}, duration_ms=_ms(start)))


def _ms(start: float) -> float:
    return round((time.monotonic() - start) * 1000, 1)


@cache
def _rules() -> tuple[tuple[tuple[str, ...], tuple[re.Pattern[str], ...], tuple[str, ...]], ...]:
    with open(data_path("probe_rules.json"), encoding="utf-8") as f:
        rules = json.load(f)["rules"]
    # Matched against the lower-cased text: a pattern that starts with a literal is then found by a fast scan
    # for it (IGNORECASE would try every position).
    return tuple((tuple(k.lower() for k in r["keywords"]), tuple(re.compile(x) for x in r["regex"]),
                  tuple(r["probes"])) for r in rules)


def select_probes(text: str, table: Sequence[str] | None = None) -> list[str]:
    """Probes relevant to a question or log excerpt, by the keyword rules in tools/data/probe_rules.json."""
    lowered = text.lower()
    picked: set[str] = set()
    for keywords, regexes, probes in _rules():
        if any(k in lowered for k in keywords) or any(r.search(lowered) for r in regexes):
            picked.update(probes)
    order = list(table) if table is not None else list(PROBES)
    return [name for name in order if name in picked]
