"""When every failure of a job is a wait (collective timeouts, lost peers, the launcher's SIGTERM): who the
others waited for. The rank that timed out first in another process group, ranks that waited in different
collectives (a mismatch; uneven inputs when one side is in a barrier), ranks that never reached the
collective or went away without a word; when none stands out, what would tell."""

from __future__ import annotations

import re
from collections import Counter

from common.language import Lang, say
from jobs.diagnosis import RootCause, ranks_text
from jobs.events import Event
from jobs.timeline import JobTimeline, sort_key, waited_in
from jobs.verdict import Verdict
from jobs.wording import both, clock, pair, rank_names

NEXT_EVIDENCE = ("jobs.next.stacks", "jobs.next.flight_recorder", "jobs.next.detail", "jobs.next.nccl_debug")  # phrase keys
# How ranks waited, by (they timed out, the logs say where): phrase keys.
WAITED = {(True, True): "jobs.waited.timed_out_in", (True, False): "jobs.waited.timed_out",
          (False, True): "jobs.waited.lost_in", (False, False): "jobs.waited.lost"}
TIMEOUT_MS = re.compile(r"Timeout\(ms\)=(?P<a>\d+)|[Tt]imed out waiting (?P<b>\d+) ?ms|timeout of (?P<c>\d+) ?ms")


def _timeout_ms(event: Event) -> int | None:
    match = TIMEOUT_MS.search(event.line)
    return int(next(v for v in match.groups() if v)) if match else None


def _first_of_groups(events: list[Event]) -> Event | None:
    """The rank that timed out first, when the others provably timed out later and in another process group.

    Ranks that wait in different collectives of one group have called them out of order (a mismatch), and
    they time out together. A different timeout value is a different process group; when the earliest
    timeout (by its own time) precedes every other rank's (by its time, or the last time its process
    printed before it), the others were still waiting, in a collective the first rank never reached."""
    first_per_rank: dict[int, Event] = {}
    for event in events:
        if event.category == "collective_timeout" and event.rank is not None:
            first_per_rank.setdefault(event.rank, event)
    timed = [e for e in first_per_rank.values() if e.time is not None]
    if len(first_per_rank) < 2 or not timed:
        return None
    first = min(timed, key=sort_key)
    others = [e for e in first_per_rank.values() if e is not first]
    limit = _timeout_ms(first)
    for other in others:
        after = other.time or other.not_before
        if after is None or first.time is None or after <= first.time:
            return None
        if limit is None or _timeout_ms(other) in (None, limit):
            return None
    return first


def read(timeline: JobTimeline, question: str) -> Verdict | None:
    """Every failure is a timeout or a consequence: look for the rank that is not like the others."""
    events, world = timeline.events, timeline.world
    if not any(e.category in ("collective_timeout", "peer_closed") for e in events):
        return None
    waited = {e.rank for e in events if e.category in ("collective_timeout", "peer_closed") and e.rank is not None}
    stopped = {e.rank for e in events if e.category == "killed_by_launcher" and e.rank is not None}
    calls: dict[int, str] = {}
    for event in events:
        if event.category == "collective_timeout" and event.rank is not None and (event.call or event.where):
            calls.setdefault(event.rank, waited_in(event))
    first = _first_of_groups(events) if len(set(calls.values())) > 1 else None
    collective = timeline.collective
    suspects = (world - waited) or (stopped - waited)
    if first is not None and first.rank is not None:
        others = sorted(r for r in calls if r != first.rank)
        other_calls = sorted({c for r, c in calls.items() if r != first.rank})
        limits = sorted({ms for e in events if e.rank in others and (ms := _timeout_ms(e)) is not None})
        summary, chinese = both(_first_timed_out, first, calls.get(first.rank), others, other_calls,
                                [ms / 1000 for ms in limits])
        root = RootCause("straggler", first.rank, summary, host=first.host,
                         evidence=[first.line[:240]] + [f"rank {r}: {c}" for r, c in sorted(calls.items())],
                         where=first.where, confidence=0.6)
    elif len(set(calls.values())) > 1:
        counts = Counter(calls.values())
        minority_call = min(counts, key=lambda c: counts[c])
        minority = sorted(r for r, c in calls.items() if c == minority_call)
        rank = minority[0] if len(minority) == 1 else None
        majority_call = max(counts, key=lambda c: counts[c])
        summary, chinese = both(_mismatch, minority, minority_call, majority_call,
                                _left_the_loop(minority_call, majority_call))
        root = RootCause("collective_mismatch", rank, summary, evidence=[f"rank {r}: {c}" for r, c in sorted(calls.items())],
                         confidence=0.6)
    elif waited and len(suspects) >= 1 and len(suspects) < max(2, len(world)):
        rank = min(suspects) if len(suspects) == 1 else None
        where = Counter(calls.values()).most_common(1)[0][0] if calls else (collective or "a collective")
        if any(e.category == "collective_timeout" for e in events):
            summary, chinese = both(_never_reached, suspects, where, suspects <= stopped, waited)
            evidence = f"{ranks_text(waited)} timed out in {where}"
        else:  # no one timed out: the peers' connections to it closed, it went away without a word
            lost_in = Counter(waited_in(e) for e in events if e.category == "peer_closed" and (e.call or e.where))
            where = lost_in.most_common(1)[0][0] if lost_in else where
            summary, chinese = both(_died_quietly, suspects, where, waited)
            evidence = f"{ranks_text(waited)} lost the connection to a peer in {where}"
        root = RootCause("straggler", rank, summary, evidence=[evidence], confidence=0.65 if rank is not None else 0.45)
    else:
        lost_in = Counter(waited_in(e) for e in events if e.category == "peer_closed" and (e.call or e.where))
        places = Counter(calls.values()) or lost_in
        where = collective or (places.most_common(1)[0][0] if places else "")
        return _none_stands_out(timeline, sorted(waited), where, first)
    # In a mismatch every rank's wait follows from the mismatch, the odd rank's own included: no rank "failed".
    blamed = None if root.category == "collective_mismatch" else root.rank
    return Verdict(root, chinese, culprit=first, blamed=blamed, next_evidence=_next_evidence()[:2],
                   search_lines=[e.line for e in events if e.kind == "symptom"][:2])


