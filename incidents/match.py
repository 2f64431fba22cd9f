"""Is a new failure one this cluster resolved before? An ordered table of small rules (``RULES``), each saying why.

A match needs a message in common: the same kind alone is not the same failure (two OOMs of different jobs, an
interface missing on one node and a driver gone on another are one kind each). Hosts never decide a match (the
same failure on another node is still the same failure); they only order the matches, the same node first.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from incidents.model import Incident
from incidents.signature import Failure, same_message

Rule = Callable[[Failure, Incident], "str | None"]


def exact_message(failure: Failure, incident: Incident) -> str | None:
    """The same error line, number for number: the same failure whatever kind each answer's runbook named."""
    return "exact message" if set(failure.messages) & set(incident.failure.messages) else None


def same_kind_and_message(failure: Failure, incident: Incident) -> str | None:
    """The same kind and a message in common once what varies (ranks, PIDs, ports, times, paths) is set aside."""
    if not failure.kind or failure.kind != incident.kind:
        return None
    shared = any(same_message(mine, theirs) for mine in failure.keys for theirs in incident.failure.keys)
    return "same kind and message" if shared else None


RULES: tuple[Rule, ...] = (exact_message, same_kind_and_message)


@dataclass(frozen=True)
class Match:
    incident: Incident
    rule: str  # which rule matched
    same_host: bool  # the new failure names a host the incident named


def matches(failure: Failure, incidents: Iterable[Incident]) -> list[Match]:
    """The incidents ``failure`` matches: on one of its hosts first, then the latest first."""
    found = []
    for incident in incidents:
        rule = next((why for rule in RULES if (why := rule(failure, incident)) is not None), None)
        if rule is not None:
            found.append(Match(incident, rule, bool(set(failure.hosts) & set(incident.failure.hosts))))
    return sorted(found, key=lambda m: (m.same_host, m.incident.created), reverse=True)
