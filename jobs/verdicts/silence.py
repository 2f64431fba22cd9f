"""A log that stops without an error, for a job the user says hangs (or whose last line says so): a wait at
rendezvous when no rank printed anything after the launch, else a hang the log alone cannot place."""

from __future__ import annotations

import re

from jobs.diagnosis import HANG_WORDS, RootCause
from jobs.timeline import JobTimeline
from jobs.verdict import Verdict
from jobs.verdicts.waits import NEXT_EVIDENCE
from jobs.wording import pair

LAUNCH_WORDS = re.compile(r"(?i)Starting elastic_operator|rendezvous|torchrun|torch\.distributed\.run|Using nproc_per_node|master_addr")


def read(timeline: JobTimeline, question: str) -> Verdict | None:
    job = timeline.job
    if not (HANG_WORDS.search(question) or (job.lines and not timeline.events and HANG_WORDS.search(job.last_line))):
        return None
    last = job.last_line or ""
    launched_only = job.worker_lines == 0 and LAUNCH_WORDS.search(last) is not None
    if launched_only or (job.worker_lines == 0 and job.lines > 0):
        summary, chinese = pair("jobs.silence.rendezvous")
        root = RootCause("rendezvous", None, summary, evidence=[last[:240]] if last else [], confidence=0.5)
    else:
        summary, chinese = pair("jobs.silence.no_error", last=last[:160])
        root = RootCause("unknown", None, summary, evidence=[last[:240]] if last else [], confidence=0.2)
    return Verdict(root, chinese, next_evidence=[pair(key) for key in NEXT_EVIDENCE],
                   search_lines=["hang " + last[:200]], consequences=False)
