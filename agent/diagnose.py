"""Live diagnosis for `ask`: pick the probes a question needs, run them (or read a bundle made on
another machine), and turn their findings into the answer's typed findings."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from agent.answer import Citation, FindingView
from common.errors import InputError

# Bounded gaps: ``\s*`` on both sides of an optional ``=`` rescans a run of spaces from every point (quadratic).
PORT_MENTION = re.compile(r"(?:MASTER_PORT|port|端口)[ \t]{0,8}[=:：]?[ \t]{0,8}(\d{4,5})\b|:(\d{4,5})\b", re.IGNORECASE)
DEFAULT_PORT = 29500


@dataclass(frozen=True)
class ProbeRequest:
    text: str
    log_paths: tuple[Path, ...] = ()
    python: str | None = None
    bundle: Path | None = None
    output_dirs: tuple[Path, ...] = ()
    environ: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    timeout_s: float = 10.0


@dataclass(frozen=True)
class Diagnosis:
    results: list  # list[tools.base.ProbeResult]
    source: str  # "this machine" or the bundle's path

    def problems(self) -> list:
        return [(r, f) for r in self.results for f in r.findings if f.severity == "problem"]

    def boost_text(self) -> str:
        """Words of the problems found, to raise the document sections about them."""
        return " ".join(" ".join(f.topics) + " " + f.code.replace("_", " ").lower() for _, f in self.problems())


def ports_in(text: str, environ: Mapping[str, str]) -> tuple[int, ...]:
    found = [int(a or b) for a, b in PORT_MENTION.findall(text)]
    if environ.get("MASTER_PORT", "").isdigit():
        found.append(int(environ["MASTER_PORT"]))
    ports = [p for p in dict.fromkeys(found) if 1024 <= p <= 65535]
    return tuple(ports) or (DEFAULT_PORT,)


def diagnose(request: ProbeRequest) -> Diagnosis:
    if request.bundle is not None:
        from tools.report import BundleError, load_bundle

        try:
            return Diagnosis(load_bundle(request.bundle), str(request.bundle))
        except (OSError, BundleError) as exc:  # the message names the file and the field
            raise InputError(str(exc), hint="make it with `traindoc probe --json` on that machine") from exc

    from tools.registry import run_probes, select_probes

    names = select_probes(request.text)
    if request.log_paths and "log_grep" not in names:
        names.append("log_grep")
    if not names:
        return Diagnosis([], "this machine")
    return Diagnosis(run_probes(names, probe_context(request)), "this machine")


def probe_context(request: ProbeRequest):  # type: ignore[no-untyped-def]
    from tools.base import ProbeContext

    return ProbeContext(
        python=request.python,
        ports=ports_in(request.text, request.environ),
        log_paths=request.log_paths,
        allowed_roots=(),
        output_dirs=request.output_dirs or (Path.cwd(),),
        environ=request.environ,
        timeout_s=request.timeout_s,
    )


def available_probes(context) -> list[str]:  # type: ignore[no-untyped-def]
    """The probes that can run here (unavailable ones are not offered to a model)."""
    from tools.registry import PROBES

    names = []
    for name, spec in PROBES.items():
        try:
            ok, _ = spec.available(context)
        except Exception:  # an availability check that breaks means: not available
            ok = False
        if ok:
            names.append(name)
    return names


def relevant_results(diagnosis: Diagnosis, text: str) -> list:
    """From a bundle (every probe), keep the probes the question needs plus any that found a problem."""
    from tools.registry import select_probes

    wanted = set(select_probes(text))
    return [r for r in diagnosis.results if r.probe in wanted or any(f.severity == "problem" for f in r.findings)]


def finding_views(results: Sequence, citations: Sequence[Citation]) -> list[FindingView]:
    views: list[FindingView] = []
    for result in results:
        if not result.findings:
            views.append(FindingView(result.probe, str(result.status), result.status.upper(), result.summary, ""))
            continue
        for finding in result.findings:
            status = "problem" if finding.severity == "problem" else "info" if finding.severity == "info" else "ok"
            views.append(
                FindingView(
                    probe=result.probe, status=status, code=finding.code, summary=finding.summary,
                    evidence=finding.evidence, related=_related(finding, citations), fix=finding.fix,
                )
            )
    return views


def _related(finding, citations: Sequence[Citation]) -> list[int]:  # type: ignore[no-untyped-def]
    """Citations about the same thing: a topic in the section's headings, or two topics in its text."""
    terms = [t.lower() for t in finding.topics if len(t) >= 2]
    related = []
    for citation in citations:
        text = citation.text.lower()
        if any(t in citation.section.lower() for t in terms) or sum(t in text for t in terms) >= 2:
            related.append(citation.n)
    return related
