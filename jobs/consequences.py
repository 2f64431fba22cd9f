"""The consequences of a job's failure, in words: which ranks timed out, lost a peer, were stopped by the
launcher, grouped by where they waited; the timeline; why they are not causes (in English and in Chinese).
The words step of the job reader (``jobs.verdict.in_words``) is their one caller.
"""

from __future__ import annotations

import re
from collections import Counter

from common.language import say
from jobs import wording
from jobs.diagnosis import Symptom, TimelineEvent
from jobs.events import Event
from jobs.timeline import sort_key, waited_in

# Launcher lines that report an exit in words other than torchrun's failure summary.
OTHER_LAUNCHERS = re.compile(r"srun: |exits with return code|Child process with PID|CalledProcessError|exited on signal|"
                             r"ProcessExitedException")


def _torchrun_table(line: str) -> bool:
    """torchrun's ChildFailedError table, whose "first observed failure" the note of ``why`` is about."""
    return not OTHER_LAUNCHERS.search(line) and "failed (exitcode" not in line


def _report(events: list[Event]) -> str:
    """The phrase that names the launcher's report of the exit."""
    reports = [e.line for e in events if e.category == "launcher_summary"]
    if any(_torchrun_table(line) for line in reports):
        return "jobs.symptom.launcher_summary"
    if any("failed (exitcode" in line for line in reports):
        return "jobs.symptom.launcher_summary.exit"
    return "jobs.symptom.launcher_summary.other"


def consequences_of(events: list[Event], exclude: Event | None) -> list[Symptom]:
    report = _report(events)
    return [Symptom(category, ranks, wording.symptom(category, ranks, where, "en", report))
            for category, ranks, where in symptom_groups(events, exclude)]


def symptoms_in_chinese(events: list[Event], exclude: Event | None, rank: int | None = None) -> dict[str, str]:
    """The consequences and why they are not causes, in Chinese (``jobs.wording``), from the same events as the
    English sentences."""
    groups = symptom_groups(events, exclude)
    symptoms = [wording.symptom(category, ranks, where, "zh") for category, ranks, where in groups]
    told = [text for (category, _, _), text in zip(groups, symptoms, strict=True) if category != "launcher_summary"]
    summary = any(category == "launcher_summary" for category, _, _ in groups) and any(
        e.category == "launcher_summary" and _torchrun_table(e.line) for e in events)
    return {"symptoms": say("jobs.clause_sep", "zh").join(symptoms),
            "why": wording.why(rank, told, summary, "zh") if groups else ""}


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


def timeline_entries(events: list[Event], limit: int = 24) -> list[TimelineEvent]:
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


def why(rank: int | None, symptoms: list[Symptom], events: list[Event]) -> str:
    """Why the consequences (``consequences_of(events, ...)``) are not causes."""
    if not symptoms:
        return ""
    parts = [s.summary for s in symptoms if s.category != "launcher_summary"]
    summary = any(s.category == "launcher_summary" for s in symptoms) and _report(events) == "jobs.symptom.launcher_summary"
    return wording.why(rank, parts, summary, "en")
