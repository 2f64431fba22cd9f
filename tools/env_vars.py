"""Distributed-training environment variables (NCCL_*, CUDA_*, MASTER_*, WORLD_SIZE...) and their usual mistakes."""

from __future__ import annotations

import re
import socket
from collections.abc import Callable, Mapping
from pathlib import Path

from tools import gpu_inventory
from tools.base import Clock, Finding, ProbeContext, ProbeResult, finish
from tools.redact import mask_value

NAME = "env_vars"
_RELEVANT = re.compile(
    r"^(NCCL_|CUDA_|TORCH_|MASTER_|DS_|GLOO_|TORCHELASTIC_|PET_|OMP_NUM_THREADS$|PYTORCH_CUDA_ALLOC_CONF$"
    r"|WORLD_SIZE$|RANK$|LOCAL_RANK$|LOCAL_WORLD_SIZE$|GROUP_RANK$|NODE_RANK$|NNODES$|SLURM_(NNODES|JOB_NUM_NODES|PROCID)$)"
)
_MULTI_NODE_COUNT = ("NNODES", "PET_NNODES", "SLURM_NNODES", "SLURM_JOB_NUM_NODES")
_LOCAL_HOSTS = {"", "localhost", "127.0.0.1", "::1", "0.0.0.0"}
GpuCount = Callable[[ProbeContext], "int | None"]
Interfaces = Callable[[], list[str]]


def available(ctx: ProbeContext) -> tuple[bool, str]:
    return True, ""


def list_interfaces() -> list[str]:
    try:
        return sorted(name for _, name in socket.if_nameindex())
    except OSError:
        net = Path("/sys/class/net")
        return sorted(p.name for p in net.iterdir()) if net.is_dir() else []


def ifname_matches(spec: str, interfaces: list[str]) -> list[str]:
    """The interfaces NCCL would use for NCCL_SOCKET_IFNAME=``spec``: comma-separated prefixes, ``=`` for an
    exact name, a leading ``^`` to exclude instead of include."""
    exclude = spec.startswith("^")
    entries = [e.strip() for e in spec.lstrip("^").split(",") if e.strip()]

    def hit(name: str) -> bool:
        return any(name == e[1:] if e.startswith("=") else name.startswith(e) for e in entries)

    return [name for name in interfaces if hit(name) != exclude]


def probe(
    ctx: ProbeContext,
    gpu_count: GpuCount = gpu_inventory.gpu_count,
    interfaces: Interfaces = list_interfaces,
) -> ProbeResult:
    """Show the NCCL_*/CUDA_*/TORCH_*/MASTER_*/WORLD_SIZE/RANK variables (secrets masked) and flag wrong interface names, WORLD_SIZE above the GPU count, bad CUDA_VISIBLE_DEVICES."""  # noqa: E501 - the LLM-facing description is one line
    clock = Clock(ctx.timeout_s)
    env = ctx.environ
    variables = {k: mask_value(v, k) for k, v in sorted(env.items()) if _RELEVANT.match(k)}
    nics = interfaces()
    count = gpu_count(ctx)
    findings = [
        *_ifname(env, nics),
        *_world_size(env, count),
        *_visible_devices(env, count),
        *_nccl_switches(env),
    ]
    evidence = {"variables": variables, "interfaces": nics, "gpu_count": count}
    summary = f"{len(variables)} relevant variable(s); interfaces {', '.join(nics)}"
    return finish(NAME, clock, findings, evidence, summary)


def _ifname(env: Mapping[str, str], nics: list[str]) -> list[Finding]:
    found = []
    for var in ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME"):
        spec = env.get(var, "").strip()
        if spec and nics and not ifname_matches(spec, nics):
            found.append(Finding(
                "NCCL_IFNAME_MISSING", "problem", f"{var}={spec} matches no network interface on this node",
                f"{var}={spec}; interfaces here: {', '.join(nics)}",
                f"Set {var} to an interface that exists on every node (see `ip -br addr`), e.g. "
                f"`export {var}={_guess_nic(nics)}`, or unset it to let NCCL choose.",
                ("nccl_socket_ifname", "network interface", "nccl hang", "bootstrap")))
    return found


def _guess_nic(nics: list[str]) -> str:
    real = [n for n in nics if not n.startswith(("lo", "docker", "veth", "virbr", "br-"))]
    return real[0] if real else nics[0]


