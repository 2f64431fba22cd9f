"""What the job's timeline picture draws, taken from what the triage already read (``jobs.timeline.JobTimeline`` and
the verdict's culprit): one lane per rank, grouped by node; each event the triage read as a mark with its time; the
first failure; the consequences after it; the ranks absent from the collective the others waited in. Nothing here
reads a log again, and nothing here draws (``jobs.picture.svg`` does)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from jobs.events import Event
from jobs.timeline import JobTimeline, waited_in

Role = Literal["first", "failure", "consequence", "symptom"]
WAITS = ("collective_timeout", "peer_closed", "collective_wait")  # the categories that say a rank waited for the others
MAX_LANES = 128  # past this, the ranks with something to show are kept (a 1024-rank job's picture is its failures)
MAX_MARKS = 800
LINE_CHARS = 220  # of a log line, in a mark's tooltip


@dataclass(frozen=True)
class Mark:
    """One event the triage read, on its rank's lane (``rank`` None: the launcher's lane)."""

    rank: int | None
    role: Role  # the first failure, another failure of its own, a consequence of the first, a wait with no cause named
    category: str
    line: str  # the log line, as printed (clipped; masked and escaped where it is drawn)
    at: float  # seconds after the picture's start, or the reading order's index when the logs print no time
    when: datetime | None  # its time, or the last time its rank printed before it (None: the logs say none)
    exact: bool = True  # ``when`` is the line's own time
    repeats: int = 1  # events of the same rank and category drawn as this one


@dataclass(frozen=True)
class Lane:
    rank: int | None  # None: the launcher's own lines (its failure summary, exits it names no rank for)
    node: str | None  # the host the logs name for it
    first: bool = False  # the rank that failed first (or that the others waited for)
    absent: bool = False  # not among the ranks that waited in the collective
    logged: bool = True  # the logs hold a line of it


@dataclass(frozen=True)
class JobPicture:
    lanes: list[Lane]
    marks: list[Mark]
    timed: bool  # the axis is time (seconds from ``start``); else the order the logs were read in
    start: datetime | None
    span: float  # the axis' extent: seconds, or the number of marks when untimed
    first_at: float | None  # where the first failure is on the axis
    first_rank: int | None
    collective: str | None  # where the others waited ("ALLREDUCE SeqNum=4", "dist.all_reduce (train.py:35)")
    left_out: int = 0  # ranks not drawn (past MAX_LANES)
    nodes: list[str | None] = field(default_factory=list)  # in the order drawn

    @property
    def absent(self) -> list[int]:
        return [lane.rank for lane in self.lanes if lane.absent and lane.rank is not None]


def picture_of(timeline: JobTimeline, culprit: Event | None, blamed: int | None) -> JobPicture:
    """The picture of a triaged job: ``culprit`` is the verdict's event that is the cause (None when it names none),
    ``blamed`` the rank the others' failures follow from."""
    events = list(timeline.events)
    first_rank = culprit.rank if culprit is not None and culprit.rank is not None else blamed
    ranks = sorted(set(timeline.world) | {e.rank for e in events if e.rank is not None}
                   | ({first_rank} if first_rank is not None else set()))
    absent = _absent(events, ranks)
    kept, left_out = _kept_ranks(ranks, events, first_rank)
    hosts = _hosts(timeline)
    logged = set(timeline.job.ranks) | {e.rank for e in events if e.rank is not None}
    lanes = [Lane(rank, hosts.get(rank), rank == first_rank, rank in absent, rank in logged) for rank in kept]
    if any(e.rank is None for e in events):
        lanes.append(Lane(None, None))
    lanes = by_node(lanes)
    drawn = {lane.rank for lane in lanes}
    marks, timed, start, first_at = _marks([e for e in events if e.rank in drawn], culprit, first_rank is not None)
    span = max((m.at for m in marks), default=0.0)
    return JobPicture(lanes, marks, timed, start, span, first_at, first_rank, _collective(timeline), left_out,
                      list(dict.fromkeys(lane.node for lane in lanes if lane.rank is not None)))


def _absent(events: list[Event], ranks: list[int]) -> set[int]:
    """The ranks missing from the collective the others waited in: neither waiting there, nor failing on their own,
    nor stopped by the launcher before the first wait ran out (those may well have been waiting too)."""
    waits = [e for e in events if e.category in WAITS and e.rank is not None]
    if not waits:
        return set()
    timed = [e.time for e in waits if e.time is not None]
    ran_out = min(timed) if timed else None
    accounted = {e.rank for e in waits} | {e.rank for e in events if e.kind == "root"}
    accounted |= {e.rank for e in events if e.category == "killed_by_launcher" and e.time is not None
                  and ran_out is not None and e.time < ran_out}
    return set(ranks) - accounted


