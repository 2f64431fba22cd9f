"""Which failure kinds the check can confirm: ``confirm_with`` on a kind's row of the registry's data
(``runbooks/data/kinds.json``), the command that shows the failure now and its absence after the fix."""

from __future__ import annotations

import json
from functools import cache
from importlib import resources


@cache
def _table() -> dict[str, str]:
    rows = json.loads(resources.files("runbooks").joinpath("data/kinds.json").read_text(encoding="utf-8"))["kinds"]
    return {kind: str(row["confirm_with"]) for kind, row in rows.items() if row.get("confirm_with")}


def confirm_with(kind: str | None) -> str | None:
    """The command that confirms ``kind`` (``traindoc check nccl``), or None where the check cannot tell."""
    return _table().get(kind) if kind else None


def confirmable() -> dict[str, str]:
    return dict(_table())
