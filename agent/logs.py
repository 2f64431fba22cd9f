"""Reading the user's logs (`ask --log`, repeatable, files or folders, .gz, or stdin) as one job.

One streamed pass feeds both the job triage (which rank failed first) and the error-line collector
(what retrieval matches against the documents), in bounded memory.
"""

from __future__ import annotations

import io
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from common.errors import InputError
from corpus.errorlines import ErrorLineCollector
from jobs.diagnosis import JobDiagnosis
from jobs.events import EventCollector
from jobs.reader import read_job
from jobs.signatures import exit_report
from jobs.triage import triage_events, triage_lines

HEAD_CHARS = 4000
# What every torchrun start prints before any training code runs (torch/distributed/run.py: the OMP_NUM_THREADS
# notice framed in asterisks, under the logger's prefix, which jobs.reader strips where it is glog's): a log holding
# only this says nothing about its job, and its words ("overloaded", "optimal performance") would match a section
# about slow training.
LAUNCH_BANNER = re.compile(r"^\s*(?:\*{5,}|WARNING:torch\.distributed\.run:)\s*$"
                           r"|Setting OMP_NUM_THREADS environment variable for each process to be")


@dataclass(frozen=True)
class LogReading:
    head: str  # the opening of the text, for a log without error lines
    errors: list[str]  # the distinct error lines, tracebacks' last lines first
    diagnosis: JobDiagnosis | None  # the job read as a whole


def read_logs(paths: Sequence[Path], stdin: IO[bytes] | None = None, question: str = "") -> LogReading:
    """Read every log of the job once. ``paths`` may hold "-" for ``stdin``; a missing or mostly
    binary file is an ``InputError`` naming it."""
    from jobs.recorded_stacks import MAX_CHARS, diagnosis_from_dump, looks_like_dump

    events, collector, head = EventCollector(), ErrorLineCollector(), list[str]()
    size = 0
    dump: list[str] | None = []  # the text, while it may be a recorded stack dump (bounded)
    dumped = 0
    for line in read_job(paths, stdin):
        if size < HEAD_CHARS and not LAUNCH_BANNER.search(line.text):
            head.append(line.text[: HEAD_CHARS - size] + "\n")
            size += len(head[-1])
        if dump is not None:
            dump.append(line.text)
            dumped += len(line.text) + 1
            if dumped > MAX_CHARS or (len(dump) == 80 and not looks_like_dump(dump)):
                dump = None
        events.feed(line)
        collector.feed(line.text)
    diagnosis = triage_events(events.result(), question)
    silent = diagnosis is None or (diagnosis.root_cause is not None and not diagnosis.symptoms
                                   and diagnosis.root_cause.category in ("unknown", "rendezvous"))
    if silent and dump and looks_like_dump(dump):  # py-spy or faulthandler stacks: where each process waits
        diagnosis = diagnosis_from_dump("\n".join(dump)) or diagnosis
    return LogReading("".join(head), collector.result(), diagnosis)


def pasted_job(text: str) -> JobDiagnosis | None:
    """The job a question's pasted log lines show: a cascade (a root cause, or the rank the others waited for, and
    its consequences: timeouts, lost peers, the launcher's SIGTERM or its failure summary), or a root cause of a kind
    triage names (NCCL's interface warnings, a CUDA error in a library's format, the launcher's own argument error)
    even with nothing after it; one line only where it is a launcher's exit report ("exits with return code = -7":
    SIGBUS). A lone error of no named kind, or a question in prose, is left to retrieval; a
    question's words are never read as a hang (the text is the question, not a log that stopped)."""
    if "\n" not in text.strip() and exit_report(text) is None:
        return None  # one line holds no cascade, unless it is a launcher's report of how a rank ended (its signal)
    try:
        diagnosis = triage_lines(read_job([Path("-")], io.BytesIO(text.encode("utf-8", errors="replace"))))
    except InputError:  # a question that does not read as text (control bytes): it is still a question, not a log
        return None
    if diagnosis is None or diagnosis.root_cause is None:
        return None
    if not diagnosis.symptoms and diagnosis.root_cause.category in ("exception", "unknown", "rendezvous"):
        # One error line of a kind no triage names (retrieval reads it as well), or prose that says the job stopped
        # ("训练到一半就不动了"), which the log reader would take for a log that ends at the launch.
        return None
    return diagnosis


def read_log(path: Path, question: str = "") -> LogReading:
    return read_logs([path], question=question)


def read_stream(stream: IO[bytes], question: str = "") -> LogReading:
    return read_logs([Path("-")], stream, question)


def long_question(text: str) -> tuple[str, LogReading] | None:
    """A question past the cap (``corpus.errorlines.split_long_question``) is a pasted log: read through the job
    reader, every line bounded, never dropped. (What the asker asked: their opening words, else the job's root
    cause, else its first error line; the log read as one job.)"""
    from corpus.errorlines import split_long_question

    if (split := split_long_question(text)) is None:
        return None
    words, paste = split
    reading = read_stream(io.BytesIO(paste.encode("utf-8", errors="replace")), words)
    job = reading.diagnosis
    named = job.root_cause.summary if job and job.root_cause and job.root_cause.category != "unknown" else ""
    first = reading.errors[0] if reading.errors else reading.head.strip().split("\n", 1)[0]
    return (words or named or first)[:2000], reading

