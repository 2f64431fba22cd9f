"""The agent's tools: document search and the available probes, with the loop's safeguards.

Every tool output is capped (with a request for a narrower call), goes through the redactor before
the model sees it, and is recorded, so grounding can check citations against what was actually
retrieved or probed. An identical repeated call is answered from the first result.
"""

from __future__ import annotations

import json
import logging
import threading
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from advice.review import review, with_notes
from agent.events import EventSink, StepFinished, StepStarted, ignore
from common.language import language_of
from common.redaction import Redactor

MAX_TOOL_OUTPUT = 3500
log = logging.getLogger(__name__)


@dataclass
class Step:
    tool: str
    args: dict[str, Any]
    result: str
    cached: bool = False
    number: int = 0  # the StepStarted number: steps are listed in the order they started


@dataclass
class Toolbox:
    retriever: Any  # corpus.retrieval.Retriever
    probe_context: Any | None  # tools.base.ProbeContext, None when probes are off
    redactor: Redactor
    probe_names: list[str] = field(default_factory=list)
    job: Any | None = None  # jobs.diagnosis.JobDiagnosis of the attached logs
    hang_timeout_s: float = 10.0
    on_event: EventSink = ignore
    top_k: int = 5
    steps: list[Step] = field(default_factory=list)
    chunks: dict[str, Any] = field(default_factory=dict)  # chunk_id -> Hit actually shown to the model
    probes: dict[str, Any] = field(default_factory=dict)  # probe name -> ProbeResult actually shown
    live_job: Any | None = None  # the hang snapshot, when the model took one
    _cache: dict[str, str] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _started: int = 0

    # -- safeguards -------------------------------------------------------------
    def _call(self, tool: str, args: dict[str, Any], work: Any) -> str:
        key = f"{tool}:{json.dumps(args, sort_keys=True, default=str)}"
        with self._lock:
            self._started += 1
            step_number = self._started
            cached = self._cache.get(key)
        self.on_event(StepStarted(step_number, tool, args))
        if cached is not None:
            output = cached + "\n(same call as before: this is the earlier result; do not repeat it)"
        else:
            try:
                output = str(work())
            except Exception as exc:  # a tool error is data for the model, never a crash of the loop
                output = f"ERROR calling {tool}({args}): {type(exc).__name__}: {exc}"
            output = self.redactor.redact(output)  # before any cut: a cut token would slip past
            if len(output) > MAX_TOOL_OUTPUT:
                output = output[:MAX_TOOL_OUTPUT] + (
                    f"\n[output capped at {MAX_TOOL_OUTPUT} characters: make a narrower call]"
                )
        with self._lock:
            self._cache.setdefault(key, output)
            self.steps.append(Step(tool, args, output[:300], cached is not None, step_number))
        self.on_event(StepFinished(step_number, tool, self.redactor.restore(output[:300]), cached is not None))
        return output

    # -- tools ------------------------------------------------------------------
    def search_docs(self, query: str) -> str:
        def work() -> str:
            # The documents and traindoc's runbooks are searched apart (as ask() does): the best runbook that
            # answers, then the documents' sections.
            result = self.retriever.search(query, k=self.top_k, among="documents")
            runbook = self.retriever.search(query, k=1, among="runbooks")
            hits = ([] if runbook.no_match else runbook.hits[:1]) + ([] if result.no_match else result.hits)
            if not hits:
                return "NO MATCH: the troubleshooting documents do not cover this. Say so; do not guess."
            blocks = []
            for hit in hits:
                original = self.retriever.original(hit.chunk.source)  # a rendering is cited as its original
                self.chunks.setdefault(hit.chunk.chunk_id, replace(hit, chunk=replace(hit.chunk, source=original)))
                checked = review(hit.chunk.text[:900], original, hit.chunk.section, language_of(query), question=query)
                text = with_notes(checked.text, checked.notes)  # never stale advice
                name = Path(original).name
                blocks.append(f"[doc:{hit.chunk.chunk_id}] {name} › {hit.chunk.section}\n{text}")
            return "\n\n".join(blocks)

        return self._call("search_docs", {"query": query}, work)

    def run_probe(self, name: str, port: int | None = None, path: str | None = None) -> str:
        def work() -> str:
            from tools.registry import run_probes

            context = self.probe_context
            if context is None:
                return f"REFUSED: probes are turned off for this question; {name} did not run"
            if port:
                context = replace(context, ports=(int(port),))
            if name == "log_grep" and path:
                allowed = {str(p) for p in context.log_paths}
                if path not in allowed:
                    return f"REFUSED: log_grep may read only the files the user gave: {', '.join(sorted(allowed)) or 'none'}"
                context = replace(context, log_paths=(Path(path),))
            (result,) = run_probes([name], context)
            self.probes[name] = result
            lines = [f"[probe:{name}] status={result.status}: {result.summary}"]
            for finding in result.findings:
                lines.append(f"- {finding.code} ({finding.severity}): {finding.summary}; evidence: {_cut(finding.evidence, 300)}")
                if finding.fix:
                    lines.append(f"  fix: {finding.fix}")
            return "\n".join(lines)

        args: dict[str, Any] = {}
        if port:
            args["port"] = port
        if path:
            args["path"] = path
        return self._call(name, args, work)

    def job_triage(self) -> str:
        def work() -> str:
            if self.job is None:
                return "NO LOGS: the user attached no job logs to triage"
            return self._record_job("job_triage", self.job)

        return self._call("job_triage", {}, work)

    def hang_snapshot(self, pid: int = 0) -> str:
        def work() -> str:
            from jobs.hang import snapshot_job

            if self.probe_context is None:
                return "REFUSED: probes are turned off for this question; no snapshot was taken"
            diagnosis = snapshot_job(pid or None, timeout_s=self.hang_timeout_s)
            if diagnosis is None:
                return "NO JOB: no training processes run on this machine"
            self.live_job = diagnosis
            return self._record_job("hang_snapshot", diagnosis)

        return self._call("hang_snapshot", {"pid": pid} if pid else {}, work)

    def _record_job(self, name: str, diagnosis: Any) -> str:
        """The diagnosis as a probe-like result, so it can be cited as [probe:NAME] and grounded."""
        from jobs.render import diagnosis_text
        from tools.base import Finding, ProbeResult, Status

        root = diagnosis.root_cause
        finding = Finding(f"ROOT_CAUSE_{root.category.upper()}" if root else "NO_ROOT_CAUSE", "problem",
                          root.summary if root else "no failure found", "; ".join(root.evidence[:3]) if root else "")
        self.probes[name] = ProbeResult(name, Status.PROBLEM if root else Status.OK, finding.summary, (finding,))
        return f"[probe:{name}]\n" + diagnosis_text(diagnosis)

    def langchain_tools(self) -> list[Any]:
        from langchain_core.tools import StructuredTool

        tools = [
            StructuredTool.from_function(
                func=self.search_docs, name="search_docs",
                description="Search the troubleshooting documents (Chinese and English). Returns sections, each "
                "headed by its id [doc:ID]; cite them with that id. Query with the error message or the symptom.",
            )
        ]
        if self.job is not None:
            tools.append(StructuredTool.from_function(
                func=self.job_triage, name="job_triage",
                description="The attached job logs read as a whole: which rank failed first (the root cause), which "
                "errors are only consequences (timeouts, lost peers, SIGTERM), the timeline. Call it first when logs "
                "are attached. Cite it as [probe:job_triage].",
            ))
        if self.probe_context is not None:
            tools.append(StructuredTool.from_function(
                func=self.hang_snapshot, name="hang_snapshot",
                description="Read-only stack snapshot of every rank of a hung training job on this machine (py-spy): "
                "which ranks wait in which collective, which rank is elsewhere. pid: the launcher or a worker, 0 for "
                "all. Cite it as [probe:hang_snapshot].",
            ))
        from tools.registry import PROBES

        for name in self.probe_names:
            spec = PROBES[name]
            tools.append(_probe_tool(self, name, spec.description))
        return tools


def _cut(text: str, limit: int) -> str:
    """Shorten at a whitespace boundary, so no token is cut in half (and so escapes redaction)."""
    if len(text) <= limit:
        return text
    head = text[:limit]
    return (head.rsplit(None, 1)[0] if " " in head else "") + " …"


def _probe_tool(toolbox: Toolbox, name: str, description: str) -> Any:
    from langchain_core.tools import StructuredTool

    if name == "port_check":
        def port_check(port: int = 0) -> str:
            return toolbox.run_probe(name, port=port or None)

        func: Any = port_check
    elif name == "log_grep":
        def log_grep(path: str) -> str:
            return toolbox.run_probe(name, path=path)

        func = log_grep
    else:
        def run() -> str:
            return toolbox.run_probe(name)

        func = run
    return StructuredTool.from_function(
        func=func, name=name, description=f"{description} Results are headed [probe:{name}]; cite them with that id."
    )
