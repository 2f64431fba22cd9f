"""Tables compiled at index time into the knowledge snapshot (corpus.snapshot) and offered, when the snapshot is
read, to the modules that would otherwise parse their files at start: a cold question reads them with the
snapshot, not file by file. A module asks for its table by name and, when none was offered or its entry does not
match the file as it is now, reads the file itself: a table only ever saves work, it never decides an answer.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

FRONT_MATTER = "front_matter"  # sha1 of a runbook's front matter text -> what it parses to (runbooks.catalog)

_offered: dict[str, Mapping[str, Any]] = {}


def offer(tables: Mapping[str, Any]) -> None:
    """Tables read from a snapshot, by name (a later snapshot's replace an earlier one's)."""
    for name, table in tables.items():
        if isinstance(table, Mapping):
            _offered[name] = table


def compiled(name: str) -> Mapping[str, Any]:
    """The table offered under ``name`` (empty when none was)."""
    return _offered.get(name, {})
