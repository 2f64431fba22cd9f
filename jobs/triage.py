"""Causal triage of a distributed job's logs, as one pass: lines (``jobs.reader``) -> events
(``jobs.events``) -> the job's timeline (``jobs.timeline``) -> a verdict (the first reader of
``jobs.verdicts`` that knows this kind of job) -> words (``jobs.verdict.in_words``). The earliest real failure
is the root cause; collective timeouts, lost peers, the launcher's SIGTERM and its failure summary are
consequences; when every failure is a wait, the verdict names who the others waited for; a log that ends
without an error, for a job the user says hangs, is read as a hang.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import IO

from jobs.diagnosis import JobDiagnosis
from jobs.events import JobEvents, collect
from jobs.lines import LogLine
from jobs.reader import read_job
from jobs.timeline import timeline_of
from jobs.verdict import in_words
from jobs.verdicts import READERS


def triage_events(job: JobEvents, question: str = "") -> JobDiagnosis | None:
    timeline = timeline_of(job)
    for read in READERS:
        if (verdict := read(timeline, question)) is not None:
            return in_words(timeline, verdict)
    return None


def triage_lines(lines: Iterable[LogLine], question: str = "") -> JobDiagnosis | None:
    return triage_events(collect(lines), question)


def triage_paths(paths: Sequence[Path], question: str = "", stdin: IO[bytes] | None = None) -> JobDiagnosis | None:
    """The diagnosis of the job whose logs are ``paths`` (files, folders, .gz, "-" for ``stdin``)."""
    return triage_lines(read_job(paths, stdin), question)
