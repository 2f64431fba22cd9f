"""`traindoc check nccl|p2p`: the smallest test of whether the job's communication works here, with its settings.

``check nccl`` says what it will start, starts one short torchrun job over the visible GPUs (gloo over CPU
processes where there is none), prints each operation and size (completed, time, bus bandwidth), names the rank
that failed or hung and the failure kind that means, and stops every process it started (checks.run). With
``--nodes N`` or ``--print-commands`` it starts nothing and prints the commands. ``check p2p`` prints the GPUs'
peer-access matrix and what it implies. The words are the ``checks.*`` phrases (--lang, else the locale).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import sys
from typing import Any

from common.errors import InputError, UsageError
from common.language import Lang, say

SIZE = re.compile(r"^(\d+)([KMG]?)(?:i?B)?$", re.IGNORECASE)
SCALE = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30}
GPU_SIZES = "1K,1M,16M,128M"
CPU_SIZES = "1K,64K,1M"
MAX_SIZE = 2**31
MAX_SIZES = 12
MAX_NPROC = 64


def add_arguments(commands: Any) -> None:
    """The `check` subcommand and its options (traindoc_cli.main registers it)."""
    check = commands.add_parser("check", help="start a short torchrun job that tests the job's communication here "
                                "(nccl: collectives with the job's NCCL/gloo settings; p2p: GPU peer access); "
                                "the only command that starts processes, and it stops every one")
    check.add_argument("what", choices=("nccl", "p2p"), help="nccl: barrier, all_reduce, all_gather, broadcast over "
                       "sizes; p2p: the GPUs' peer-access matrix")
    check.add_argument("--nproc", type=int, metavar="N", help="processes (default: the visible GPUs, else 2 CPU processes)")
    check.add_argument("--backend", choices=("auto", "nccl", "gloo"), default="auto",
                       help="auto (default): nccl with GPUs, gloo over CPU processes otherwise")
    check.add_argument("--sizes", metavar="LIST", help=f"bytes per operation, K/M/G suffixes (default {GPU_SIZES} on "
                       f"GPUs, {CPU_SIZES} on CPU)")
    check.add_argument("--timeout", type=float, default=30.0, metavar="S", help="seconds each operation may take (default 30)")
    check.add_argument("--iters", type=int, default=5, metavar="N", help="timed repetitions per size (default 5)")
    check.add_argument("--log", type=_path, action="append", default=[], metavar="PATH",
                       help="use the NCCL_*/GLOO_*/TORCH_* variables the job's log printed (over the shell's)")
    check.add_argument("--bundle", type=_path, metavar="FILE.json",
                       help="use the variables of a `traindoc probe --json` bundle (over the shell's)")
    check.add_argument("--nodes", type=int, default=1, metavar="N",
                       help="several nodes: print the command to run on each (and the srun form); starts nothing")
    check.add_argument("--master-addr", metavar="HOST", help="with --nodes: node 0's address (default MASTER_ADDR)")
    check.add_argument("--port", type=int, metavar="PORT", help="with --nodes: the rendezvous port (default 29511)")
    check.add_argument("--print-commands", action="store_true", help="print the command and start nothing")
    check.add_argument("--json", action="store_true", help="print one JSON object")
    check.add_argument("--lang", choices=("en", "zh"), default=None, help="the text's language (default: the locale)")


def _path(text: str) -> Any:
    from pathlib import Path

    return Path(text)


def parse_sizes(text: str) -> list[int]:
    sizes = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        match = SIZE.match(part)
        if match is None:
            raise UsageError(f"--sizes: {part!r} is not a size (bytes, or with K, M, G: 64K,1M)")
        size = int(match.group(1)) * SCALE[match.group(2).upper()]
        if not 4 <= size <= MAX_SIZE:
            raise UsageError(f"--sizes: {part} is outside 4 bytes to 2G")
        sizes.append(size)
    if not sizes or len(sizes) > MAX_SIZES:
        raise UsageError(f"--sizes takes 1 to {MAX_SIZES} sizes")
    return sorted(set(sizes))


def visible_gpus(environ: Any = os.environ) -> list[str]:
    """The names of the GPUs this node's processes see (NVML or nvidia-smi, narrowed by CUDA_VISIBLE_DEVICES)."""
    from tools.base import ProbeContext
    from tools.gpu_inventory import gpu_facts

    facts = gpu_facts(ProbeContext(environ=dict(environ), timeout_s=5.0))
    names = [g.name for g in facts.gpus] if facts is not None else []
    visible = environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return names
    entries = [e.strip() for e in visible.split(",") if e.strip() and e.strip() != "-1"]
    by_index = {str(i): n for i, n in enumerate(names)}
    return [by_index.get(e, e) for e in entries][: len(names)]


def run_check_command(args: argparse.Namespace) -> int:
    from traindoc_cli.hang import lang_of

    lang = lang_of(args.lang)
    if args.what == "p2p":
        return _p2p(args, lang)
    plan = _plan(args)
    if args.nodes > 1:
        return _print_nodes(args, plan, lang)
    if args.print_commands:
        if plan.port == 0:
            from checks.run import free_port

            plan.port = free_port()
        print(say("checks.print.heading", lang))
        print("  " + _env_prefix(plan) + shlex.join(plan.command("<progress-dir>")))
        return 0
    return _nccl(args, plan, lang)


