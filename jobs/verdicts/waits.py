"""When every failure of a job is a wait (collective timeouts, lost peers, the launcher's SIGTERM): who the
others waited for. The rank that timed out first in another process group, ranks that waited in different
collectives (a mismatch; uneven inputs when one side is in a barrier), ranks that never reached the
collective or went away without a word; when none stands out, what would tell."""

from __future__ import annotations

import re
from collections import Counter

from jobs import wording
from jobs.diagnosis import RootCause, ranks_text
from jobs.events import Event
from jobs.timeline import JobTimeline, clock, sort_key, waited_in
from jobs.verdict import Verdict

NEXT_EVIDENCE = [
    "a stack snapshot of every rank while it hangs: `traindoc hang` on the node (or `--debug-server URL` "
    "when the job runs torch.distributed.debug.start_debug_server)",
    "Flight Recorder dumps: TORCH_FR_BUFFER_SIZE=2000 TORCH_NCCL_DUMP_ON_TIMEOUT=1 "
    "TORCH_FR_DUMP_TEMP_FILE=$PWD/fr/nccl_trace_rank_, then `traindoc hang --fr-dir fr/`",
    "TORCH_DISTRIBUTED_DEBUG=DETAIL (collective fingerprints: which rank called what)",
    "NCCL_DEBUG=INFO (NCCL's own view of each rank's connections)",
]
EVERY_RANKS_LOG = ("every rank's log, not only these lines: `ask --log DIR` reads a whole job's logs (torchrun's "
                   "--log-dir, each node's files) and finds the rank that failed first")


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
        first_ms = _timeout_ms(first) or 0
        summary = (f"rank {first.rank} timed out first{clock(first.time)}, in {calls.get(first.rank, 'a collective')} "
                   f"(timeout {first_ms / 1000:g} s); {ranks_text(others)} {'was' if len(others) == 1 else 'were'} still "
                   f"waiting then, in {' and '.join(other_calls)} of another process group (timeout "
                   f"{', '.join(f'{ms / 1000:g}' for ms in limits)} s), which rank {first.rank} never reached: rank "
                   f"{first.rank} is the straggler (its own collective did not complete: a long GPU kernel queued before "
                   f"it, a hang in its other group, or other code), the others waited for it")
        root = RootCause("straggler", first.rank, summary, host=first.host,
                         evidence=[first.line[:240]] + [f"rank {r}: {c}" for r, c in sorted(calls.items())],
                         where=first.where, confidence=0.6)
        chinese = wording.first_timed_out(first.rank, first.time, calls.get(first.rank, "一个集合通信"), first_ms / 1000,
                                          others, other_calls, [ms / 1000 for ms in limits])
    elif len(set(calls.values())) > 1:
        counts = Counter(calls.values())
        minority_call = min(counts, key=lambda c: counts[c])
        minority = sorted(r for r, c in calls.items() if c == minority_call)
        rank = minority[0] if len(minority) == 1 else None
        majority_call = max(counts, key=lambda c: counts[c])
        summary = (f"ranks waited in different collectives: {ranks_text(minority)} in {minority_call}, the others in "
                   f"{majority_call}: the ranks do not call the same collectives in the same order")
        finished = _left_the_loop(minority_call, majority_call)
        if finished is not None:
            done, busy = ("the others", ranks_text(minority)) if finished == "majority" else (ranks_text(minority), "the others")
            summary += (f"; {done}, in the barrier, had most likely left their loop while {busy} still trained: a "
                        "different number of batches per rank (uneven inputs: one DistributedSampler over the whole "
                        "dataset with drop_last, or torch.distributed.algorithms.Join, evens them), or a collective "
                        "only some ranks call")
        root = RootCause("collective_mismatch", rank, summary, evidence=[f"rank {r}: {c}" for r, c in sorted(calls.items())],
                         confidence=0.6)
        chinese = wording.mismatch(minority, minority_call, majority_call, finished)
    elif waited and len(suspects) >= 1 and len(suspects) < max(2, len(world)):
        rank = min(suspects) if len(suspects) == 1 else None
        where = Counter(calls.values()).most_common(1)[0][0] if calls else (collective or "a collective")
        state = " and was stopped by the launcher" if suspects <= stopped else ""
        if any(e.category == "collective_timeout" for e in events):
            summary = (f"{ranks_text(suspects)} never reached {where}{state}, while {ranks_text(waited)} waited there and "
                       f"timed out: {ranks_text(suspects)} is the straggler (slow, stuck or in other code)")
            evidence = f"{ranks_text(waited)} timed out in {where}"
            chinese = wording.never_reached(sorted(suspects), where, bool(state), sorted(waited))
        else:  # no one timed out: the peers' connections to it closed, it went away without a word
            lost_in = Counter(waited_in(e) for e in events if e.category == "peer_closed" and (e.call or e.where))
            where = lost_in.most_common(1)[0][0] if lost_in else where
            summary = (f"{ranks_text(suspects)} stopped without an error of its own, while {ranks_text(waited)} lost the "
                       f"connection to a peer in {where}: {ranks_text(suspects)} most likely died (killed by a signal: the "
                       f"OOM killer's SIGKILL, a segfault; the launcher's console or `dmesg -T` names it)")
            evidence = f"{ranks_text(waited)} lost the connection to a peer in {where}"
            chinese = wording.died_quietly(sorted(suspects), where, sorted(waited))
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
    return list(zip(NEXT_EVIDENCE, wording.NEXT_EVIDENCE, strict=True))


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
    how = "timed out" if timed_out else "lost the connection to a peer"
    at = f" in {where}" if where else (" in a collective" if timed_out else "")
    if partial and len(waited) == 1:
        summary = (f"{ranks_text(waited)} {how}{at} and these logs show no other rank: they cannot tell which "
                   f"rank it waited for (one that failed or fell behind first, or a network fault)")
    else:
        who = f"{ranks_text(waited)} (every rank these logs show)" if partial and waited else "every rank"
        summary = (f"{who} {how}{at} and none stands out: the logs cannot tell which rank is "
                   f"behind (a network fault, or a rank stuck inside the same collective)")
    root = RootCause("unknown", None, summary, evidence=[e.line for e in events[:2]], confidence=0.2)
    shown = waited if partial else None
    chinese = wording.one_rank_timed_out(waited[0], where, timed_out) if partial and len(waited) == 1 else \
        wording.none_stands_out(where, shown, timed_out)
    ask_more = [(EVERY_RANKS_LOG, wording.EVERY_RANKS_LOG)] if partial and len(waited) < 2 else []
    return Verdict(root, chinese, culprit=first, next_evidence=ask_more + _next_evidence(),
                   search_lines=[e.line for e in events[:3]], explains=False)
