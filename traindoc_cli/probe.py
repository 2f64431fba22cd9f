"""`traindoc probe`: the probe sweep as a one-screen table (one row per check, problems first, a count line),
with `-v` the evidence and fixes under it, or a JSON bundle; and `--compare` across nodes."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from common.errors import InputError, UsageError


def run_probe_command(args: argparse.Namespace) -> int:
    from rich.console import Console

    from common.settings import Settings

    settings = Settings.from_env()  # the one settings object: TRAINDOC_PROBE_TIMEOUT, TRAINDOC_MAX_BUNDLE_MB
    console = Console()
    if args.compare:
        return _compare(args.compare, args.json, console, settings)
    from tools.base import ProbeContext
    from tools.registry import run_probes
    from tools.report import bundle, render_report

    timeout = settings.probe_timeout_s if args.timeout is None else args.timeout
    if timeout <= 0:
        raise UsageError("--timeout must be positive")
    for log in args.log:
        if not log.is_file():
            raise InputError(f"log file not found: {log}")
    ports = tuple(args.port) or ((int(os.environ["MASTER_PORT"]),) if os.environ.get("MASTER_PORT", "").isdigit() else (29500,))
    context = ProbeContext(
        python=args.python, ports=ports, log_paths=tuple(args.log), allowed_roots=(),
        output_dirs=tuple(args.output_dir) or (Path.cwd(),), environ=dict(os.environ), timeout_s=timeout,
    )
    results = run_probes(None, context)
    if args.json:
        print(json.dumps(bundle(results, context), ensure_ascii=False, indent=1))
        return 0
    from tools.check_rows import rows, summary_line

    table = rows(results)
    print_table(console, table)
    if getattr(args, "verbose", False):
        console.print()
        console.print(render_report(results), markup=False, highlight=False, soft_wrap=True)
        console.print()
    hint = "" if getattr(args, "verbose", False) else "; evidence and fixes: traindoc probe -v"
    console.print(_fit(f"{summary_line(table)}{hint}", console), markup=False, highlight=False, soft_wrap=True)
    return 0


STYLES = {"problem": "bold red", "error": "red", "timed out": "red", "note": "yellow", "ok": "green", "unavailable": "dim"}


def print_table(console, table) -> None:  # type: ignore[no-untyped-def]
    """verdict | check | value, one line each: on a terminal a value is cut at a word with "…" to fit the width
    (never wrapped mid-word); piped, lines are whole."""
    from rich.text import Text

    verdict_w = max((len(r.verdict) for r in table), default=7) + 2
    check_w = max((len(r.check) for r in table), default=5) + 2
    header = Text(f"{'verdict':<{verdict_w}}{'check':<{check_w}}value", style="bold")
    console.print(header, soft_wrap=True)
    for row in table:
        line = Text(f"{row.verdict:<{verdict_w}}", style=STYLES.get(row.verdict, ""))
        line.append(f"{row.check:<{check_w}}")
        line.append(_fit(row.value, console, verdict_w + check_w))
        console.print(line, soft_wrap=True)


def _fit(text: str, console, used: int = 0) -> str:  # type: ignore[no-untyped-def]
    from common.textsafe import printable

    text = " ".join(printable(text).split())  # a process's command line may carry bidi or zero-width characters
    room = console.width - used
    if not console.is_terminal or len(text) <= room:
        return text
    cut = text[: max(1, room - 1)]
    if " " in cut[room // 2:]:
        cut = cut[: cut.rindex(" ")]
    return cut.rstrip(" ,;:") + "…"


def _compare(paths: list[Path], as_json: bool, console, settings) -> int:  # type: ignore[no-untyped-def]
    from rich.table import Table
    from rich.text import Text

    from tools.report import BundleError, compare_bundles, read_node

    if len(paths) < 2:
        raise UsageError("--compare needs at least two bundles")
    bundles: dict[str, list] = {}  # type: ignore[type-arg]
    cap = int(settings.max_bundle_mb * 2**20)
    for path in paths:
        try:
            host, results = read_node(path, cap)  # once: a path may be a pipe
        except BundleError as exc:
            raise InputError(str(exc)) from exc
        name = f"{host} ({path})" if host else str(path)
        bundles[name + ("" if name not in bundles else f" #{len(bundles) + 1}")] = results
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


