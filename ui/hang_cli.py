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
from typing import Any

from common.errors import InputError, UsageError
from common.language import Lang


def run_hang_command(args: argparse.Namespace) -> int:
    timeout = float(args.timeout)
    if timeout <= 0:
        raise UsageError("--timeout must be positive")
    if args.pid is not None and args.debug_server:
        raise UsageError("--pid reads this machine's processes and --debug-server a remote job: give one")
    snapshot = _snapshot(args, timeout)
    if args.json:
        from common.textsafe import printable_json

        print(json.dumps(printable_json(snapshot.to_json()), ensure_ascii=False))
    else:
        sys.stdout.write(render(snapshot, lang_of(args.lang)))
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


def lang_of(chosen: str | None, environ: Mapping[str, str] = os.environ) -> Lang:
    """--lang, else the locale as POSIX reads it for messages: the first of LC_ALL, LC_MESSAGES, LANG that is set
    and not empty; zh_CN.UTF-8, zh_TW... give Chinese."""
    if chosen in ("en", "zh"):
        return "zh" if chosen == "zh" else "en"
    value = next((environ[k] for k in ("LC_ALL", "LC_MESSAGES", "LANG") if environ.get(k)), "")
    return "zh" if value.lower().startswith("zh") else "en"


WORDS: dict[Lang, dict[str, str]] = {  # the renderer's own labels; the sentences come from the diagnosis
    "en": {"head": "traindoc hang: {job}, {count}, via {source}", "the_job": "the job", "count": "{n} rank{s}",
           "no_ranks": "no ranks started", "root": "{category} ({who}, confidence {confidence:.1f}): {summary}",
           "rank": "rank {rank}", "no_single_rank": "no single rank", "why": "  why: {text}",
           "collective": "  collective: {text}", "ranks": "ranks {ranks}", "rank_sep": ", ", "extra": " ({items})",
           "extra_sep": "; ", "pids": "pid{s} {pids}", "group": "{label}{extra}: {place}",
           "fr": "Flight Recorder ({n} dump(s)): {summary}", "more": "What would tell more:"},
    "zh": {"head": "traindoc hang：{job}，{count}，来源：{source}", "the_job": "该作业", "count": "{n} 个 rank",
           "no_ranks": "尚未启动任何 rank", "root": "{category}（{who}，置信度 {confidence:.1f}）：{summary}",
           "rank": "rank {rank}", "no_single_rank": "无法归于单个 rank", "why": "  原因：{text}",
           "collective": "  集合通信：{text}", "ranks": "rank {ranks}", "rank_sep": "、", "extra": "（{items}）",
           "extra_sep": "；", "pids": "pid {pids}", "group": "{label}{extra}：{place}",
           "fr": "Flight Recorder（{n} 个转储）：{summary}", "more": "还需要哪些证据："},
}


def render(snapshot: Any, lang: Lang = "en") -> str:
    from jobs import hang_wording

    words = WORDS[lang]
    chinese = lang == "zh"
    diagnosis = snapshot.diagnosis
    own = diagnosis.wording.get(lang, {})  # the diagnosis's sentences in this language, where it has them
    root = diagnosis.root_cause
    n = len(diagnosis.ranks)
    count = words["count"].format(n=n, s="s" if n != 1 else "") if diagnosis.ranks else words["no_ranks"]
    job, source = snapshot.job, snapshot.source
    if chinese:
        job, source = hang_wording.source(job) if job else job, hang_wording.source(source)
    lines = [words["head"].format(job=job or words["the_job"], count=count, source=source), ""]
    if root is not None:
        who = words["rank"].format(rank=root.rank) if root.rank is not None else words["no_single_rank"]
        lines.append(words["root"].format(category=root.category, who=who, confidence=root.confidence,
                                          summary=own.get("root") or root.summary))
        if diagnosis.why_consequences:
            lines.append(words["why"].format(text=own.get("why") or diagnosis.why_consequences))
        if diagnosis.collective:
            lines.append(words["collective"].format(text=own.get("collective") or diagnosis.collective))
    for group in snapshot.groups:
        label = (_ranks_label(group.ranks, words) if group.ranks
                 else words["pids"].format(s="", pids=", ".join(map(str, group.pids))))
        extra = []
        if group.pids and group.ranks:
            extra.append(words["pids"].format(s="s" if len(group.pids) > 1 else "", pids=", ".join(map(str, group.pids))))
        if group.hosts:
            extra.append(", ".join(group.hosts))
        place = hang_wording.place(group.place) if chinese else group.place.text()
        shown = words["extra"].format(items=words["extra_sep"].join(extra)) if extra else ""
        lines.extend(["", words["group"].format(label=label, extra=shown, place=place)])
        lines.extend(f"    {frame}" for frame in group.frames[:12])
    finding = snapshot.flight_recorder
    if finding is not None:
        said = hang_wording.flight_recorder(finding) if chinese else finding.summary
        lines.extend(["", words["fr"].format(n=len(finding.ranks), summary=said)])
        for o in finding.last_ops[:16]:
            lines.append("    " + (hang_wording.last_op(o.rank, o.name, o.seq, o.state, o.where) if chinese else
                                   f"rank {o.rank}: last {o.name} #{o.seq} {o.state}" + (f" at {o.where}" if o.where else "")))
    if diagnosis.next_evidence:
        lines.extend(["", words["more"]])
        items = own["next"].splitlines() if own.get("next") else diagnosis.next_evidence
        lines.extend(f"  - {item}" for item in items)
    return "\n".join(lines) + "\n"


def _ranks_label(ranks: list[int], words: Mapping[str, str] = WORDS["en"]) -> str:
    return f"rank {ranks[0]}" if len(ranks) == 1 else words["ranks"].format(ranks=words["rank_sep"].join(map(str, ranks)))
