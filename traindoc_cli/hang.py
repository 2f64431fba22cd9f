"""`traindoc hang`: what every rank of a live (hung) job is doing now, rendered for a terminal or as JSON.

The summary first, then one block per group of identical stacks (its ranks, where they are, the top
frames), then what would tell more. Nothing here is signalled, killed or written. The text is in English
or Chinese (--lang, else the locale); the JSON carries both (the diagnosis's "wording").
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from common.errors import InputError, UsageError
from common.language import Lang, say


def run_hang_command(args: argparse.Namespace) -> int:
    timeout = float(args.timeout)
    if timeout <= 0:
        raise UsageError("--timeout must be positive")
    if args.pid is not None and args.debug_server:
        raise UsageError("--pid reads this machine's processes and --debug-server a remote job: give one")
    snapshot = _snapshot(args, timeout)
    if getattr(args, "timeline", None) is not None:
        _write_picture(args.timeline, snapshot, lang_of(args.lang))
    if args.json:
        from common.textsafe import printable_json

        print(json.dumps(printable_json(snapshot.to_json()), ensure_ascii=False))
    else:
        sys.stdout.write(render(snapshot, lang_of(args.lang)))
    return 0


def _write_picture(path: Path, snapshot: Any, lang: Lang) -> None:
    from jobs.picture import svg_of

    svg = svg_of(snapshot.diagnosis, lang)
    if svg is None:
        raise InputError("--timeline: the snapshot read no rank's stack to draw")
    try:
        path.write_text(svg, encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot write the timeline to {path}: {exc.strerror or exc}") from exc


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


def lang_of(chosen: str | None, environ: Mapping[str, str] = os.environ) -> Lang:
    """--lang, else the locale as POSIX reads it for messages: the first of LC_ALL, LC_MESSAGES, LANG that is set
    and not empty; zh_CN.UTF-8, zh_TW... give Chinese."""
    if chosen in ("en", "zh"):
        return "zh" if chosen == "zh" else "en"
    value = next((environ[k] for k in ("LC_ALL", "LC_MESSAGES", "LANG") if environ.get(k)), "")
    return "zh" if value.lower().startswith("zh") else "en"


def render(snapshot: Any, lang: Lang = "en") -> str:
    """The snapshot for a terminal: the renderer's own labels are the ``hang.cli.*`` phrases; the sentences come from
    the diagnosis (its wording in ``lang``, where it has one) and ``jobs.hang_wording``."""
    from jobs import hang_wording

    diagnosis = snapshot.diagnosis
    own = diagnosis.wording.get(lang, {})  # the diagnosis's sentences in this language, where it has them
    root = diagnosis.root_cause
    n = len(diagnosis.ranks)
    count = (say("hang.cli.rank_count" if n == 1 else "hang.cli.ranks_count", lang, n=n) if diagnosis.ranks
             else say("hang.cli.no_ranks", lang))
    job = hang_wording.source(snapshot.job, lang) if snapshot.job else say("hang.cli.the_job", lang)
    lines = [say("hang.cli.head", lang, job=job, count=count, source=hang_wording.source(snapshot.source, lang)), ""]
    if root is not None:
        who = say("rank", lang, rank=root.rank) if root.rank is not None else say("no_single_rank", lang)
        lines.append(say("hang.cli.root", lang, category=root.category, who=who, confidence=root.confidence,
                         summary=own.get("root") or root.summary))
        if diagnosis.why_consequences:
            lines.append(say("hang.cli.why", lang, text=own.get("why") or diagnosis.why_consequences))
        if diagnosis.collective:
            lines.append(say("hang.cli.collective", lang, text=own.get("collective") or diagnosis.collective))
    for group in snapshot.groups:
        pids = ", ".join(map(str, group.pids))
        label = _ranks_label(group.ranks, lang) if group.ranks else say("hang.cli.pid", lang, pids=pids)
        extra = []
        if group.pids and group.ranks:
            extra.append(say("hang.cli.pids" if len(group.pids) > 1 else "hang.cli.pid", lang, pids=pids))
        if group.hosts:
            extra.append(", ".join(group.hosts))
        shown = say("hang.cli.extra", lang, items=say("jobs.clause_sep", lang).join(extra)) if extra else ""
        place = hang_wording.place(group.place, lang)
        lines.extend(["", say("hang.cli.group", lang, label=label, extra=shown, place=place)])
        lines.extend(f"    {frame}" for frame in group.frames[:12])
    finding = snapshot.flight_recorder
    if finding is not None:
        # the analyzer's finding is written in English; another language is said from its fields
        said = finding.summary if lang == "en" else hang_wording.flight_recorder(finding, lang)
        lines.extend(["", say("hang.cli.fr", lang, n=len(finding.ranks), summary=said)])
        lines.extend("    " + hang_wording.last_op(o.rank, o.name, o.seq, o.state, o.where, lang) for o in finding.last_ops[:16])
    if diagnosis.next_evidence:
        lines.extend(["", say("hang.cli.more", lang)])
        items = own["next"].splitlines() if own.get("next") else diagnosis.next_evidence
        lines.extend(f"  - {item}" for item in items)
    return "\n".join(lines) + "\n"


def _ranks_label(ranks: list[int], lang: Lang) -> str:
    """"rank 3", "ranks 0, 1, 2": every rank of the group, listed."""
    if len(ranks) == 1:
        return say("jobs.rank", lang, rank=ranks[0])
    return say("jobs.ranks", lang, ranks=say("jobs.list_sep", lang).join(map(str, ranks)))
