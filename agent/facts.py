"""What traindoc found for one question before anything is written: the retrieved sections, the probe
findings, the job's diagnosis. The offline composer writes the answer from these facts; in explain mode a
model writes it from the same facts, numbered."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agent.answer import Citation, FindingView

if TYPE_CHECKING:
    from jobs.diagnosis import JobDiagnosis


@dataclass
class Facts:
    question: Any  # agent.core.Question
    citations: list[Citation]  # [] when nothing in the documents answers the question
    findings: list[FindingView]
    results: list[Any]  # the tools.base.ProbeResult the findings came from
    no_match: bool
    recognised: list[str]  # the failure families the question was recognised as
    errors: list[str]  # error lines of the input
    job: JobDiagnosis | None  # the log triage, or the live hang snapshot
    machine: str  # where the probes ran: "" for this machine, else the bundle's file name
    timings: dict[str, float] = field(default_factory=dict)
    started: float = 0.0  # perf_counter() when gathering began
    confidence: float | None = None  # that the first section answers (corpus.answerability)
    nearest: list[Citation] = field(default_factory=list)  # no_match: the closest sections, not answers
    runbook: Any = None  # runbooks.catalog.Runbook that leads the answer (agent.lead), in the asker's language
    lead: Any = None  # agent.leads.Lead: why that runbook leads
    several_jobs: tuple[Any, ...] = ()  # jobs.procs.JobListing: the jobs of this machine, none picked (ask --pid)
    unnamed_code: str = ""  # a team's error code the question names and no section shown does (agent.team_codes)