def _next_evidence() -> list[tuple[str, str]]:
    return [pair(key) for key in NEXT_EVIDENCE]


def _first_timed_out(lang: Lang, first: Event, call: str | None, others: list[int], other_calls: list[str],
                     limits: list[float]) -> str:
    """The rank that timed out first, in another process group than the others' (``_first_of_groups``)."""
    return say("jobs.waits.first_timed_out", lang, rank=first.rank, clock=clock(first.time, lang),
               call=call or say("jobs.a_collective", lang), seconds=(_timeout_ms(first) or 0) / 1000,
               others=rank_names(others, lang), was=say("jobs.was" if len(others) == 1 else "jobs.were", lang),
               calls=say("jobs.list_and", lang).join(other_calls),
               limits=say("jobs.list_sep", lang).join(f"{s:g}" for s in limits))


def _mismatch(lang: Lang, minority: list[int], minority_call: str, majority_call: str, finished: str | None) -> str:
    said = say("jobs.waits.mismatch", lang, minority=rank_names(minority, lang), minority_call=minority_call,
               majority_call=majority_call)
    if finished is None:
        return said
    names, others = rank_names(minority, lang), say("jobs.the_others", lang)
    done, busy = (others, names) if finished == "majority" else (names, others)
    return said + say("jobs.waits.left_the_loop", lang, done=done, busy=busy)


def _never_reached(lang: Lang, suspects: set[int], where: str, stopped: bool, waited: set[int]) -> str:
    return say("jobs.waits.never_reached", lang, suspects=rank_names(suspects, lang), where=where,
               stopped=say("jobs.waits.stopped_by_launcher", lang) if stopped else "", waited=rank_names(waited, lang))


def _died_quietly(lang: Lang, suspects: set[int], where: str, waited: set[int]) -> str:
    return say("jobs.waits.died_quietly", lang, suspects=rank_names(suspects, lang), where=where,
               waited=rank_names(waited, lang))


def _left_the_loop(minority_call: str, majority_call: str) -> str | None:
    """Which side ("minority" / "majority") waits in a barrier while the other waits in another collective: a
    barrier is where ranks meet outside the step (the end of an epoch or of training, a checkpoint)."""
    in_minority, in_majority = "barrier" in minority_call, "barrier" in majority_call
    if in_minority == in_majority:
        return None
    return "minority" if in_minority else "majority"


def _none_stands_out(timeline: JobTimeline, waited: list[int], where: str, first: Event | None) -> Verdict:
    """Every rank the logs show timed out (or lost its peers) alike. Logs of some ranks only (a paste, one node's
    files) say which ranks, not "every rank", and ask for the others' logs first: the rank that failed first is
    in them."""
    world_size = timeline.job.world_size
    partial = not world_size or len(waited) < world_size
    events = timeline.events
    timed_out = any(e.category == "collective_timeout" for e in events)
    summary, chinese = both(_alike, waited, where, partial, timed_out)
    root = RootCause("unknown", None, summary, evidence=[e.line for e in events[:2]], confidence=0.2)
    ask_more = [pair("jobs.next.every_ranks_log")] if partial and len(waited) < 2 else []
    return Verdict(root, chinese, culprit=first, next_evidence=ask_more + _next_evidence(),
                   search_lines=[e.line for e in events[:3]], explains=False)


def _alike(lang: Lang, waited: list[int], where: str, partial: bool, timed_out: bool) -> str:
    """Every rank the logs show waited alike: which ones, and that the logs cannot tell more."""
    how = say(WAITED[timed_out, bool(where)], lang, where=where)
    if partial and len(waited) == 1:
        return say("jobs.waits.alone", lang, who=rank_names(waited, lang), waited=how)
    who = say("jobs.waits.every_rank_shown", lang, ranks=rank_names(waited, lang)) if partial and waited else \
        say("jobs.every_rank", lang)
    return say("jobs.waits.none_stands_out", lang, who=who, waited=how)
