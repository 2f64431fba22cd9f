"""The one function every surface calls before it shows a section: ``review(text, source, section, lang)``.

It applies the curated corrections (advice.curated), the claims of data/claims.json, the upstream name check
(advice.names) and the install check (advice.installs), and says whose advice the section is (advice.projects).
In code, a wrong, stale or harmful line is replaced by its corrected form or left out; the original is quoted in
prose right after the block, marked with the reason and the source, so the same words reach the CLI, the web
page, Slack, a model's tool result and the JSON. A misleading or unverified line keeps its caveat next to it."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from functools import cache, lru_cache
from importlib import resources
from typing import Any

from advice.claims import Claim, claims_for
from advice.curated import correct
from advice.installs import creates_environment, risky_install
from advice.names import NameFinding, env_findings, flag_findings, key_findings, namespaces
from advice.projects import Project, project_of
from common.language import Lang

FENCE = re.compile(r"^\s*```")
NOTE_PREFIX = "> ⚠ traindoc"
VERSION = re.compile(r"(\d+)\.(\d+)")
NEGATED = re.compile(r"(?i)^\s*(?:[-*+]|\d+\.)?\s*(?:\*\*)?(?:do not|don't|never|avoid|不要|切勿|避免|别)")


@dataclass(frozen=True)
class Flag:
    """One thing traindoc changed or marked in a section: what the document says and what is shown instead."""

    kind: str  # "claim", "name", "install", "curated"
    verdict: str
    original: str
    shown: str | None  # the line shown in its place in code; None: left out, or marked in prose
    reason: str
    sources: tuple[str, ...] = ()
    id: str = ""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Reviewed:
    text: str
    flags: tuple[Flag, ...] = ()
    project: str | None = None
    notes: tuple[str, ...] = field(default=())  # the section-wide notes (whose advice; curated corrections)


@cache
def _wording() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(resources.files("advice").joinpath("data/wording.json").read_text(encoding="utf-8"))
    return data


def _say(key: str, lang: Lang, **values: Any) -> str:
    return str(_wording()[lang][key]).format(**values)


def _verdict(verdict: str, lang: Lang) -> str:
    return str(_wording()[lang]["verdict"].get(verdict, verdict))


def version_tuple(text: str | None) -> tuple[int, int] | None:
    match = VERSION.search(text or "")
    return (int(match.group(1)), int(match.group(2))) if match else None


def current_torch() -> str:
    """The torch release the shipped registry was checked against (its namespace's version)."""
    for ns in namespaces():
        if ns.id == "torch_env":
            return ns.version.split(" (", 1)[0]
    return "current"


class _Reviewer:
    def __init__(self, source: str, section: str, lang: Lang, question: str, torch_version: str | None,
                 project: Project | None) -> None:
        self.claims = claims_for(source, section)
        self.lang = lang
        self.question = question
        self.torch_version = torch_version
        self.project = project
        self.flags: list[Flag] = []

    # --- one line -------------------------------------------------------------------------------------------
    def claim_of(self, line: str) -> Claim | None:
        return next((c for c in self.claims if c.pattern.search(line)), None)

    def name_flags(self, line: str, in_code: bool) -> Iterator[NameFinding]:
        """The names on the line that are flagged, or a project's own (labelled)."""
        findings = list(env_findings(line))
        if in_code:
            findings += list(flag_findings(line, self.project.name if self.project else None))
        yield from (f for f in findings if f.flagged or f.status == "project")

    def _deprecated_line(self, finding: NameFinding, line: str) -> str | None:
        yours, since = version_tuple(self.torch_version), version_tuple(finding.since)
        if not finding.replacement or (yours and since and yours < since):
            return None
        return re.sub(rf"(?<![\w-]){re.escape(finding.name)}(?![\w-])", finding.replacement, line)

    def name_note(self, finding: NameFinding) -> str:
        lang = self.lang
        if finding.status == "unknown":
            return _say("unknown_name", lang, project=finding.project, version=finding.version, name=finding.name)
        if finding.status == "not_read":
            extra = finding.note_zh if lang == "zh" and finding.note_zh else finding.note
            return (_say("not_read_name", lang, project=finding.project, name=finding.name) + " " + extra).strip()
        yours, since = version_tuple(self.torch_version), version_tuple(finding.since)
        if yours and since and yours < since and finding.replacement:
            return _say("still_yours", lang, name=finding.name, version=self.torch_version, replacement=finding.replacement,
                        since=finding.since)
        whom = (_say("for_yours", lang, version=self.torch_version) if self.torch_version
                else _say("for_current", lang, version=current_torch()))
        replacement = _say("replacement", lang, replacement=finding.replacement) if finding.replacement else ""
        return _say("deprecated_name", lang, name=finding.name, since=finding.since or "?", replacement=replacement,
                    for_whom=whom)

    # --- a code block -------------------------------------------------------------------------------------------
    def code_block(self, lines: list[str]) -> tuple[list[str], list[str]]:
        """(the block's lines as shown, the notes that follow it)."""
        shown: list[str] = []
        notes: list[str] = []
        fresh_environment = False  # a block that first makes a new environment installs into that one
        for line in lines:
            fresh_environment = fresh_environment or creates_environment(line)
            claim = self.claim_of(line)
            if claim is not None:
                source = claim.sources[0] if claim.sources else ""
                reason = claim.reason_in(self.lang)
                verdict = _verdict(claim.verdict, self.lang)
                if claim.replaced and claim.fix:
                    shown.append(_indent(line) + claim.fix)
                    notes.append(_say("replaced", self.lang, original=line.strip(), verdict=verdict, reason=reason,
                                      shown=claim.fix, source=source))
                elif claim.replaced:
                    notes.append(_say("removed", self.lang, original=line.strip(), verdict=verdict, reason=reason,
                                      source=source))
                else:
                    shown.append(line)
                    notes.append(_say("caveat", self.lang, original=line.strip(), verdict=verdict, reason=reason,
                                      source=source))
                self.flags.append(Flag("claim", claim.verdict, line.strip(), claim.fix if claim.replaced else line.strip(),
                                       reason, claim.sources, claim.id))
                continue
            install = None if fresh_environment else risky_install(line, self.torch_version)
            if install is not None:
                reason = _say("risky_install", self.lang, packages=", ".join(install.packages)) + " " + (
                    _say("constrain", self.lang, version=self.torch_version.split("+")[0]) if install.constrained_line and
                    self.torch_version else _say("pin_yourself", self.lang))
                new = install.constrained_line or line
                shown.append(new)
                notes.append(_say("caveat", self.lang, original=line.strip(), verdict=_verdict("risky_install", self.lang),
                                  reason=reason, source=install.sources[0]))
                self.flags.append(Flag("install", "risky_install", line.strip(), new.strip(), reason, install.sources))
                continue
            new_line = line
            for finding in self.name_flags(line, in_code=True):
                if finding.status == "project":  # labelled once for the section (notes), not flagged
                    self.flags.append(Flag("name", "project", line.strip(), line.strip(), finding.project, (), finding.name))
                    continue
                reason = self.name_note(finding)
                if finding.status == "deprecated":  # shown with its replacement, where the user's torch has it
                    new_line = self._deprecated_line(finding, new_line) or new_line
                if finding.status == "not_read" and re.search(rf"(?<![\w$]){re.escape(finding.name)}=", line):
                    new_line = ""  # setting a variable nothing reads: left out (a quoted message naming it stays)
                notes.append(_say("caveat", self.lang, original=finding.name, verdict=_verdict(finding.status, self.lang),
                                  reason=reason, source=finding.source or finding.project))
                self.flags.append(Flag("name", finding.status, line.strip(), new_line.strip() or None, reason,
                                       (finding.source,) if finding.source else (), finding.name))
            if new_line:
                shown.append(new_line)
        block = "\n".join(lines)
        for finding in key_findings(block):
            if finding.flagged:
                reason = self.name_note(finding)
                notes.append(_say("caveat", self.lang, original=finding.name, verdict=_verdict(finding.status, self.lang),
                                  reason=reason, source=finding.source or finding.project))
                self.flags.append(Flag("name", finding.status, finding.line, finding.line, reason,
                                       (finding.source,) if finding.source else (), finding.name))
        return shown, list(dict.fromkeys(notes))

    # --- a prose line -------------------------------------------------------------------------------------------
    def prose(self, line: str) -> str:
        claim = self.claim_of(line)
        if claim is not None:
            reason = claim.reason_in(self.lang)
            self.flags.append(Flag("claim", claim.verdict, line.strip(), None, reason, claim.sources, claim.id))
            return line.rstrip() + _say("inline", self.lang, verdict=_verdict(claim.verdict, self.lang), reason=reason)
        marks = []
        if NEGATED.match(line):  # "Do not export NCCL_TIMEOUT": the line already says so
            return line
        for finding in self.name_flags(line, in_code=False):
            if finding.status == "project":
                continue
            reason = self.name_note(finding)
            self.flags.append(Flag("name", finding.status, line.strip(), None, reason,
                                   (finding.source,) if finding.source else (), finding.name))
            marks.append(_say("inline", self.lang, verdict=_verdict(finding.status, self.lang), reason=reason))
        return line.rstrip() + "".join(dict.fromkeys(marks)) if marks else line


def _notes(notes: list[str]) -> list[str]:
    """The notes after a block, each its own paragraph of one quote (a bare ">" between them)."""
    lines: list[str] = []
    for note in notes:
        lines.extend([*([">"] if lines else []), f"{NOTE_PREFIX}{note.removeprefix('⚠ traindoc')}"])
    return lines


def with_notes(text: str, notes: Sequence[str]) -> str:
    """A reviewed section as a plain quote (a model's tool result, a source the user expands): its text, then
    traindoc's section-wide notes."""
    return text + "".join(f"\n({note})" for note in notes)


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


@lru_cache(maxsize=1024)  # a pure function of its arguments and the shipped tables: a section shown again (the same
# runbook leads many answers) is reviewed once per process; Reviewed and its flags are frozen
def review(text: str, source: str, section: str, lang: Lang, *, question: str = "", torch_version: str | None = None,
           declared_project: str | None = None) -> Reviewed:
    """``text`` as it may be shown to this asker: corrected, marked, and labelled with whose advice it is.
    ``source``: the document (a rendering's original or the rendering itself); ``question``: the asker's words and
    log lines (they decide whether a curated correction's subject is at hand); ``torch_version``: the user's
    torch where traindoc knows it (a deprecated name is judged for it)."""
    from runbooks.choose import kind_of_source

    # The curated corrections mend the seed documents' stale advice; traindoc's own runbooks are written current
    # (a fact gone stale is mended in the runbook itself), and a correction for one GPU generation must not rewrite
    # a runbook's fix for another (cu126 wheels for Pascal are not the cu128 ones for Blackwell).
    corrected, applied = (text, []) if kind_of_source(source) else correct(text, f"{section}\n{question}")
    project = project_of(source, declared_project)
    reviewer = _Reviewer(source, section, lang, question, torch_version, project)
    out: list[str] = []
    block: list[str] | None = None
    opening = ""
    for line in corrected.split("\n"):
        if FENCE.match(line):
            if block is None:
                block, opening = [], line
                continue
            shown, notes = reviewer.code_block(block)
            if shown:
                out.extend([opening, *shown, line])
            out.extend(_notes(notes))
            block = None
            continue
        if block is not None:
            block.append(line)
        else:
            out.append(reviewer.prose(line))
    if block is not None:  # an unclosed fence: the rest is code
        shown, notes = reviewer.code_block(block)
        out.extend([opening, *shown])
        out.extend(_notes(notes))
    flags = [Flag("curated", "corrected", fact.code, None, fact.note, fact.sources, fact.code) for fact in applied]
    section_notes = [f"traindoc corrected this section: {fact.note}" for fact in applied]
    if project is not None:
        section_notes.insert(0, _say("project" if project.home else "project_no_home", lang, project=project.name,
                                     home=project.home))
    return Reviewed("\n".join(out), tuple(flags + reviewer.flags), project.name if project else None, tuple(section_notes))


__all__ = ["NOTE_PREFIX", "Flag", "Reviewed", "review", "with_notes"]