def _settings(args: argparse.Namespace) -> dict[str, Any]:
    from checks import variables
    from common.settings import Settings

    layers = [variables.from_environ(os.environ)]
    if args.bundle is not None:
        from tools.bundle import BundleError

        try:
            layers.append(variables.from_bundle(args.bundle, int(Settings.from_env().max_bundle_mb * 2**20)))
        except BundleError as exc:
            raise InputError(str(exc)) from exc
    if args.log:
        layers.append(variables.from_log(args.log))
    return variables.merged(*layers)


def _plan(args: argparse.Namespace) -> Any:
    from checks.run import Plan

    if not 0 < args.timeout <= 3600:
        raise UsageError("--timeout must be more than 0 and at most 3600 seconds")
    if not 1 <= args.iters <= 1000:
        raise UsageError("--iters must be 1 to 1000")
    if not 1 <= args.nodes <= 4096:
        raise UsageError("--nodes must be 1 to 4096")
    if args.nproc is not None and not 1 <= args.nproc <= MAX_NPROC:
        raise UsageError(f"--nproc must be 1 to {MAX_NPROC}")
    if args.port is not None and not 0 < args.port < 65536:
        raise UsageError("--port must be 1-65535")
    gpus = visible_gpus() if args.backend != "gloo" and args.nodes == 1 else []
    backend = args.backend if args.backend != "auto" else ("nccl" if gpus or args.nodes > 1 else "gloo")
    if backend == "nccl" and args.nodes == 1 and not gpus:
        raise InputError("--backend nccl needs a GPU and none is visible here", hint="leave --backend out: gloo runs over CPU processes")
    nproc = args.nproc or (len(gpus) if backend == "nccl" and gpus else 2)
    if backend == "nccl" and args.nodes == 1 and nproc > len(gpus):
        raise UsageError(f"--nproc {nproc} is more than the {len(gpus)} visible GPU(s): NCCL needs one GPU per rank")
    sizes = parse_sizes(args.sizes or (GPU_SIZES if backend == "nccl" else CPU_SIZES))
    return Plan(backend, nproc, sizes, float(args.timeout), args.iters, _settings(args))


def _env_prefix(plan: Any) -> str:
    return "".join(f"{n}={shlex.quote(s.value)} " for n, s in sorted(plan.settings.items()))


# -- check nccl on this node ---------------------------------------------------------------------------------------

def _nccl(args: argparse.Namespace, plan: Any, lang: Lang) -> int:
    from checks.run import run_check
    from checks.variables import missing_interfaces
    from tools.env_vars import list_interfaces

    nics = list_interfaces()
    out = sys.stderr if args.json else sys.stdout

    def preface(started: Any) -> None:
        device = say("checks.preface.gpu" if plan.backend == "nccl" else "checks.preface.cpu", lang)
        print(say("checks.preface", lang, nproc=plan.nproc, backend=plan.backend, device=device, port=started.port),
              file=out)
        print(f"  {say('checks.preface.command', lang)} {shlex.join(started.command)}", file=out)
        if plan.settings:
            print(f"  {say('checks.preface.settings', lang)} " + ", ".join(
                f"{n}={_masked(s.value)} ({s.source})" for n, s in sorted(plan.settings.items())), file=out)
        else:
            print(f"  {say('checks.preface.no_settings', lang)}", file=out)
        for setting in missing_interfaces(plan.settings, nics):
            print("  " + say("checks.preflight_ifname", lang, name=setting.name, value=setting.value,
                             interfaces=", ".join(nics)), file=out)
        print(f"  {say('checks.preface.cleanup', lang, timeout=plan.timeout_s)}", file=out, flush=True)

    consumer = plan.backend == "nccl" and _consumer_gpus()
    result = run_check(plan, on_start=preface, interfaces=nics, consumer_gpus=consumer)
    message = _said(result.outcome, lang)
    if args.json:
        from common.textsafe import printable_json

        print(json.dumps(printable_json(_masked_json(result.to_json(message))), ensure_ascii=False))
    else:
        sys.stdout.write(render(result, lang))
    return 0 if result.outcome.passed else 1


def _consumer_gpus() -> bool:
    from checks.p2p import is_consumer

    return any(is_consumer(name) for name in visible_gpus())


def _masked(text: str) -> str:
    from common.secrets import mask

    return mask(text)


def _masked_json(value: Any) -> Any:
    if isinstance(value, str):
        return _masked(value)
    if isinstance(value, list):
        return [_masked_json(v) for v in value]
    if isinstance(value, dict):
        return {k: _masked_json(v) for k, v in value.items()}
    return value


def _said(outcome: Any, lang: Lang) -> str:
    return say(outcome.key, lang, **outcome.values)


def _title(kind: str, lang: Lang) -> str:
    from runbooks.choose import in_language

    book = in_language(kind, lang)
    return book.title if book is not None else kind


