"""`traindoc probe`: the probe sweep as a verdict table or a JSON bundle, and `--compare` across nodes."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from common.errors import InputError, UsageError


def run_probe_command(args: argparse.Namespace) -> int:
    from rich.console import Console

    console = Console()
    if args.compare:
        return _compare(args.compare, args.json, console)
    from tools.base import ProbeContext
    from tools.registry import run_probes
    from tools.report import bundle, render_report

    if args.timeout <= 0:
        raise UsageError("--timeout must be positive")
    for log in args.log:
        if not log.is_file():
            raise InputError(f"log file not found: {log}")
    ports = tuple(args.port) or ((int(os.environ["MASTER_PORT"]),) if os.environ.get("MASTER_PORT", "").isdigit() else (29500,))
    context = ProbeContext(
        python=args.python, ports=ports, log_paths=tuple(args.log), allowed_roots=(),
        output_dirs=tuple(args.output_dir) or (Path.cwd(),), environ=dict(os.environ), timeout_s=args.timeout,
    )
    results = run_probes(None, context)
    if args.json:
        print(json.dumps(bundle(results, context), ensure_ascii=False, indent=1))
    else:
        console.print(render_report(results), markup=False, highlight=False, soft_wrap=True)
    return 0


def _compare(paths: list[Path], as_json: bool, console) -> int:  # type: ignore[no-untyped-def]
    from rich.table import Table
    from rich.text import Text

    from tools.report import BundleError, compare_bundles, load_bundle

    if len(paths) < 2:
        raise UsageError("--compare needs at least two bundles")
    bundles: dict[str, list] = {}  # type: ignore[type-arg]
    for path in paths:
        try:
            bundles[_node_name(path) + ("" if _node_name(path) not in bundles else f" #{len(bundles) + 1}")] = load_bundle(path)
        except BundleError as exc:
            raise InputError(str(exc)) from exc
    findings = compare_bundles(bundles)
    if as_json:
        print(json.dumps([f.to_dict() for f in findings], ensure_ascii=False, indent=1))
        return 0
    if not findings:
        console.print(f"no differences that break multi-node jobs across {len(bundles)} bundles")
        return 0
    table = Table(title=f"differences across {len(bundles)} nodes", show_lines=True)
    for column in ("verdict", "code", "summary", "evidence", "fix"):
        table.add_column(column, overflow="fold")
    for f in findings:
        table.add_row(Text(f.severity), Text(f.code), Text(f.summary), Text(f.evidence), Text(f.fix))
    console.print(table)
    return 0


def _node_name(path: Path) -> str:
    try:
        host = json.loads(path.read_text(encoding="utf-8")).get("host")
    except (OSError, ValueError, AttributeError):
        host = None
    return f"{host} ({path})" if host else str(path)
