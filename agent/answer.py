"""The typed answer every front end renders. ``to_json()`` is the `ask --json` schema."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from common.language import Lang
from common.textsafe import printable_json

if TYPE_CHECKING:
    from jobs.diagnosis import JobDiagnosis


RUNBOOK = re.compile(r"(?:^|/)runbooks/[a-z]{2}/[\w-]+\.md$")


@dataclass(frozen=True)
class Citation:
    n: int
    source: str
    section: str
    chunk_id: str
    score: float
    text: str = ""
    lang: str | None = None  # the language of ``text`` when it is a rendering of the section ("en"); None: as written
    title: str = ""  # the section's heading in the text shown (a rendering's); "" : the section path's last heading
    advice: tuple[Any, ...] = ()  # advice.review.Flag: what traindoc corrected or marked in ``text``
    notes: tuple[str, ...] = ()  # section-wide notes: whose advice it is, curated corrections

    @property
    def named(self) -> str:
        """The cited section as a reader names it: its heading, then the document's title (or "traindoc runbook"),
        never the file's hash-named name."""
        path = [part.strip() for part in self.section.split(" > ") if part.strip()]
        heading = self.title or (path[-1] if path else self.source.rsplit("/", 1)[-1])
        if RUNBOOK.search(self.source):
            return f"{heading} (traindoc runbook)"
        document = path[0] if len(path) > 1 else ""
        return f"{heading} — {document}" if document and document != heading else heading

    @property
    def cited_as(self) -> str:
        """The section as a source list names it: the original's heading path, and the language of the text
        shown when it is a rendering (``... > 问题：NCCL 超时 [en]``)."""
        return f"{self.section} [{self.lang}]" if self.lang else self.section


@dataclass(frozen=True)
class FindingView:
    probe: str
    status: str
    code: str
    summary: str
    evidence: str
    related: list[int] = field(default_factory=list)
    fix: str = ""
    explains: bool = False  # a problem whose subject is what the question asks about: it is the verdict


@dataclass
class Answer:
    question: str
    answer: str
    citations: list[Citation]
    findings: list[FindingView]
    no_match: bool
    backend: str = "offline"
    timings_ms: dict[str, float] = field(default_factory=dict)
    error_lines: list[str] = field(default_factory=list)
    recognised: list[str] = field(default_factory=list)
    id: str | None = None
    steps: list[dict[str, Any]] | None = None  # agent mode: each tool call, its arguments, a short result
    grounded: bool | None = None  # agent mode: whether any citation survived grounding
    notice: str | None = None  # e.g. "model unreachable: offline answer"
    diagnosis: JobDiagnosis | None = None  # the job read as a whole (log triage or live hang snapshot)
    confidence: float | None = None  # 0..1, that the first cited section answers (no_match: that the nearest does)
    mode: str | None = None  # with a model: "agent" (it called the tools) or "explain" (it wrote from traindoc's facts)
    # The cause, where, the first fix and the confidence (an agent.summary.Verdict): set by ask() on every answer.
    verdict: Any = None
    lead: Any = None  # agent.leads.Lead: which runbook kind leads, the rule that decided and the words it rests on
    lang: Lang = None  # type: ignore[assignment]  # the asker's language, decided once (agent.intake); None: the question's
    unnamed_code: str = ""  # a team's error code the question names and no document does (agent.team_codes)
    brief: str = ""  # the answer people finish (agent.brief): what front ends show first; "" : ``answer`` is short
    failure: Any = None  # incidents.signature.Failure: what identifies this failure (set by ask(); None: nothing does)
    incidents: list[dict[str, Any]] = field(default_factory=list)  # resolved incidents it matches (incidents.recall)

    def __post_init__(self) -> None:
        if self.lang is None:  # an answer built by hand (a test, a button's record): the question's language
            from common.language import language_of

            self.lang = language_of(self.question)

    @property
    def shown(self) -> str:
        """What a front end shows by default: the brief where the whole answer is longer."""
        return self.brief or self.answer

    def sources(self, full: bool) -> list[Citation]:
        """The sources a front end lists: every one with the whole answer; with the brief, those it cites."""
        if full or self.shown == self.answer:
            return list(self.citations)
        from agent.brief import cited

        numbers = set(cited(self.shown, [c.n for c in self.citations]))
        return [c for c in self.citations if c.n in numbers]

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {}
        if self.id is not None:
            data["id"] = self.id
        data.update(
            question=self.question,
            answer=self.answer,
            brief=self.brief or self.answer,
            citations=[
                {k: v for k, v in asdict(c).items() if k not in ("text", "title", "advice", "notes")}
                | {"score": round(c.score, 4), "named": c.named} | ({"notes": list(c.notes)} if c.notes else {})
                for c in self.citations
            ],
            findings=[asdict(f) for f in self.findings],
            no_match=self.no_match,
            language=self.lang,
            confidence=None if self.confidence is None else round(self.confidence, 3),
            backend=self.backend,
            timings_ms={k: round(v, 1) for k, v in self.timings_ms.items()},
        )
        # Every command traindoc corrected, left out or marked in what it showed, with the reason and the source.
        data["advice"] = [{"citation": c.n, **flag.to_json()} for c in self.citations for flag in c.advice]
        data["diagnosis"] = self.diagnosis.to_json() if self.diagnosis is not None else None
        data["verdict"] = self.verdict.to_json() if self.verdict is not None else None
        data["lead"] = None if self.lead is None else {"kind": self.lead.kind, "rule": self.lead.rule,
                                                         "because": self.lead.because}
        data["failure"] = self.failure.to_json() if self.failure is not None else None
        data["incidents"] = list(self.incidents)  # this cluster saw the failure before: when, where, what fixed it
        if self.steps is not None:
            data["steps"] = self.steps
        if self.grounded is not None:
            data["grounded"] = self.grounded
        if self.mode is not None:
            data["mode"] = self.mode
        if self.notice:
            data["notice"] = self.notice
        # Shown as it is: a right-to-left override or a zero-width space from a log reads as <U+202E> (common.textsafe).
        return printable_json(data)
