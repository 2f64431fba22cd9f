"""A job in which something failed of its own accord (an exception, an OOM, a crash, a kill nobody else sent):
the earliest such failure is the root cause; everything after it is a consequence (the first verdict reader)."""

from __future__ import annotations

import re

from common.language import Lang, say
from jobs.codes import meanings
from jobs.diagnosis import RootCause, clip
from jobs.events import Event
from jobs.timeline import JobTimeline, sort_key
from jobs.verdict import Verdict
from jobs.wording import both, clock, pair

# What to look at next for a kind whose fix is on the machine, not in the code or the documents (phrase keys).
CHECKS = {
    "host_oom": ("jobs.check.host_oom.dmesg", "jobs.check.host_oom.limit", "jobs.check.host_oom.holders"),
}
NEAR = 400  # lines: how far apart a logged message and the traceback it is printed with may be


def read(timeline: JobTimeline, question: str) -> Verdict | None:
    roots = timeline.roots
    if not roots:
        return None
    first = _earliest(roots)
    same_rank = [e for e in roots if e.rank == first.rank]
    chosen = _the_error(first, same_rank)
    ranks_with_it = {e.rank for e in roots if e.category == chosen.category and e.rank is not None}
    every = len(ranks_with_it) >= 2 and ranks_with_it >= timeline.world
    rank = None if every else chosen.rank
    # The line that names the cause, where the error itself does not: what its message continues with (NCCL's
    # "Last error: Bootstrap : no socket interface found"), and NCCL's warnings on the same rank just before it.
    warned = [e.line for e in same_rank if "NCCL WARN" in e.line and 0 < chosen.order - e.order < 200][-2:]
    naming = list(dict.fromkeys([*chosen.detail, *warned]))
    summary, chinese = both(_summary, chosen, every)
    root = RootCause(
        category=chosen.category, rank=rank, summary=summary, host=chosen.host,
        evidence=[chosen.line, *chosen.frames[-3:], *naming], where=chosen.where, confidence=_confidence(chosen, roots),
    )
    checks = [pair(key) for key in CHECKS.get(chosen.category, ())]
    return Verdict(root, chinese, culprit=chosen, blamed=rank, next_evidence=checks, search_lines=[chosen.line, *naming])


def _earliest(events: list[Event]) -> Event:
    """By time when every candidate has one (files of different ranks), else in reading order."""
    if all(e.time for e in events):
        return min(events, key=sort_key)
    return min(events, key=lambda e: e.order)


def _the_error(first: Event, same_rank: list[Event]) -> Event:
    """The event that says the failure best: a specific error over the generic exception it raised, the raised
    traceback over the message logged before it, with the user's frame from the chained traceback next to it."""
    specific = [e for e in same_rank if e.category != "exception" and abs(e.order - first.order) < NEAR]
    chosen = min(specific, key=lambda e: e.order) if specific and first.category == "exception" else first
    if not chosen.frames:  # a logged message ("out of memory, skipping the batch") with the traceback printed after it
        raised = [e for e in same_rank if e.summary == chosen.summary and e.frames and 0 < e.order - chosen.order < NEAR]
        if raised:
            exception = min(raised, key=lambda e: e.order)
            exception.time = exception.time or chosen.time
            chosen = exception
    if chosen.where is None:  # a chained exception: the user's frame is in the traceback printed next
        near = [e for e in same_rank if e.where and abs(e.order - chosen.order) < NEAR]
        if near:
            donor = min(near, key=lambda e: abs(e.order - chosen.order))
            chosen.where, chosen.func, chosen.frames = donor.where, donor.func, chosen.frames or donor.frames
    return chosen


def _raised(event: Event) -> bool:
    return event.category == "exception" or bool(re.match(r"^[\w.]+(Error|Exception)\b", event.line))


def _summary(lang: Lang, event: Event, every: bool) -> str:
    """"rank 1 on node3 raised KeyError: 'x' in collate (train.py:9) at 10:01:02" in ``lang``."""
    if every:
        who = say("jobs.every_rank", lang)
    else:
        who = say("jobs.rank", lang, rank=event.rank) if event.rank is not None else say("jobs.the_job", lang)
    host = say("jobs.on_host", lang, host=event.host) if event.host and not every else ""
    place = ""
    if event.where:
        place = (say("jobs.root.in_function", lang, func=event.func, where=event.where)
                 if event.func and event.func != "<module>" else say("jobs.root.at", lang, where=event.where))
    line = (event.line_zh if lang == "zh" else "") or event.line  # the line as printed, or its words in Chinese
    verb = say("jobs.root.raised" if _raised(event) else "jobs.root.reported", lang)
    meaning = _meaning(event)
    return say("jobs.root", lang, who=who, host=host, verb=verb, line=clip(line), place=place, clock=clock(event.time, lang),
               meaning=say("jobs.root.meaning", lang, meaning=meaning) if meaning else "")


def _meaning(event: Event) -> str:
    """What the line means where it does not say it (an argparse error: whose parser; a missing interface: which
    variable; a CUDA error code: what it is), after the line as printed (the English summary says it; the Chinese one leaves it out)."""
    if event.meaning:
        return event.meaning
    if event.category == "cuda_error" and (codes := meanings([event.line, *event.detail], most=1)):
        return codes[0].said("en")
    return ""


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
