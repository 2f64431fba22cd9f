"""Grounding: the final answer may cite only what the agent actually retrieved or probed.

The model cites `[doc:ID]` and `[probe:NAME]`; valid ones become numbered citations [n] in order of
first use, anything else is dropped and logged.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Any

from agent.answer import Citation

MARKER = re.compile(r"\[(doc|probe):\s*([A-Za-z0-9_\-]+)\s*\]")
log = logging.getLogger(__name__)


@dataclass
class Grounded:
    text: str
    citations: list[Citation]
    probe_numbers: dict[str, int]
    dropped: list[str]

    @property
    def grounded(self) -> bool:
        return bool(self.citations or self.probe_numbers)


def ground(text: str, chunks: dict[str, Any], probes: dict[str, Any]) -> Grounded:
    citations: list[Citation] = []
    numbers: dict[tuple[str, str], int] = {}
    probe_numbers: dict[str, int] = {}
    dropped: list[str] = []

    def replace(match: re.Match[str]) -> str:
        kind, ident = match.group(1), match.group(2)
        key = (kind, ident)
        if key in numbers:
            return f"[{numbers[key]}]"
        if kind == "doc" and ident in chunks:
            hit = chunks[ident]
            n = len(numbers) + 1
            numbers[key] = n
            citations.append(Citation(n=n, source=hit.chunk.source, section=hit.chunk.section,
                                      chunk_id=hit.chunk.chunk_id, score=hit.score, text=hit.chunk.text))
            return f"[{n}]"
        if kind == "probe" and ident in probes:
            n = len(numbers) + 1
            numbers[key] = n
            probe_numbers[ident] = n
            return f"[{n}]"
        dropped.append(match.group(0))
        log.warning("dropped a citation the agent never retrieved: %s", match.group(0))
        return ""

    # Bare [n] markers the model wrote on its own point at nothing it was shown: drop them first, so
    # only the numbers grounding assigns below remain.
    own_markers = re.sub(r"\[(\d+)\](?!\()", lambda m: _drop(m.group(0), dropped), text)
    grounded_text = MARKER.sub(replace, own_markers)
    return Grounded(grounded_text, citations, probe_numbers, dropped)


def _drop(marker: str, dropped: list[str]) -> str:
    dropped.append(marker)
    log.warning("dropped an unverifiable citation: %s", marker)
    return ""


# -- explain mode: the model cites the numbered facts it was given ---------------------------------

NUMBERS = re.compile(r"\s?[\[【]\s*(\d{1,3}(?:\s*[,，、]\s*\d{1,3})*)\s*[\]】](?!\()")
NAMED = re.compile(r"\s?" + MARKER.pattern)
CODE = re.compile(r"(```[\s\S]*?(?:```|\Z)|`[^`\n]*`)")  # a command's x[1] is no citation


def ground_numbers(text: str, given: dict[int, str], names: dict[str, int]) -> tuple[str, list[int], list[str]]:
    """``text`` keeping only [n] markers of facts in ``given`` (n -> kind); [doc:ID] / [probe:NAME] of a
    given fact become its [n]. Returns the text, the numbers cited (in order of first use), what was dropped."""
    used: list[int] = []
    dropped: list[str] = []

    def numbers(match: re.Match[str]) -> str:
        keep = [int(n) for n in re.split(r"\s*[,，、]\s*", match.group(1)) if int(n) in given]
        if len(keep) < len(re.split(r"\s*[,，、]\s*", match.group(1))):
            dropped.append(match.group(0).strip())
            log.warning("dropped a citation of a fact the model was not given: %s", match.group(0).strip())
        used.extend(n for n in keep if n not in used)
        lead = match.group(0)[0] if match.group(0)[0].isspace() and keep else ""
        return lead + "".join(f"[{n}]" for n in dict.fromkeys(keep))

    def named(match: re.Match[str]) -> str:
        n = names.get(match.group(2))
        if n is None:
            dropped.append(match.group(0).strip())
            return ""
        return match.group(0)[: len(match.group(0)) - len(match.group(0).lstrip())] + f"[{n}]"

    parts = CODE.split(text)
    for i in range(0, len(parts), 2):  # even parts are prose, odd ones code
        parts[i] = NUMBERS.sub(numbers, NAMED.sub(named, parts[i]))
    return "".join(parts), used, dropped
