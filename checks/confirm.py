"""Which failure kinds the check can confirm: ``confirm_with`` on a kind in the registry (runbooks.registry, from
``runbooks/data/kinds.json``), the command that shows the failure now and its absence after the fix."""

from __future__ import annotations

from runbooks.registry import kind as registered
from runbooks.registry import kinds


def confirm_with(kind: str | None) -> str | None:
    """The command that confirms ``kind`` (``traindoc check nccl``), or None where the check cannot tell."""
    found = registered(kind) if kind else None
    return found.confirm_with or None if found is not None else None


def confirmable() -> dict[str, str]:
    return {name: k.confirm_with for name, k in kinds().items() if k.confirm_with}
