"""What a log line means, from the curated table in ``jobs/data/signatures.json``.

A line is a root-cause candidate (it can start a cascade: OOM, KeyError, EADDRINUSE...), a symptom
(a collective timeout, a lost peer, the launcher's SIGTERM: what follows from another rank's
failure) or nothing. Every signature has a literal it must contain, so most lines are dismissed by
substring tests before any regex runs.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Literal

# Lines the triage reads besides the signatures: tracebacks, exception lines, torchrun's summary.
STRUCTURE_LITERALS = (
    "Traceback", 'File "', "Error", "Exception", "Interrupt", "exitcode", "Failures", "Root Cause",
    "error_file", "local_rank", "Signal ", "signal", "NCCL INFO comm", "nranks", "WORLD_SIZE", "world_size",
    "Starting elastic", "Rendezvous", "rendezvous", "SeqNum", "OpType", "hang", "Hang", "killed", "Killed", "exits with return code",
)
# c10's "Stack trace of the failed collective" frames ("#2 main from /job/train.py:35") are read too.
STRUCTURE_LINE = re.compile(r"^\s*(?:rank|exitcode|host|time|error_file|traceback)\s*:|^\s*\[\d+\]:\s*$|^#\d+ \S+ from \S")


@dataclass(frozen=True)
class Signature:
    kind: Literal["root", "symptom"]
    category: str
    literal: str
    pattern: re.Pattern[str]
    summary: str


@dataclass(frozen=True)
class Meaning:
    kind: Literal["root", "symptom"]
    category: str
    summary: str
    match: str  # the matched text


@cache
def signatures() -> tuple[Signature, ...]:
    data = json.loads(resources.files("jobs").joinpath("data/signatures.json").read_text(encoding="utf-8"))
    table: list[Signature] = []
    for kind in ("symptom", "root"):  # a timeout line that also says "error" is a symptom first
        for row in data[kind]:
            table.append(Signature(kind, row["category"], row["literal"], re.compile(row["pattern"]), row["summary"]))
    return tuple(table)


def meaning(text: str) -> Meaning | None:
    """The first signature ``text`` matches."""
    for signature in signatures():
        if signature.literal in text and (found := signature.pattern.search(text)):
            return Meaning(signature.kind, signature.category, signature.summary, found.group(0))
    return None


@cache
def literals() -> tuple[str, ...]:
    return tuple(dict.fromkeys([s.literal for s in signatures()] + list(STRUCTURE_LITERALS)))


def worth_reading(text: str) -> bool:
    """Could this line matter to the triage? (the same test GNU grep runs on big files)."""
    return any(lit in text for lit in literals()) or STRUCTURE_LINE.search(text) is not None


@cache
def prefilter_regex() -> str:
    """One POSIX extended regex for `grep -E` over the middle of a big log (``grep_literals``)."""
    data = json.loads(resources.files("jobs").joinpath("data/signatures.json").read_text(encoding="utf-8"))
    return "|".join(re.sub(r"([.^$*+?()\[\]{}|\\])", r"\\\1", lit) for lit in data["grep_literals"])
