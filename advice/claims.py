"""Corrections of specific claims, as data (data/claims.json): each row is a claim found by a pattern in one line
of a section, its verdict (wrong, stale, misleading, harmful, unverifiable), the corrected command that replaces it
in code (or none), the reason in each language, its sources, and the documents it is limited to (none: every
document, a team's own included)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import PurePath

from common.language import Lang

VERDICTS = ("wrong", "stale", "misleading", "harmful", "unverifiable")
REPLACED = frozenset({"wrong", "stale", "harmful"})  # never left in copyable code


@dataclass(frozen=True)
class Claim:
    id: str
    verdict: str
    pattern_text: str  # compiled when a section the claim applies to is first reviewed (``pattern``)
    documents: frozenset[str]  # file names; empty: any document
    headings_text: str | None
    fix: str | None
    reason: dict[str, str]
    sources: tuple[str, ...]
    project: str | None = None

    @property
    def pattern(self) -> re.Pattern[str]:
        return _compiled(self.pattern_text)

    @property
    def headings(self) -> re.Pattern[str] | None:
        return None if self.headings_text is None else _compiled(self.headings_text)

    def applies_to(self, source: str, section: str) -> bool:
        if self.documents and PurePath(source).stem not in {PurePath(d).stem for d in self.documents}:
            return False
        return self.headings is None or bool(self.headings.search(section))

    def reason_in(self, lang: Lang) -> str:
        return self.reason.get(lang) or self.reason["en"]

    @property
    def replaced(self) -> bool:
        return self.verdict in REPLACED


def _claim(row: dict) -> Claim:  # type: ignore[type-arg]
    if row["verdict"] not in VERDICTS:
        raise ValueError(f"claims.json: {row['id']} has verdict {row['verdict']!r}, not one of {VERDICTS}")
    if not row.get("sources") and row["verdict"] != "unverifiable":
        raise ValueError(f"claims.json: {row['id']} states a verdict without its source")
    return Claim(
        row["id"], row["verdict"], row["pattern"], frozenset(row.get("documents") or ()),
        row["headings"] if row.get("headings") else None, row.get("fix"),
        dict(row["reason"]), tuple(row.get("sources") or ()), row.get("project"),
    )


@cache
def _compiled(pattern: str) -> re.Pattern[str]:
    """A claim's pattern, compiled once, when a section it may apply to is first shown (a cold answer reviews a few
    sections: it compiles their documents' claims, not all of them)."""
    return re.compile(pattern)


@cache
def claims() -> tuple[Claim, ...]:
    data = json.loads(resources.files("advice").joinpath("data/claims.json").read_text(encoding="utf-8"))
    loaded = tuple(_claim(row) for row in data["claims"])
    ids = [c.id for c in loaded]
    if len(ids) != len(set(ids)):
        raise ValueError("claims.json: an id is used twice")
    return loaded


def claims_for(source: str, section: str) -> list[Claim]:
    """The claims that may be found in this document's section (the original's file name for a rendering)."""
    return [claim for claim in claims() if claim.applies_to(source, section)]


__all__ = ["REPLACED", "VERDICTS", "Claim", "claims", "claims_for"]