def _world_size(env: Mapping[str, str], count: int | None) -> list[Finding]:
    world = _int(env.get("WORLD_SIZE"))
    if world is None or count is None or world <= count:
        return []
    multi = [k for k in _MULTI_NODE_COUNT if (_int(env.get(k)) or 0) > 1]
    multi += [k for k in ("NODE_RANK", "GROUP_RANK") if (_int(env.get(k)) or 0) > 0]
    if env.get("MASTER_ADDR", "").strip().lower() not in _LOCAL_HOSTS:
        multi.append("MASTER_ADDR")
    local = _int(env.get("LOCAL_WORLD_SIZE"))
    if local is not None and local < world:
        multi.append("LOCAL_WORLD_SIZE")
    if multi:
        return []
    return [Finding(
        "WORLD_SIZE_EXCEEDS_GPUS", "problem", f"WORLD_SIZE={world} but this single node has {count} GPU(s)",
        f"WORLD_SIZE={world}; GPUs visible: {count}; no multi-node variables (NNODES, NODE_RANK, remote MASTER_ADDR)",
        f"Launch with `torchrun --nproc_per_node={count}` (or set WORLD_SIZE={count}); ranks beyond the GPU count "
        "wait forever for peers or share a GPU.",
        ("world_size", "nproc_per_node", "nccl hang", "rendezvous"))]


def _visible_devices(env: Mapping[str, str], count: int | None) -> list[Finding]:
    if "CUDA_VISIBLE_DEVICES" not in env:
        return []
    value = env["CUDA_VISIBLE_DEVICES"].strip()
    topics = ("cuda_visible_devices", "no cuda gpus are available", "device ordinal")
    if value in ("", "-1", "none", "NoDevFiles"):
        return [Finding("CUDA_VISIBLE_DEVICES_EMPTY", "problem", f"CUDA_VISIBLE_DEVICES={value!r} hides every GPU",
                        f"CUDA_VISIBLE_DEVICES={value!r}", "Unset it or list the GPU indices to use, e.g. `0,1`.",
                        topics)]
    entries = [e.strip() for e in value.split(",")]
    if count is None:
        return []
    bad = [e for e in entries if e.isdigit() and int(e) >= count]
    if not bad:
        return []
    return [Finding(
        "CUDA_VISIBLE_DEVICES_INVALID", "problem",
        f"CUDA_VISIBLE_DEVICES names GPU {', '.join(bad)} but only indices 0-{count - 1} exist",
        f"CUDA_VISIBLE_DEVICES={value}; GPUs present: {count}",
        "CUDA stops at the first invalid index, so later GPUs vanish too; list only existing indices "
        f"(0..{count - 1}) or use GPU UUIDs from `nvidia-smi -L`.", topics)]


def _nccl_switches(env: Mapping[str, str]) -> list[Finding]:
    found = []
    if env.get("NCCL_P2P_DISABLE", "0").strip() not in ("", "0"):
        found.append(Finding("NCCL_P2P_DISABLED", "info", "NCCL_P2P_DISABLE is set: GPU peer-to-peer is off",
                             f"NCCL_P2P_DISABLE={env['NCCL_P2P_DISABLE']}",
                             "Intra-node traffic goes through host memory (slower). Keep it only if P2P hangs "
                             "(e.g. some consumer GPUs/IOMMU setups); otherwise unset it.",
                             ("nccl_p2p_disable", "p2p", "nvlink")))
    if env.get("NCCL_IB_DISABLE", "0").strip() not in ("", "0"):
        found.append(Finding("NCCL_IB_DISABLED", "info", "NCCL_IB_DISABLE is set: InfiniBand/RoCE is off",
                             f"NCCL_IB_DISABLE={env['NCCL_IB_DISABLE']}",
                             "Inter-node traffic falls back to TCP sockets (much slower); unset it on IB clusters.",
                             ("nccl_ib_disable", "infiniband", "rdma")))
    if not env.get("NCCL_DEBUG"):
        found.append(Finding("NCCL_DEBUG_UNSET", "info", "NCCL_DEBUG is not set",
                             "NCCL_DEBUG unset", "When diagnosing a hang, rerun with `NCCL_DEBUG=INFO "
                             "TORCH_NCCL_ASYNC_ERROR_HANDLING=1` (or TORCH_DISTRIBUTED_DEBUG=DETAIL) "
                             "to see where it stops.",
                             ("nccl_debug", "nccl hang", "debugging")))
    return found


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None
