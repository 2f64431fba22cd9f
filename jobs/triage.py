"""Causal triage of a distributed job's logs: the earliest real failure is the root cause; collective
timeouts, lost peers, the launcher's SIGTERM and its failure summary are consequences.

When every failure is a timeout, the ranks that did not time out (or were stopped while the others
waited) are the suspects, and the collective the others waited in is named. A log that ends without
an error, for a job the user says hangs, is read as a hang.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from datetime import datetime
from pathlib import Path
from typing import IO

from jobs import wording
from jobs.diagnosis import JobDiagnosis, RootCause, Symptom, TimelineEvent, clip, ranks_text
from jobs.events import SIGNALS, Event, JobEvents, collect
from jobs.lines import LogLine
from jobs.reader import read_job

HANG_WORDS = re.compile(r"(?i)\b(?:hang|hangs|hanging|hung|stuck|freez\w*|no progress|not progressing|deadlock\w*)\b|卡住|卡死|挂起|不动")
LAUNCH_WORDS = re.compile(r"(?i)Starting elastic_operator|rendezvous|torchrun|torch\.distributed\.run|Using nproc_per_node|master_addr")
TIMEOUT_LEAD = "raising the timeout would only make the next failure take longer"
NEXT_EVIDENCE = [
    "a stack snapshot of every rank while it hangs: `traindoc hang` on the node (or `--debug-server URL` "
    "when the job runs torch.distributed.debug.start_debug_server)",
    "Flight Recorder dumps: TORCH_NCCL_TRACE_BUFFER_SIZE=2000 TORCH_NCCL_DUMP_ON_TIMEOUT=1 "
    "TORCH_FR_DUMP_TEMP_FILE=$PWD/fr/nccl_trace_rank_, then `traindoc hang --fr-dir fr/`",
    "TORCH_DISTRIBUTED_DEBUG=DETAIL (collective fingerprints: which rank called what)",
    "NCCL_DEBUG=INFO (NCCL's own view of each rank's connections)",
]
EVERY_RANKS_LOG = ("every rank's log, not only these lines: `ask --log DIR` reads a whole job's logs (torchrun's "
                   "--log-dir, each node's files) and finds the rank that failed first")
SYMPTOM_WORDS = {  # (one rank, several ranks)
    "collective_timeout": ("timed out waiting in a collective", "timed out waiting in a collective"),
    "peer_closed": ("lost the connection to a peer", "lost the connection to a peer"),
    "killed_by_launcher": ("was stopped by the launcher (SIGTERM)", "were stopped by the launcher (SIGTERM)"),
    "process_abort": ("aborted itself after the collective failure", "aborted themselves after the collective failure"),
}


def _clock(when: datetime | None) -> str:
    return f" at {when:%H:%M:%S}" if when else ""


def _sort_key(event: Event) -> tuple[float, int]:
    return (event.time.timestamp() if event.time else float("inf"), event.order)


def _earliest(events: list[Event]) -> Event:
    """By time when every candidate has one (files of different ranks), else in reading order."""
    if all(e.time for e in events):
        return min(events, key=_sort_key)
    return min(events, key=lambda e: e.order)


def _attribute(job: JobEvents) -> None:
    """Give unattributed root events the rank that failed by itself, when exactly one did."""
    failed = {x.rank for x in job.exits if x.rank is not None and x.code is not None and x.code > 0}
    failed |= {x.rank for x in job.exits if x.rank is not None and x.code in (-7, -9, -11)}
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
        name = SIGNALS.get(-x.code, f"signal {-x.code}")
        line = f"exitcode {x.code} ({name})" + (f": {x.note}" if x.note else "")
        if x.code == -15 or x.code == -6:
            kind, category = "symptom", "killed_by_launcher" if x.code == -15 else "process_abort"
        elif x.code == -7:
            kind, category = "root", "dataloader_worker"
        elif x.code == -11:
            kind, category = "root", "native_crash"  # a segfault: native code (an extension, a driver, a library)
        else:
            kind, category = "root", "host_oom"  # SIGKILL nobody else sent: usually the kernel's OOM killer
        summary = f"killed by {name}"
        if x.code == -9:  # said where it is shown: a bare "exitcode -9" reads as a mystery
            summary += (", usually by the kernel's OOM killer: host RAM ran out (`dmesg -T | grep -i 'killed process'`"
                        " shows it), else the scheduler or a user sent it")
            line += f": {summary}"
        events.append(Event(order=10**9 + index, kind=kind, category=category, summary=summary,
                            line=line, rank=x.rank, host=x.host, time=x.time))
    return events


def _rank_world(job: JobEvents) -> set[int]:
    ranks = set(job.ranks) | {x.rank for x in job.exits if x.rank is not None}
    if job.world_size and job.world_size <= 4096:
        ranks |= set(range(job.world_size))
    return ranks


def _raised(event: Event) -> bool:
    return event.category == "exception" or bool(re.match(r"^[\w.]+(Error|Exception)\b", event.line))


def _root_summary(event: Event, every: bool) -> str:
    who = "every rank" if every else (f"rank {event.rank}" if event.rank is not None else "the job")
    host = f" on {event.host}" if event.host and not every else ""
    place = ""
    if event.where:
        place = f" in {event.func} ({event.where})" if event.func and event.func != "<module>" else f" at {event.where}"
    verb = "raised" if _raised(event) else "reported"
    return f"{who}{host} {verb} {clip(event.line)}{place}{_clock(event.time)}"


def _symptoms(events: list[Event], exclude: Event | None) -> list[Symptom]:
    symptoms = []
    for category, ranks, where in _symptom_groups(events, exclude):
        if category == "launcher_summary":
            symptoms.append(Symptom(category, [], "torchrun's failure summary (ChildFailedError)"))
            continue
        one, many = SYMPTOM_WORDS.get(category, (category, category))
        who = ranks_text(ranks) if ranks else "other ranks"
        words = one if len(ranks) == 1 else many
        symptoms.append(Symptom(category, ranks, f"{who} {words}{f' in {where}' if where else ''}"))
    return symptoms


def _symptoms_in_chinese(events: list[Event], exclude: Event | None, rank: int | None = None) -> dict[str, str]:
    """The consequences and why they are not causes, in Chinese (``jobs.wording``), from the same events as the
    English sentences."""
    groups = _symptom_groups(events, exclude)
    symptoms = [wording.symptom(category, ranks, where) for category, ranks, where in groups]
    told = [text for (category, _, _), text in zip(groups, symptoms, strict=True) if category != "launcher_summary"]
    summary = any(category == "launcher_summary" for category, _, _ in groups)
    return {"symptoms": "；".join(symptoms), "why": wording.why(rank, told, summary) if groups else ""}


def _symptom_groups(events: list[Event], exclude: Event | None) -> list[tuple[str, list[int], str]]:
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
                places.setdefault(event.category, {}).setdefault(event.rank, _waited_in(event))
            else:
                unranked.setdefault(event.category, Counter())[_waited_in(event)] += 1
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


def _waited_in(event: Event) -> str:
    if event.call and event.where:
        return f"dist.{event.call} ({event.where})"
    return f"dist.{event.call}" if event.call else f"{event.func or 'code'} ({event.where})"


def _timeline(events: list[Event], limit: int = 24) -> list[TimelineEvent]:
    seen: set[tuple[int | None, str]] = set()
    out = []
    for event in sorted(events, key=_sort_key if all(e.time for e in events) else (lambda e: e.order)):
        key = (event.rank, event.category)
        if key in seen:
            continue
        seen.add(key)
        out.append(TimelineEvent(event.time.isoformat(timespec="milliseconds") if event.time else None,
                                 event.rank, f"{event.category}: {event.line[:160]}"))
    return out[:limit]


def _why(root: Event | None, rank: int | None, symptoms: list[Symptom]) -> str:
    if not symptoms:
        return ""
    culprit = f"rank {rank}'s failure" if rank is not None else "that failure"
    parts = [s.summary for s in symptoms if s.category != "launcher_summary"]
    said = "; ".join(parts) if parts else "the launcher summarised the failure"
    named = ""
    if any(s.category == "launcher_summary" for s in symptoms):
        named = " torchrun's \"first observed failure\" is the first rank it saw exit, not necessarily the cause."
    return f"Then {said}: consequences of {culprit}, not causes; {TIMEOUT_LEAD}.{named}"


def _confidence(root: Event, others: list[Event]) -> float:
    score = 0.55
    if root.rank is not None:
        score += 0.15
    if root.where or root.frames:
        score += 0.1
    if root.category != "exception":
        score += 0.1
    if any(e.kind == "root" and e.rank not in (None, root.rank) for e in others):
        score -= 0.2  # other ranks failed on their own too
    return round(max(0.1, min(score, 0.95)), 2)


def _from_root(job: JobEvents, roots: list[Event], events: list[Event]) -> JobDiagnosis:
    first = _earliest(roots)
    same_rank = [e for e in roots if e.rank == first.rank]
    specific = [e for e in same_rank if e.category != "exception" and abs(e.order - first.order) < 400]
    chosen = min(specific, key=lambda e: e.order) if specific and first.category == "exception" else first
    if not chosen.frames:  # a logged message ("out of memory, skipping the batch") with the traceback printed after it
        raised = [e for e in same_rank if e.summary == chosen.summary and e.frames and 0 < e.order - chosen.order < 400]
        if raised:
            exception = min(raised, key=lambda e: e.order)
            exception.time = exception.time or chosen.time
            chosen = exception
    if chosen.where is None:  # a chained exception: the user's frame is in the traceback printed next
        near = [e for e in same_rank if e.where and abs(e.order - chosen.order) < 400]
        if near:
            donor = min(near, key=lambda e: abs(e.order - chosen.order))
            chosen.where, chosen.func, chosen.frames = donor.where, donor.func, chosen.frames or donor.frames
    ranks_with_it = {e.rank for e in roots if e.category == chosen.category and e.rank is not None}
    world = _rank_world(job)
    every = len(ranks_with_it) >= 2 and ranks_with_it >= world
    rank = None if every else chosen.rank
    symptoms = _symptoms(events, chosen)
    evidence = [chosen.line] + [f for f in chosen.frames[-3:]]
    root = RootCause(
        category=chosen.category, rank=rank, summary=_root_summary(chosen, every), host=chosen.host,
        evidence=evidence, where=chosen.where, confidence=_confidence(chosen, roots),
    )
    return JobDiagnosis(
        kind="log", root_cause=root, symptoms=symptoms, timeline=_timeline(events), ranks=sorted(world),
        why_consequences=_why(chosen, rank, symptoms), collective=_collective(job),
        search_lines=[chosen.line], next_evidence=[], wording={"zh": _symptoms_in_chinese(events, chosen, rank)
                                                   | {"root": wording.root_summary(chosen, every, _raised(chosen))}},
    )


def _collective(job: JobEvents) -> str | None:
    if not job.collectives:
        return None
    return Counter(job.collectives.values()).most_common(1)[0][0]


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
    first = min(timed, key=_sort_key)
    others = [e for e in first_per_rank.values() if e is not first]
    limit = _timeout_ms(first)
    for other in others:
        after = other.time or other.not_before
        if after is None or first.time is None or after <= first.time:
            return None
        if limit is None or _timeout_ms(other) in (None, limit):
            return None
    return first


def _from_symptoms(job: JobEvents, events: list[Event]) -> JobDiagnosis:
    """Every failure is a timeout or a consequence: look for the rank that is not like the others."""
    world = _rank_world(job)
    waited = {e.rank for e in events if e.category in ("collective_timeout", "peer_closed") and e.rank is not None}
    stopped = {e.rank for e in events if e.category == "killed_by_launcher" and e.rank is not None}
    calls: dict[int, str] = {}
    for event in events:
        if event.category == "collective_timeout" and event.rank is not None and (event.call or event.where):
            calls.setdefault(event.rank, _waited_in(event))
    first = _first_of_groups(events) if len(set(calls.values())) > 1 else None
    symptoms = _symptoms(events, first)
    collective = _collective(job)
    suspects = (world - waited) or (stopped - waited)
    if first is not None and first.rank is not None:
        others = sorted(r for r in calls if r != first.rank)
        other_calls = sorted({c for r, c in calls.items() if r != first.rank})
        limits = sorted({ms for e in events if e.rank in others and (ms := _timeout_ms(e)) is not None})
        first_ms = _timeout_ms(first) or 0
        summary = (f"rank {first.rank} timed out first{_clock(first.time)}, in {calls.get(first.rank, 'a collective')} "
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
            lost_in = Counter(_waited_in(e) for e in events if e.category == "peer_closed" and (e.call or e.where))
            where = lost_in.most_common(1)[0][0] if lost_in else where
            summary = (f"{ranks_text(suspects)} stopped without an error of its own, while {ranks_text(waited)} lost the "
                       f"connection to a peer in {where}: {ranks_text(suspects)} most likely died (killed by a signal: the "
                       f"OOM killer's SIGKILL, a segfault; the launcher's console or `dmesg -T` names it)")
            evidence = f"{ranks_text(waited)} lost the connection to a peer in {where}"
            chinese = wording.died_quietly(sorted(suspects), where, sorted(waited))
        root = RootCause("straggler", rank, summary, evidence=[evidence], confidence=0.65 if rank is not None else 0.45)
    else:
        where = collective or (Counter(calls.values()).most_common(1)[0][0] if calls else "a collective")
        return _none_stands_out(job, events, sorted(waited), where, symptoms, first)
    # In a mismatch every rank's wait follows from the mismatch, the odd rank's own included: no rank "failed".
    culprit = None if root.category == "collective_mismatch" else root.rank
    said = _symptoms_in_chinese(events, first, culprit) | {"root": chinese, "next": "\n".join(wording.NEXT_EVIDENCE[:2])}
    return JobDiagnosis("log", root, symptoms, _timeline(events), sorted(world), _why(None, culprit, symptoms),
                        collective, list(NEXT_EVIDENCE[:2]), [e.line for e in events if e.kind == "symptom"][:2],
                        wording={"zh": said})


def _left_the_loop(minority_call: str, majority_call: str) -> str | None:
    """Which side ("minority" / "majority") waits in a barrier while the other waits in another collective: a
    barrier is where ranks meet outside the step (the end of an epoch or of training, a checkpoint)."""
    in_minority, in_majority = "barrier" in minority_call, "barrier" in majority_call
    if in_minority == in_majority:
        return None
    return "minority" if in_minority else "majority"


def _none_stands_out(job: JobEvents, events: list[Event], waited: list[int], where: str, symptoms: list[Symptom],
                     first: Event | None) -> JobDiagnosis:
    """Every rank the logs show timed out alike. Logs of some ranks only (a paste, one node's files) say which
    ranks, not "every rank", and ask for the others' logs first: the rank that failed first is in them."""
    partial = not job.world_size or len(waited) < job.world_size
    if partial and len(waited) == 1:
        summary = (f"{ranks_text(waited)} timed out in {where} and these logs show no other rank: they cannot tell which "
                   f"rank it waited for (one that failed or fell behind first, or a network fault)")
    else:
        who = f"{ranks_text(waited)} (every rank these logs show)" if partial and waited else "every rank"
        summary = (f"{who} timed out in {where} and none stands out: the logs cannot tell which rank is "
                   f"behind (a network fault, or a rank stuck inside the same collective)")
    root = RootCause("unknown", None, summary, evidence=[e.line for e in events[:2]], confidence=0.2)
    shown = waited if partial else None
    chinese = wording.one_rank_timed_out(waited[0], where) if partial and len(waited) == 1 else \
        wording.none_stands_out(where, shown)
    ask_more = partial and len(waited) < 2
    said = _symptoms_in_chinese(events, first) | {
        "root": chinese, "next": "\n".join(([wording.EVERY_RANKS_LOG] if ask_more else []) + wording.NEXT_EVIDENCE)}
    return JobDiagnosis("log", root, symptoms, _timeline(events), sorted(_rank_world(job)), "", _collective(job),
                        ([EVERY_RANKS_LOG] if ask_more else []) + list(NEXT_EVIDENCE), [e.line for e in events[:3]],
                        wording={"zh": said})


def _hang(job: JobEvents) -> JobDiagnosis:
    launched_only = job.worker_lines == 0 and LAUNCH_WORDS.search(job.last_line or "") is not None
    if launched_only or (job.worker_lines == 0 and job.lines > 0):
        summary = ("the log stops after the launch with no output from any rank: the launcher is most likely "
                   "waiting at rendezvous for nodes (or ranks) that never joined")
        root = RootCause("rendezvous", None, summary, evidence=[job.last_line[:240]] if job.last_line else [], confidence=0.5)
        chinese = wording.RENDEZVOUS
    else:
        summary = (f"the log ends without an error while the job hangs; the last line was: {job.last_line[:160]!r}. "
                   "The log alone cannot tell where each rank waits")
        root = RootCause("unknown", None, summary, evidence=[job.last_line[:240]] if job.last_line else [], confidence=0.2)
        chinese = wording.ended_without_error(job.last_line or "")
    return JobDiagnosis("log", root, [], [], sorted(_rank_world(job)), "", _collective(job), list(NEXT_EVIDENCE),
                        ["hang " + (job.last_line[:200] if job.last_line else "")],
                        wording={"zh": {"root": chinese, "next": "\n".join(wording.NEXT_EVIDENCE)}})


def triage_events(job: JobEvents, question: str = "") -> JobDiagnosis | None:
    _attribute(job)
    events = sorted(job.events + _exit_events(job), key=lambda e: e.order)
    roots = [e for e in events if e.kind == "root"]
    if roots:
        return _from_root(job, roots, events)
    if any(e.category in ("collective_timeout", "peer_closed") for e in events):
        return _from_symptoms(job, events)
    if HANG_WORDS.search(question) or (job.lines and not events and HANG_WORDS.search(job.last_line)):
        return _hang(job)
    if events:
        return _from_symptoms(job, events)
    return None


def triage_lines(lines: Iterable[LogLine], question: str = "") -> JobDiagnosis | None:
    return triage_events(collect(lines), question)


def triage_paths(paths: Sequence[Path], question: str = "", stdin: IO[bytes] | None = None) -> JobDiagnosis | None:
    """The diagnosis of the job whose logs are ``paths`` (files, folders, .gz, "-" for ``stdin``)."""
    return triage_lines(read_job(paths, stdin), question)
