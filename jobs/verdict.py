"""The last two steps of reading a job (lines -> events -> timeline -> verdict -> words). A verdict reader
(``jobs.verdicts``) decides what happened: the root cause, the event that is it (left out of the
consequences), the rank the others' failures follow from, what to look at next. ``in_words`` then says it
once, in English and in Chinese: the consequences (``jobs.consequences``), why they are not causes, the
timeline.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from jobs.consequences import consequences_of, symptoms_in_chinese, timeline_entries, why
from jobs.diagnosis import JobDiagnosis, RootCause
from jobs.events import Event
from jobs.picture.lanes import picture_of
from jobs.timeline import JobTimeline


@dataclass(frozen=True)
class Verdict:
    root: RootCause
    chinese: str  # ``root.summary`` in Chinese
    culprit: Event | None = None  # the event that is the cause: no consequence of itself
    blamed: int | None = None  # the rank whose failure the others' follow from (none in a mismatch)
    next_evidence: list[tuple[str, str]] = field(default_factory=list)  # (English, Chinese): what would tell more
    search_lines: list[str] = field(default_factory=list)  # the lines documents are retrieved for
    consequences: bool = True  # a log that only stops (a hang) has none to tell
    explains: bool = True  # the consequences follow from a failure it names (not when none stands out)


def in_words(timeline: JobTimeline, verdict: Verdict) -> JobDiagnosis:
    chinese = {"root": verdict.chinese}
    if verdict.next_evidence:
        chinese["next"] = "\n".join(zh for _, zh in verdict.next_evidence)
    symptoms, entries, said = [], [], ""
    if verdict.consequences:
        events = timeline.events
        symptoms = consequences_of(events, verdict.culprit)
        entries = timeline_entries(events)
        in_chinese = symptoms_in_chinese(events, verdict.culprit, verdict.blamed)
        if verdict.explains:
            said = why(verdict.blamed, symptoms, events)
        else:
            in_chinese["why"] = ""
        chinese = in_chinese | chinese
    return JobDiagnosis(
        "log", verdict.root, symptoms, entries, sorted(timeline.world), said, timeline.collective,
        [english for english, _ in verdict.next_evidence], verdict.search_lines, wording={"zh": chinese},
        picture=picture_of(timeline, verdict.culprit, verdict.blamed),
    )
