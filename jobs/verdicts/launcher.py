"""A paste of the launcher's last lines alone: its report of how ranks ended and its reaction. Which rank
failed first and how it ended, never why: the cause is printed above them (the last verdict reader)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from common.language import Lang, say
from jobs.diagnosis import RootCause, clip
from jobs.events import SIGNALS, Exit, first_failure
from jobs.timeline import JobTimeline
from jobs.verdict import Verdict
from jobs.wording import both, pair, rank_names

SLURM_REASON = re.compile(r"CANCELLED AT \S+ DUE (?:TO|to) (?P<reason>[A-Z][A-Z ]{2,60}?|SIGNAL \w+)(?: \*| ,|,|$)")
# Phrase keys: what an exit code or a signal says, where it says something; what Slurm's reasons mean; what would
# tell more, per launcher whose lines the paste shows.
CODE_MEANS = {1: "jobs.exit.uncaught", 2: "jobs.exit.usage", -6: "jobs.exit.aborted", -2: "jobs.exit.interrupted",
              -1: "jobs.exit.hangup"}
SLURM_REASONS = {"TIME LIMIT": "jobs.slurm.time_limit", "PREEMPTION": "jobs.slurm.preemption",
                 "NODE FAILURE": "jobs.slurm.node_failure"}
LAUNCHER_HINTS = {"torchrun": "jobs.hint.torchrun", "srun": "jobs.hint.srun", "deepspeed": "jobs.hint.deepspeed"}


@dataclass(frozen=True)
class _Report:
    """What the launcher's lines say: the first failure (and the exits reported with it), or the ranks it stopped,
    and Slurm's reason for cancelling the step."""

    first: Exit | None
    group: list[Exit]
    single_node: bool
    stopped: list[int]  # without a first failure: the ranks the launcher reports stopped
    exits: bool  # the lines report a rank's non-zero exit
    reason: str | None


def _who(lang: Lang, x: Exit, group: list[Exit], single_node: bool) -> tuple[str, int | None]:
    """The rank(s) an exit report names, with the host, and the rank to blame: on one node a local rank is the
    global rank (as ``jobs.events`` reads torchrun's prefixes)."""
    ranks = sorted({g.rank for g in group if g.rank is not None})
    rank = ranks[0] if len(ranks) == 1 and len(group) == 1 else None
    noun: Literal["rank", "task"] = "task" if x.launcher == "srun" else "rank"
    if len(ranks) > 1:
        who = rank_names(ranks, lang, noun)
    elif x.rank is not None:
        who = rank_names([x.rank], lang, noun)
    elif x.local_rank is not None:
        who = say("jobs.launcher.local_rank", lang, rank=x.local_rank)
        if single_node and len(group) == 1:
            who, rank = say("jobs.launcher.local_rank_single_node", lang, rank=x.local_rank), x.local_rank
    elif x.launcher == "deepspeed":  # its line quotes the last command it started, not the failed rank's
        who = say("jobs.launcher.deepspeed_rank", lang)
    else:
        who = say("jobs.launcher.launched_process", lang)
    return who + (say("jobs.on_host", lang, host=x.host) if x.host else ""), rank


def _cause_in(lang: Lang, report: _Report) -> str:
    """Whose output holds the cause: the failed rank's, named as the report names it (up to any aside)."""
    first = report.first
    if first is None:
        return say("jobs.launcher.failed_rank_output", lang)
    if first.rank is None and first.local_rank is None:
        return say("jobs.launcher.unnamed_output", lang)
    who = _who(lang, first, report.group, report.single_node)[0]
    return say("jobs.launcher.own_output", lang, who=who.split(say("jobs.aside", lang), 1)[0])


