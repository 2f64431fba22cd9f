"""Which failure kinds a document section answers (data/section_kinds.json, judged from each seed section's own
text), so a runbook's fixes are followed by the sections of the same kind, and a section about another kind never
supplies a fix. A team document's sections are not in the table: they are about no kind until one is recorded."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import PurePath


@dataclass(frozen=True)
class SectionKinds:
    kinds: tuple[str, ...]
    role: str  # "fix", "diagnosis", "overview"


NONE = SectionKinds((), "overview")


@cache
def _table() -> dict[tuple[str, str], SectionKinds]:
    data = json.loads(resources.files("corpus").joinpath("data/section_kinds.json").read_text(encoding="utf-8"))
    return {(PurePath(name).stem, section): SectionKinds(tuple(row["kinds"]), row["role"])
            for name, sections in data["sections"].items() for section, row in sections.items()}


def section_kinds(source: str, section: str) -> SectionKinds:
    """The kinds a section answers (a rendering is its original's section: same file stem, same heading path)."""
    return _table().get((PurePath(source).stem, section), NONE)


def answers_kind(source: str, section: str, kind: str) -> bool:
    return kind in section_kinds(source, section).kinds


def about_other_kinds(source: str, section: str, kinds: frozenset[str]) -> bool:
    """The section is recorded, and about failure kinds none of them among ``kinds``, or about no failure kind at all
    (tuning, an integration note, general practice). A section not recorded (a team's document) is not judged."""
    recorded = _table().get((PurePath(source).stem, section))
    return recorded is not None and not set(recorded.kinds) & kinds


def about_no_kind(source: str, section: str) -> bool:
    """The section is recorded as about no failure kind a runbook answers (tuning, an RL framework's behaviour,
    general practice, an index). A section not recorded (a team's document) is not judged."""
    recorded = _table().get((PurePath(source).stem, section))
    return recorded is not None and not recorded.kinds


__all__ = ["NONE", "SectionKinds", "about_no_kind", "about_other_kinds", "answers_kind", "section_kinds"]
