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
# A port is named (MASTER_PORT=, --master_port, port 29500, 端口) or follows a host (127.0.0.1:29500, node-1:29500,
# [::1]:29500); a number after a source file (ProcessGroupNCCL.cpp:2271, train.py:1858) is a line, never a port.
PORT_MENTION = re.compile(
    r"(?:\bMASTER_PORT|(?<![A-Za-z])port|端口)[ \t]{0,8}[=:：]?[ \t]{0,8}(\d{4,5})\b"
    r"|(?<![\w.-])((?:\d{1,3}\.){3}\d{1,3}|\[[0-9A-Fa-f:]{2,39}\]|[A-Za-z][\w-]{0,62}(?:\.[A-Za-z][\w-]{0,62}){0,6}):(\d{4,5})\b",
    re.IGNORECASE,
)
SOURCE_FILE = re.compile(r"\.(?:c|cc|cpp|cxx|cu|cuh|h|hpp|hh|py|pyx|rs|go|java|js|ts|so|inl)$", re.IGNORECASE)
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
    """The ports the text names, MASTER_PORT's, and torchrun's default unless MASTER_PORT says otherwise."""
    found = [int(named or after) for named, host, after in PORT_MENTION.findall(text)
             if named or not SOURCE_FILE.search(host)]
    explicit = environ.get("MASTER_PORT", "").strip()
    if explicit.isdigit():
        found.append(int(explicit))
    else:
        found.append(DEFAULT_PORT)
    return tuple(p for p in dict.fromkeys(found) if 1024 <= p <= 65535) or (DEFAULT_PORT,)


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


SITE_PACKAGES = re.compile(r'File "(?P<prefix>/[^"\n]{1,300}?)/lib/python3\.\d+/(?:site|dist)-packages/')
LOG_HEAD_BYTES = 2 * 2**20
LOG_FILES = 32


def _log_files(paths: Sequence[Path]) -> list[Path]:
    files: list[Path] = []
    for path in paths:
        if path.is_file():
            files.append(path)
        elif path.is_dir():
            files.extend(sorted(p for p in path.rglob("*.log") if p.is_file())[:LOG_FILES])
    return files[:LOG_FILES]


def job_python(log_paths: Sequence[Path]) -> str | None:
    """The interpreter the job ran with, where its logs show it: the prefix of the site-packages a traceback
    names (``/opt/conda/envs/train/lib/python3.10/site-packages/...``), when that interpreter exists here."""
    for path in _log_files(log_paths):
        try:
            with path.open("rb") as handle:
                head = handle.read(LOG_HEAD_BYTES).decode("utf-8", "replace")
        except OSError:
            continue
        for line in head.splitlines():
            match = SITE_PACKAGES.search(line[:2048])
            if match:
                candidate = Path(match["prefix"]) / "bin" / "python"
                if candidate.is_file() and os.access(candidate, os.X_OK):
                    return str(candidate)
    return None


def running_job_python(proc_root: Path = Path("/proc")) -> str | None:
    """The interpreter of the one training job running on this machine (its rank's argv[0], as its launcher
    started it, so a venv stays a venv), when there is exactly one and that interpreter exists here."""
    from jobs.procs import find_jobs

    try:
        jobs = [job for job in find_jobs(proc_root, timeout_s=1.0) if job.workers]
    except OSError:
        return None
    if len(jobs) != 1:
        return None  # none, or several: which one the question is about is not known
    argv0 = jobs[0].workers[0].argv[0] if jobs[0].workers[0].argv else ""
    path = Path(argv0)
    if path.is_absolute() and "python" in path.name and path.is_file() and os.access(path, os.X_OK):
        return str(path)
    return None


def probe_context(request: ProbeRequest):  # type: ignore[no-untyped-def]
    from tools.base import ProbeContext

    return ProbeContext(
        python=request.python or job_python(request.log_paths) or running_job_python(),
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


WORD = re.compile(r"[\w.]+")


def names_a_topic(topics: Sequence[str], text: str) -> bool:
    """Every word of one of ``topics`` is in ``text`` (case-insensitive)."""
    words = {w.strip(".").lower() for w in WORD.findall(text)}
    return any(all(w.strip(".") in words for w in WORD.findall(topic.lower())) for topic in topics if topic)


def explains(finding, question: str) -> bool:  # type: ignore[no-untyped-def]
    """A problem finding about what the question asks: every word of one of its topics is in the question."""
    return finding.severity == "problem" and names_a_topic(finding.topics, question)


def finding_views(results: Sequence, citations: Sequence[Citation], question: str = "") -> list[FindingView]:
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
                    explains=explains(finding, question),
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
