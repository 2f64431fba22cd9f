"""Whose advice a section is: a document written for one project (data/projects.json, or a team document's
front matter ``project:``) is shown as that project's, and its own flags are not the fix for a user whose
report never names that project."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import PurePath


@dataclass(frozen=True)
class Project:
    name: str
    home: str
    mentions: re.Pattern[str]

    def named_in(self, text: str) -> bool:
        return bool(self.mentions.search(text))


@cache
def _projects() -> dict[str, Project]:
    data = json.loads(resources.files("advice").joinpath("data/projects.json").read_text(encoding="utf-8"))
    return {PurePath(name).stem: Project(row["project"], row["home"], re.compile(row["mentions"]))
            for name, row in data["documents"].items()}


def project_of(source: str, declared: str | None = None) -> Project | None:
    """The project a document was written for: the shipped table by file name, else what its front matter says."""
    found = _projects().get(PurePath(source).stem)  # a seed or its rendering (same stem)
    if found is not None:
        return found
    if declared:
        return Project(declared, "", re.compile(re.escape(declared), re.I))
    return None


__all__ = ["Project", "project_of"]
