"""The third step of reading a job (lines -> events -> timeline -> verdict -> words): the job's events in one
order, with what the launcher's exit reports add (an exit code as an event: SIGKILL may be the cause, SIGTERM
is the launcher's doing), the rank a root error belongs to where the log does not say it, and the ranks the job
had. Every verdict reader (``jobs.verdicts``) reads this one ``JobTimeline``; nothing goes back to the lines.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import datetime

from common.language import say
from jobs import wording
from jobs.events import SIGNALS, Event, JobEvents


@dataclass(frozen=True)
class JobTimeline:
    job: JobEvents
    events: list[Event]  # in reading order, the exits' events included
    world: frozenset[int]  # every rank the job had, as far as the logs say

    @property
    def roots(self) -> list[Event]:
        return [e for e in self.events if e.kind == "root"]

    @property
    def collective(self) -> str | None:
        """Where most ranks waited, when NCCL printed it ("ALLREDUCE SeqNum=4")."""
        if not self.job.collectives:
            return None
        return Counter(self.job.collectives.values()).most_common(1)[0][0]


def timeline_of(job: JobEvents) -> JobTimeline:
    _attribute(job)
    events = sorted(job.events + _exit_events(job), key=lambda e: e.order)
    return JobTimeline(job, events, frozenset(rank_world(job)))


def clock(when: datetime | None) -> str:
    return wording.clock(when, "en")


def sort_key(event: Event) -> tuple[float, int]:
    return (event.time.timestamp() if event.time else float("inf"), event.order)


def rank_world(job: JobEvents) -> set[int]:
    ranks = set(job.ranks) | {x.rank for x in job.exits if x.rank is not None}
    if job.world_size and job.world_size <= 4096:
        ranks |= set(range(job.world_size))
    return ranks


def waited_in(event: Event) -> str:
    if event.call and event.where:
        return f"dist.{event.call} ({event.where})"
    return f"dist.{event.call}" if event.call else f"{event.func or 'code'} ({event.where})"


def _attribute(job: JobEvents) -> None:
    """Give unattributed root events the rank that failed by itself, when exactly one did."""
    failed = {x.rank for x in job.exits if x.rank is not None and x.code is not None and x.code > 0}
    failed |= {x.rank for x in job.exits if x.rank is not None and x.code in (-7, -9, -11) and not x.after_first}
    if len(failed) == 1:
        rank = next(iter(failed))
        host = next((x.host for x in job.exits if x.rank == rank and x.host), None)
        for event in job.events:
            if event.kind == "root" and event.rank is None and event.category not in ("port_in_use", "rendezvous"):
                event.rank = rank
                event.host = event.host or host


def _exit_events(job: JobEvents) -> list[Event]:
    """Exit codes as events: SIGTERM is the launcher's doing; SIGKILL/SIGBUS/SIGSEGV may be the cause."""
    events = []
    for index, x in enumerate(job.exits):
        if x.code is None or x.code >= 0:
            continue
        name = SIGNALS.get(-x.code) or say("jobs.launcher.signal", "en", number=-x.code)
        task = say("jobs.exit.task", "en", rank=x.rank) if x.launcher == "srun" and x.rank is not None else ""
        line = say("jobs.exit.line", "en", task=task, code=x.code, signal=name)
        if x.note:
            line += say("jobs.root.meaning", "en", meaning=x.note)
        if x.code in (-15, -1, -2, -3) or x.after_first:  # stopped: by the launcher, the scheduler, a user
            kind, category = "symptom", "killed_by_launcher"
        elif x.code == -6:
            kind, category = "symptom", "process_abort"
        elif x.code == -7:
            kind, category = "root", "dataloader_worker"
        elif x.code in (-11, -4, -8):
            kind, category = "root", "native_crash"  # a segfault: native code (an extension, a driver, a library)
        else:
            kind, category = "root", "host_oom"  # SIGKILL nobody else sent: usually the kernel's OOM killer
        summary, line_zh = say("jobs.killed_by", "en", signal=name), ""
        if x.after_first:
            summary = say("jobs.killed_after_first", "en", signal=name)
        elif x.oom:
            summary += say("jobs.killed.slurm_oom", "en")
            line += say("jobs.root.meaning", "en", meaning=summary)
        elif x.code == -9:  # said where it is shown: a bare "exitcode -9" reads as a mystery
            summary = say("jobs.killed_by_sigkill", "en")
            line_zh = line + say("jobs.root.meaning", "zh", meaning=say("jobs.killed_by_sigkill", "zh"))
            line += say("jobs.root.meaning", "en", meaning=summary)
        events.append(Event(order=10**9 + index, kind=kind, category=category, summary=summary,
                            line=line, rank=x.rank, host=x.host, time=x.time, line_zh=line_zh))
    return events
