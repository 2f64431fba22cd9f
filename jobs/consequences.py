"""The consequences of a job's failure, in words: which ranks timed out, lost a peer, were stopped by the
launcher, grouped by where they waited; the timeline; why they are not causes (in English and in Chinese).
Shared by the triage of a root cause (``jobs.triage``) and of a job whose every failure is a wait
(``jobs.waits``)."""

from __future__ import annotations

from collections import Counter
from datetime import datetime

from jobs import wording
from jobs.diagnosis import Symptom, TimelineEvent, ranks_text
from jobs.events import Event, JobEvents

TIMEOUT_LEAD = "raising the timeout would only make the next failure take longer"

SYMPTOM_WORDS = {  # (one rank, several ranks)
    "collective_timeout": ("timed out waiting in a collective", "timed out waiting in a collective"),
    "peer_closed": ("lost the connection to a peer", "lost the connection to a peer"),
    "killed_by_launcher": ("was stopped by the launcher (SIGTERM)", "were stopped by the launcher (SIGTERM)"),
    "process_abort": ("aborted itself after the collective failure", "aborted themselves after the collective failure"),
}


def clock(when: datetime | None) -> str:
    return f" at {when:%H:%M:%S}" if when else ""


def sort_key(event: Event) -> tuple[float, int]:
    return (event.time.timestamp() if event.time else float("inf"), event.order)


def rank_world(job: JobEvents) -> set[int]:
    ranks = set(job.ranks) | {x.rank for x in job.exits if x.rank is not None}
    if job.world_size and job.world_size <= 4096:
        ranks |= set(range(job.world_size))
    return ranks


def consequences_of(events: list[Event], exclude: Event | None) -> list[Symptom]:
    symptoms = []
    for category, ranks, where in symptom_groups(events, exclude):
        if category == "launcher_summary":
            symptoms.append(Symptom(category, [], "torchrun's failure summary (ChildFailedError)"))
            continue
        one, many = SYMPTOM_WORDS.get(category, (category, category))
        who = ranks_text(ranks) if ranks else "other ranks"
        words = one if len(ranks) == 1 else many
        symptoms.append(Symptom(category, ranks, f"{who} {words}{f' in {where}' if where else ''}"))
    return symptoms


def symptoms_in_chinese(events: list[Event], exclude: Event | None, rank: int | None = None) -> dict[str, str]:
    """The consequences and why they are not causes, in Chinese (``jobs.wording``), from the same events as the
    English sentences."""
    groups = symptom_groups(events, exclude)
    symptoms = [wording.symptom(category, ranks, where) for category, ranks, where in groups]
    told = [text for (category, _, _), text in zip(groups, symptoms, strict=True) if category != "launcher_summary"]
    summary = any(category == "launcher_summary" for category, _, _ in groups)
    return {"symptoms": "；".join(symptoms), "why": wording.why(rank, told, summary) if groups else ""}


def symptom_groups(events: list[Event], exclude: Event | None) -> list[tuple[str, list[int], str]]:
    """(category, ranks, where they waited) of every kind of consequence, the culprit's rank left out. Ranks that
    waited in different places (a mismatch: some in the loop's all_reduce, the others in the final barrier) are
    one group per place, the biggest first; ranks whose place the log does not say join the biggest."""
    by_category: dict[str, set[int]] = {}
    places: dict[str, dict[int, str]] = {}
    unranked: dict[str, Counter[str]] = {}
    for event in events:
        if event.kind != "symptom" or event is exclude:
            continue
        by_category.setdefault(event.category, set())
        if event.rank is not None:
            by_category[event.category].add(event.rank)
        if event.call or event.where:
            if event.rank is not None:
                places.setdefault(event.category, {}).setdefault(event.rank, waited_in(event))
            else:
                unranked.setdefault(event.category, Counter())[waited_in(event)] += 1
    groups: list[tuple[str, list[int], str]] = []
    culprit = exclude.rank if exclude is not None else None
    for category, ranks in by_category.items():
        ranks.discard(culprit)  # type: ignore[arg-type]
        if category == "launcher_summary":
            groups.append((category, [], ""))
            continue
        placed = places.get(category, {})
        members: dict[str, list[int]] = {}
        for rank in sorted(ranks):
            if rank in placed:
                members.setdefault(placed[rank], []).append(rank)
        if len(members) <= 1:
            counts = Counter(placed.values()) + unranked.get(category, Counter())
            groups.append((category, sorted(ranks), counts.most_common(1)[0][0] if counts else ""))
            continue
        biggest = max(members, key=lambda place: len(members[place]))
        members[biggest] += [rank for rank in ranks if rank not in placed]
        for place, group in sorted(members.items(), key=lambda item: (-len(item[1]), min(item[1]))):
            groups.append((category, sorted(group), place))
    return groups


def waited_in(event: Event) -> str:
    if event.call and event.where:
        return f"dist.{event.call} ({event.where})"
    return f"dist.{event.call}" if event.call else f"{event.func or 'code'} ({event.where})"


def timeline(events: list[Event], limit: int = 24) -> list[TimelineEvent]:
    seen: set[tuple[int | None, str]] = set()
    out = []
    for event in sorted(events, key=sort_key if all(e.time for e in events) else (lambda e: e.order)):
        key = (event.rank, event.category)
        if key in seen:
            continue
        seen.add(key)
        out.append(TimelineEvent(event.time.isoformat(timespec="milliseconds") if event.time else None,
                                 event.rank, f"{event.category}: {event.line[:160]}"))
    return out[:limit]


def why(root: Event | None, rank: int | None, symptoms: list[Symptom]) -> str:
    if not symptoms:
        return ""
    culprit = f"rank {rank}'s failure" if rank is not None else "that failure"
    parts = [s.summary for s in symptoms if s.category != "launcher_summary"]
    said = "; ".join(parts) if parts else "the launcher summarised the failure"
    named = ""
    if any(s.category == "launcher_summary" for s in symptoms):
        named = " torchrun's \"first observed failure\" is the first rank it saw exit, not necessarily the cause."
    return f"Then {said}: consequences of {culprit}, not causes; {TIMEOUT_LEAD}.{named}"


def collective_of(job: JobEvents) -> str | None:
    if not job.collectives:
        return None
    return Counter(job.collectives.values()).most_common(1)[0][0]
