"""Is the rendezvous port (MASTER_PORT) free here, who holds it, and is MASTER_ADDR reachable?"""

from __future__ import annotations

import errno
import os
import shutil
import socket
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tools.base import Clock, Finding, ProbeContext, ProbeResult, RunCommand, finish, run_command

NAME = "port_check"
DEFAULT_PORT = 29500
_LISTEN, _TIME_WAIT = "0A", "06"
Resolver = Callable[[str, int, float], list[str]]
Connector = Callable[[str, int, float], str]  # "" when connected, else the error text
TOPICS = ("address already in use", "master_port", "rendezvous", "torchrun")


def available(ctx: ProbeContext) -> tuple[bool, str]:
    return True, ""


def ports_to_check(ctx: ProbeContext) -> tuple[int, ...]:
    if ctx.ports:
        return ctx.ports
    if ctx.environ.get("MASTER_PORT", "").strip().isdigit():
        return (int(ctx.environ["MASTER_PORT"]),)
    return (DEFAULT_PORT,)


def bind_error(host: str, port: int) -> str:
    """Tries to bind like a fresh TCPStore would, without SO_REUSEADDR; "" when the port is free."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.bind((host, port))
    except OSError as exc:
        return f"{errno.errorcode.get(exc.errno or 0, exc.errno)}: {exc.strerror}"
    finally:
        sock.close()
    return ""


def socket_states(port: int, proc_root: Path = Path("/proc")) -> dict[str, set[str]]:
    """State (hex, e.g. "0A" LISTEN) -> socket inodes bound locally to ``port``, from /proc/net/tcp{,6}."""
    states: dict[str, set[str]] = {}
    for table in ("tcp", "tcp6"):
        try:
            lines = (proc_root / "net" / table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 9 and int(fields[1].rsplit(":", 1)[1], 16) == port:
                states.setdefault(fields[3], set()).add(fields[9])
    return states


def socket_owners(inodes: set[str], proc_root: Path = Path("/proc")) -> list[dict[str, Any]]:
    """Processes with an fd on one of ``inodes`` (only those we may inspect: others need root)."""
    targets = {f"socket:[{inode}]" for inode in inodes}
    owners = []
    for pid_dir in proc_root.iterdir():
        if not pid_dir.name.isdigit():
            continue
        try:
            links = {os.readlink(fd) for fd in (pid_dir / "fd").iterdir()}
        except OSError:
            continue
        if links & targets:
            owners.append({"pid": int(pid_dir.name), "cmdline": _cmdline(pid_dir)})
    return owners


def ss_owners(port: int, ctx: ProbeContext, run: RunCommand, timeout_s: float) -> list[dict[str, Any]]:
    ss = shutil.which("ss", path=ctx.environ.get("PATH"))
    if not ss:
        return []
    result = run([ss, "-H", "-ltnp", f"sport = :{port}"], timeout_s, None)
    owners = []
    for part in result.stdout.split("pid=")[1:]:
        pid = part.split(",", 1)[0]
        if pid.isdigit():
            owners.append({"pid": int(pid), "cmdline": _cmdline(Path("/proc") / pid)})
    return owners


def resolve(host: str, port: int, timeout_s: float) -> list[str]:
    """getaddrinfo bounded by a timeout (it has none of its own); raises OSError/TimeoutError."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["infos"] = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError as exc:
            box["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        raise TimeoutError(f"getaddrinfo({host!r}, {port}) did not answer within {timeout_s:.1f}s")
    if "error" in box:
        raise box["error"]
    return sorted({info[4][0] for info in box["infos"]})


def connect(address: str, port: int, timeout_s: float) -> str:
    try:
        with socket.create_connection((address, port), timeout=timeout_s):
            return ""
    except OSError as exc:
        return f"{type(exc).__name__}: {exc}"


def probe(
    ctx: ProbeContext,
    proc_root: Path = Path("/proc"),
    run: RunCommand = run_command,
    resolver: Resolver = resolve,
    connector: Connector = connect,
) -> ProbeResult:
    """Check whether MASTER_PORT (default 29500) is free on this machine, which process holds it, and whether MASTER_ADDR resolves and accepts connections."""  # noqa: E501 - the LLM-facing description is one line
    clock = Clock(ctx.timeout_s)
    findings: list[Finding] = []
    ports: dict[str, Any] = {}
    for port in ports_to_check(ctx):
        errors = {host: bind_error(host, port) for host in ("0.0.0.0", "127.0.0.1")}
        entry: dict[str, Any] = {"bind_errors": {h: e for h, e in errors.items() if e},
                                 "free": not any(errors.values())}
        ports[str(port)] = entry
        if entry["free"]:
            continue
        states = socket_states(port, proc_root)
        listening = states.get(_LISTEN, set())
        owners = socket_owners(listening, proc_root) if listening else []
        if listening and not owners:
            owners = ss_owners(port, ctx, run, clock.left())
        entry["owners"] = owners
        if listening or not states:
            findings.append(_in_use(port, owners, entry["bind_errors"]))
        elif _TIME_WAIT in states:
            findings.append(Finding("PORT_TIME_WAIT", "info", f"port {port} has connections in TIME_WAIT",
                                    f"bind: {entry['bind_errors']}; no listener",
                                    "torchrun's store sets SO_REUSEADDR, so this usually clears itself; wait ~60 s "
                                    "or choose another MASTER_PORT if launch fails.", TOPICS))
    evidence: dict[str, Any] = {"ports": ports}
    findings.extend(_master_addr(ctx, ports_to_check(ctx)[0], clock, resolver, connector, evidence))
    free = [p for p, e in ports.items() if e["free"]]
    return finish(NAME, clock, findings, evidence, f"port(s) {', '.join(free)} free here")


def _in_use(port: int, owners: list[dict[str, Any]], errors: dict[str, str]) -> Finding:
    who = "; ".join(f"pid {o['pid']}: {o['cmdline']}" for o in owners)
    who = who or "owner not visible (another user or container)"
    short = "; ".join(f"pid {o['pid']} {o['cmdline'][:60]}" for o in owners) or "owner not visible"
    pids = " ".join(str(o["pid"]) for o in owners) or "<pid>"
    return Finding(
        "PORT_IN_USE", "problem", f"port {port} is already in use ({short})",
        f"bind({port}): {errors}; held by {who}",
        f"Pick another port (`--master_port {port + 1}` or `export MASTER_PORT={port + 1}`). If the holder is a "
        f"leftover of your own earlier run, not a job still running, stop that one process by its PID: `kill -TERM {pids}`.",
        TOPICS,
    )


def _master_addr(
    ctx: ProbeContext, port: int, clock: Clock, resolver: Resolver, connector: Connector, evidence: dict[str, Any]
) -> list[Finding]:
    host = ctx.environ.get("MASTER_ADDR", "").strip()
    if not host:
        return []
    topics = ("master_addr", "rendezvous", "nccl hang", "firewall")
    try:
        addresses = resolver(host, port, min(clock.left(), 5.0))
    except (OSError, TimeoutError) as exc:
        evidence["master_addr"] = {"host": host, "error": str(exc)}
        return [Finding("MASTER_ADDR_UNRESOLVABLE", "problem", f"MASTER_ADDR {host!r} does not resolve",
                        f"getaddrinfo({host!r}, {port}): {exc}",
                        "Set MASTER_ADDR to the rank-0 node's IP address or a name in /etc/hosts on every node.",
                        topics)]
    error = connector(addresses[0], port, min(clock.left(), 3.0))
    evidence["master_addr"] = {"host": host, "addresses": addresses, "port": port, "connect_error": error}
    if not error:
        return []
    if "refused" in error.lower():
        return [Finding("MASTER_NOT_LISTENING", "info", f"nothing listens on {host}:{port} yet",
                        f"connect({addresses[0]}, {port}): {error}",
                        "Normal before rank 0 starts; if rank 0 is running, it is on another port or address.",
                        topics)]
    return [Finding("MASTER_ADDR_UNREACHABLE", "problem", f"cannot reach MASTER_ADDR {host}:{port}",
                    f"connect({addresses[0]}, {port}): {error}",
                    f"Check the route and firewall between nodes (`nc -zv {host} {port}`) and that rank 0 "
                    "uses this address.", topics)]


def _cmdline(pid_dir: Path) -> str:
    from tools.redact import mask_text

    try:
        raw = (pid_dir / "cmdline").read_bytes()
    except OSError:
        return "?"
    return " ".join(mask_text(raw.replace(b"\0", b" ").decode("utf-8", errors="replace")).split())[:300]