def _summary(lang: Lang, report: _Report) -> str:
    first, reason = report.first, report.reason
    if first is not None:
        code = first.code
        signal = SIGNALS.get(-code, say("jobs.launcher.signal", lang, number=-code)) if code is not None and code < 0 else ""
        how = (say("jobs.launcher.ended_by", lang, signal=signal) if signal else
               say("jobs.launcher.exited_with", lang, code=code))
        said = say("jobs.launcher.failed_first", lang, who=_who(lang, first, report.group, report.single_node)[0],
                   observed=say("jobs.launcher.first_observed", lang) if first.first else "", how=how,
                   means=say(CODE_MEANS.get(code or 0, "jobs.exit.own_error"), lang))
    elif reason is not None:
        said = ""
    else:
        who = rank_names(report.stopped, lang) if report.stopped else say("jobs.launcher.the_ranks", lang)
        stopped = say("jobs.exit.stopped", lang)
        said = (say("jobs.launcher.stopped_none_first", lang, who=who, stopped=stopped,
                    was=say("jobs.was" if len(report.stopped) == 1 else "jobs.were", lang)) if report.exits
                else say("jobs.launcher.stopped", lang, who=who, stopped=stopped))
    if reason is not None:
        means = say(SLURM_REASONS[reason], lang) if reason in SLURM_REASONS else say("jobs.slurm.says", lang, reason=reason)
        said += (say("jobs.clause_sep", lang) if said else "") + say("jobs.slurm.cancelled", lang, reason=reason, said=means)
    if first is None and reason is not None:
        return said + say("jobs.launcher.slurm_reaction", lang)
    return said + say("jobs.launcher.report", lang, cause_in=_cause_in(lang, report))


def _asked(lang: Lang, report: _Report) -> str:
    """What to look at first: the lines above the launcher's."""
    if report.first is None and report.reason is not None:
        return say("jobs.launcher.ask_last_lines", lang)
    return say("jobs.launcher.ask_cause", lang, cause_in=_cause_in(lang, report))


def read(timeline: JobTimeline, question: str) -> Verdict | None:
    """The paste shows the launcher's lines alone: its report of how ranks ended (torchrun's table, srun's "task 3:
    Exited with exit code 1", DeepSpeed's return code) and its reaction (SIGTERM to the others, "Killing
    subprocess", Slurm cancelling the step). They say which rank failed first and how it ended, never why, and
    they are no timeout: the verdict names that rank and asks for what its process printed above them. The last
    reader: it reads whatever events are left."""
    job, events = timeline.job, timeline.events
    if not events:
        return None
    exits = [x for x in job.exits if x.code not in (None, 0)]
    first = first_failure(job.exits)
    lines = [e.line for e in events]
    markers = (("torchrun", "closing signal"), ("deepspeed", "Killing subprocess"), ("srun", "srun: "), ("srun", "slurmstepd"))
    launchers = {x.launcher for x in exits} | {name for name, marker in markers if any(marker in line for line in lines)}
    reason = next((m["reason"].strip() for line in lines if (m := SLURM_REASON.search(line))), None)
    group = [first] if first is not None else []
    if first is not None and first.launcher == "srun" and not first.first:  # "tasks 0-3: Exited with exit code 1": reported together
        group = [x for x in exits if (x.launcher, x.code, x.host) == (first.launcher, first.code, first.host)]
    single_node = len({x.host for x in job.exits if x.host} | set(job.hosts.values())) <= 1
    report = _Report(first, group, single_node, sorted({x.rank for x in exits if x.rank is not None}), bool(exits), reason)
    rank = _who("en", first, group, single_node)[1] if first is not None else None
    summary, chinese = both(_summary, report)
    hints = [both(_asked, report)]
    if first is not None and first.code == -6:
        hints.append(pair("jobs.hint.abort"))
    if reason is not None or (first is None and exits):
        hints.append(pair("jobs.hint.scheduler"))
    hints += [pair(key) for name, key in LAUNCHER_HINTS.items() if name in launchers]
    own = None if first is None else next((e for e in events if not e.source and e.rank == first.rank
                                           and e.line.startswith(f"exitcode {first.code} (")), None)
    evidence = list(dict.fromkeys(clip(line, 300) for line in lines))[:5]
    category = "exception" if first is not None and first.code == 1 else "unknown"
    root = RootCause(category, rank, summary, host=first.host if first is not None else None, evidence=evidence,
                     confidence=0.5 if rank is not None else 0.3)
    # the first failure's own exit is no consequence of itself
    return Verdict(root, chinese, culprit=own, blamed=rank, next_evidence=hints, search_lines=evidence[:3])