def _kept_ranks(ranks: list[int], events: list[Event], first: int | None) -> tuple[list[int], int]:
    if len(ranks) <= MAX_LANES:
        return ranks, 0
    showing = {e.rank for e in events if e.rank is not None} | ({first} if first is not None else set())
    kept = sorted(showing)[:MAX_LANES]
    return kept, len(ranks) - len(kept)


def _hosts(timeline: JobTimeline) -> dict[int, str]:
    """rank -> host: as the lines named it (NCCL's prefix, pdsh's, the failure table), then the events' own."""
    job = timeline.job
    hosts = dict(job.hosts)
    for x in job.exits:
        if x.rank is not None and x.host:
            hosts.setdefault(x.rank, x.host)
    for event in timeline.events:
        if event.rank is not None and event.host:
            hosts.setdefault(event.rank, event.host)
    return hosts


def by_node(lanes: list[Lane]) -> list[Lane]:
    """Ranks of one node together, the nodes in the order of their lowest rank; ranks of no named node after them,
    the launcher's lane last."""
    lowest: dict[str | None, int] = {}
    for lane in lanes:
        if lane.rank is not None:
            lowest[lane.node] = min(lowest.get(lane.node, lane.rank), lane.rank)
    unnamed = 1 << 62
    return sorted(lanes, key=lambda lane: (lane.rank is None, lane.node is None,
                                           lowest.get(lane.node, unnamed), lane.rank if lane.rank is not None else unnamed))


def _collective(timeline: JobTimeline) -> str | None:
    if timeline.collective:
        return timeline.collective
    places = Counter(waited_in(e) for e in timeline.events if e.category in WAITS and (e.call or e.where))
    return places.most_common(1)[0][0] if places else None


def _marks(events: list[Event], culprit: Event | None, explained: bool
           ) -> tuple[list[Mark], bool, datetime | None, float | None]:
    """Each (rank, category) once (the culprit always), placed on the axis: by time when the logs print times (an
    event without one goes where its rank last printed), else in reading order."""
    chosen: dict[tuple[int | None, str], Event] = {}
    repeats: Counter[tuple[int | None, str]] = Counter()
    for event in sorted(events, key=lambda e: e.order):
        key = (event.rank, event.category)
        repeats[key] += 1
        if key not in chosen or event is culprit:
            chosen[key] = event
    shown = sorted(chosen.values(), key=lambda e: e.order)[:MAX_MARKS]
    if culprit is not None and culprit not in shown and culprit in events:
        shown.append(culprit)
    placed = {id(e): _when(e, events) for e in shown}
    times = sorted(t for t in placed.values() if t is not None)
    timed = len(times) >= 2 or (len(times) == len(shown) == 1)
    start = times[0] if timed else None
    if timed:
        last = times[-1]
        at = {id(e): ((placed[id(e)] or last) - times[0]).total_seconds() for e in shown}
    else:
        at = {id(e): float(index) for index, e in enumerate(shown)}
    first_at = at[id(culprit)] if culprit is not None and id(culprit) in at else None
    marks = [Mark(e.rank, _role(e, culprit, explained, first_at, at[id(e)]), e.category, _line(e), at[id(e)],
                  placed[id(e)], exact=e.time is not None, repeats=repeats[(e.rank, e.category)]) for e in shown]
    return marks, timed, start, first_at


def _when(event: Event, events: list[Event]) -> datetime | None:
    if event.time is not None:
        return event.time
    if event.not_before is not None:
        return event.not_before
    before = [e.time for e in events if e.rank == event.rank and e.time is not None and e.order < event.order]
    return before[-1] if before else None


def _role(event: Event, culprit: Event | None, explained: bool, first_at: float | None, at: float) -> Role:
    if event is culprit:
        return "first"
    if event.kind == "root":
        return "failure"
    if explained and (first_at is None or at >= first_at):
        return "consequence"
    return "symptom"


def _line(event: Event) -> str:
    line = event.line.strip()
    return line if len(line) <= LINE_CHARS else line[: LINE_CHARS - 1] + "…"