def render(result: Any, lang: Lang) -> str:
    """The check's table and its verdict, for a terminal."""
    from checks.meaning import size_name

    header = [say(f"checks.col.{c}", lang) for c in ("op", "size", "result", "time", "busbw")]
    rows = [header]
    for row in result.ops:
        seconds = "" if row.seconds is None else (f"{row.seconds * 1e3:.2f} ms" if row.seconds >= 1e-3 else
                                                  f"{row.seconds * 1e6:.0f} us")
        busbw = "" if row.busbw is None or row.op == "barrier" else (
            f"{row.busbw:.2f} GB/s" if row.busbw >= 0.1 else f"{row.busbw * 1e3:.2f} MB/s")
        rows.append([row.op, "-" if row.op == "barrier" else size_name(row.bytes), say(f"checks.status.{row.status}", lang),
                     seconds, busbw])
    from common.textsafe import cells

    widths = [max(cells(r[i]) for r in rows) for i in range(len(header))]  # a Chinese character takes two columns
    lines = ["  ".join(cell + " " * (widths[i] - cells(cell)) for i, cell in enumerate(r)).rstrip() for r in rows]
    lines.append(f"({say('checks.busbw_note', lang)})")
    outcome = result.outcome
    label = say("checks.pass" if outcome.passed else "checks.fail", lang)
    lines += ["", f"{label}{'：' if lang == 'zh' else ': '}{_masked(_said(outcome, lang))}"]
    if outcome.kind is not None:
        title = _title(outcome.kind, lang)
        lines.append("  " + say("checks.kind", lang, kind=outcome.kind, title=title))
        lines.append("  " + say("checks.next", lang, title=title))
    if outcome.evidence and not outcome.passed:
        lines.append("  " + say("checks.evidence", lang, line=_masked(outcome.evidence.splitlines()[0][:300])))
    if not outcome.passed and outcome.rule in ("unknown", "launcher_failed"):
        lines += ["", say("checks.launcher_tail", lang), *(_masked("  " + t[:300]) for t in result.launcher_tail[-15:])]
    if result.left_behind:
        lines.append(say("checks.left_behind", lang, pids=", ".join(map(str, result.left_behind))))
    return "\n".join(lines) + "\n"


# -- several nodes ---------------------------------------------------------------------------------------------------

def _print_nodes(args: argparse.Namespace, plan: Any, lang: Lang) -> int:
    from checks.commands import DEFAULT_PORT, per_node, srun

    master = args.master_addr or os.environ.get("MASTER_ADDR") or "NODE0_ADDRESS"
    port = args.port or DEFAULT_PORT
    nproc = str(args.nproc) if args.nproc else "gpu"
    commands = per_node(plan, args.nodes, master, port, nproc)
    line = srun(plan, args.nodes, port, nproc)
    if args.json:
        print(json.dumps({"nodes": args.nodes, "commands": commands, "srun": line}, ensure_ascii=False))
        return 0
    print(say("checks.nodes.heading", lang, nodes=args.nodes, master=master))
    for node, command in enumerate(commands):
        print(f"  {say('checks.nodes.node', lang, node=node)}")
        print(f"    {command}")
    print(say("checks.nodes.srun", lang))
    print(f"    {line}")
    print(say("checks.nodes.note", lang))
    return 0


# -- check p2p -------------------------------------------------------------------------------------------------------

def _p2p(args: argparse.Namespace, lang: Lang, source: Any = None) -> int:
    from checks.p2p import TorchPeerAccess, implication, read_matrix

    matrix = read_matrix(source if source is not None else TorchPeerAccess())
    found = implication(matrix)
    pairs = ", ".join(f"{i}-{j}" for i, j in matrix.pairs_without if i < j) or "-"
    said = say(found.key, lang, pairs=pairs)
    if args.json:
        print(json.dumps({**matrix.to_json(), "implication": {"rule": found.rule, "kind": found.kind,
                                                                "advice": found.advice, "message": said}},
                         ensure_ascii=False))
        return 0
    sys.stdout.write(render_p2p(matrix, found, lang, said))
    return 0


def render_p2p(matrix: Any, found: Any, lang: Lang, said: str) -> str:
    lines: list[str] = []
    if matrix.names:
        n = len(matrix.names)
        lines.append(say("checks.p2p.heading", lang))
        lines.append("       " + "".join(f"{j:>5}" for j in range(n)))
        for i in range(n):
            cells = "".join(f"{'-' if v is None else ('yes' if v else 'no'):>5}" for v in matrix.access[i])
            lines.append(f"  GPU{i:<2}{cells}")
        lines += [f"  GPU{i}: {name}" for i, name in enumerate(matrix.names)]
        lines.append("")
    lines.append(said)
    if found.kind is not None:
        lines.append("  " + say("checks.kind", lang, kind=found.kind, title=_title(found.kind, lang)))
    if found.advice:
        lines.append("  " + say("checks.p2p.do", lang, command=found.advice))
    return "\n".join(lines) + "\n"


__all__ = ["add_arguments", "parse_sizes", "render", "render_p2p", "run_check_command", "visible_gpus"]
