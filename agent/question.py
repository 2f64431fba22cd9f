"""The question as ``ask()`` reads it: what was asked, the logs read as one job, the turn it follows up on and the
asker's language (built by agent.intake, the one intake every front end calls)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.conversation import Context
from common.language import Lang, language_of
from jobs.diagnosis import UNCATALOGUED, JobDiagnosis, only_if_quoted, search_terms


@dataclass
class Question:
    text: str
    log_head: str = ""
    log_errors: list[str] = field(default_factory=list)
    id: str | None = None
    probes: bool = True
    log_paths: tuple[Path, ...] = ()
    python: str | None = None  # the interpreter the user's training runs with
    bundle: Path | None = None  # diagnose from a `traindoc probe --json` bundle instead of this machine
    history: list[dict[str, Any]] = field(default_factory=list)  # earlier turns, oldest first (agent.conversation)
    job: JobDiagnosis | None = None  # the attached logs read as one job (agent.logs.read_logs)
    follows: Context | None = None  # set by agent.intake: the earlier turn this question follows up on
    lang: Lang | None = None  # the asker's language, decided once by agent.intake (None: not through it yet)
    pid: int | None = None  # the job on this machine a live hang snapshot reads (several may run)

    @property
    def language(self) -> Lang:
        return self.lang if self.lang is not None else language_of(self.text)

    def asked(self) -> str:
        """What the asker has said: a follow-up's words after those it follows up on (the first question, the
        diagnosis, the follow-ups since), so its new detail ("and on 8 nodes?") is read with what it refers to."""
        return self.text if self.follows is None else f"{self.follows.text()}\n{self.text}"

    def has_own_log(self) -> bool:
        return bool(self.log_head or self.log_errors or self.log_paths or self.bundle or self.job)

    def evidence_lines(self) -> list[str]:
        """The lines retrieval is driven by: the root cause's, when the job's logs name one, not the loudest."""
        if self.job is not None and self.job.root_cause is not None and self.job.search_lines:
            category = self.job.root_cause.category
            if category == "unknown":
                return self.log_errors
            # A failure kind's name brings its vocabulary ("oom", "port in use"); a catch-all brings only noise.
            return list(self.job.search_lines) if category in UNCATALOGUED else search_terms(category, self.job.search_lines)
        return self.log_errors

    def needs_a_quote(self) -> bool:
        """The job failed with an exception no signature knows (its words, "error", "training", are every section's
        words), or with a kind whose words another kind shares (``only_if_quoted``): only a section that quotes
        its error answers."""
        if self.job is None and not self.log_errors:
            from agent.uncatalogued import uncatalogued_exception

            return uncatalogued_exception(self.text)  # a pasted error: the same rule (agent/uncatalogued.py)
        if self.job is None or self.job.root_cause is None or not self.job.search_lines:
            return False
        category = self.job.root_cause.category
        return category in UNCATALOGUED or only_if_quoted(category)  # or a kind whose words another kind shares

    def search_text(self) -> str:
        """What retrieval sees: the question, then the log's error lines (they carry the signal).

        A follow-up ("how do I fix it?") is read after what it follows up on (``follows``, set by ``ask()``)."""
        parts = [self.text]
        if self.follows is not None:
            parts.insert(0, self.follows.text())
        if evidence := self.evidence_lines():
            parts.append("\n".join(evidence))
        elif self.log_head:
            parts.append(self.log_head)
        return "\n".join(p for p in parts if p.strip())
