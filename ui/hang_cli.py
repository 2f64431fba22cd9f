"""`traindoc hang`: what every rank of a live (hung) job is doing now, rendered for a terminal or as JSON.

The summary first, then one block per group of identical stacks (its ranks, where they are, the top
frames), then what would tell more. Nothing here is signalled, killed or written.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from common.errors import InputError, UsageError


def run_hang_command(args: argparse.Namespace) -> int:
    timeout = float(args.timeout)
    if timeout <= 0:
        raise UsageError("--timeout must be positive")
    if args.pid is not None and args.debug_server:
        raise UsageError("--pid reads this machine's processes and --debug-server a remote job: give one")
    snapshot = _snapshot(args, timeout)
    if args.json:
        print(json.dumps(snapshot.to_json(), ensure_ascii=False))
    else:
        sys.stdout.write(render(snapshot))
    return 0


def _snapshot(args: argparse.Namespace, timeout: float) -> Any:
    from jobs import hang

    if args.debug_server:
        snapshot = hang.snapshot_from_debug_server(args.debug_server, timeout, native=args.native)
    elif args.fr_dir is not None and args.pid is None:
        return hang.analyse_flight_recorder(args.fr_dir, timeout_s=max(timeout, 60.0))
    else:
        local = hang.take_snapshot(args.pid, native=args.native, timeout_s=timeout)
        if local is None:
            raise InputError("no training processes found on this machine",
                             hint="run traindoc hang on a node where the job runs, or give --debug-server URL or --fr-dir DIR")
        snapshot = local
    if args.fr_dir is not None:
        from jobs.flight_recorder import analyse_dir

        finding = analyse_dir(args.fr_dir, timeout_s=max(timeout, 60.0))
        if finding.error is not None:
            raise InputError(f"--fr-dir {args.fr_dir}: {finding.error}")
        hang.merge_flight_recorder(snapshot, finding)
    return snapshot


def render(snapshot: Any) -> str:
    diagnosis = snapshot.diagnosis
    root = diagnosis.root_cause
    count = f"{len(diagnosis.ranks)} rank{'s' if len(diagnosis.ranks) != 1 else ''}" if diagnosis.ranks else "no ranks started"
    lines = [f"traindoc hang: {snapshot.job or 'the job'}, {count}, via {snapshot.source}", ""]
    if root is not None:
        who = f"rank {root.rank}" if root.rank is not None else "no single rank"
        lines.append(f"{root.category} ({who}, confidence {root.confidence:.1f}): {root.summary}")
        if diagnosis.why_consequences:
            lines.append(f"  why: {diagnosis.why_consequences}")
        if diagnosis.collective:
            lines.append(f"  collective: {diagnosis.collective}")
    for group in snapshot.groups:
        label = _ranks_label(group.ranks) if group.ranks else f"pid {', '.join(map(str, group.pids))}"
        extra = []
        if group.pids and group.ranks:
            extra.append(f"pid{'s' if len(group.pids) > 1 else ''} {', '.join(map(str, group.pids))}")
        if group.hosts:
            extra.append(", ".join(group.hosts))
        lines.extend(["", f"{label}{' (' + '; '.join(extra) + ')' if extra else ''}: {group.place.text()}"])
        lines.extend(f"    {frame}" for frame in group.frames[:12])
    finding = snapshot.flight_recorder
    if finding is not None:
        lines.extend(["", f"Flight Recorder ({len(finding.ranks)} dump(s)): {finding.summary}"])
        lines.extend(f"    rank {o.rank}: last {o.name} #{o.seq} {o.state}" + (f" at {o.where}" if o.where else "")
                     for o in finding.last_ops[:16])
    if diagnosis.next_evidence:
        lines.extend(["", "What would tell more:"])
        lines.extend(f"  - {item}" for item in diagnosis.next_evidence)
    return "\n".join(lines) + "\n"


def _ranks_label(ranks: list[int]) -> str:
    return f"rank {ranks[0]}" if len(ranks) == 1 else "ranks " + ", ".join(map(str, ranks))
