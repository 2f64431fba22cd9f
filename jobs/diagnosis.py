"""The typed result of reading a job as a whole: one root cause, its consequences, a timeline.

Both the log triage (``jobs.triage``) and the live hang snapshot (``jobs.hang``) return a
``JobDiagnosis``; ``to_json()`` is the ``"diagnosis"`` object of `ask --json` and `traindoc hang --json`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from functools import cache
from importlib import resources
from typing import Any, Literal

from common.hang_words import HANG_WORDS as _HANG_WORDS
from common.language import Lang, say

HANG_WORDS = _HANG_WORDS  # a question (or a log's last line) that says the job hangs (common.hang_words)

# What went wrong first. `rank` is None when no single rank is to blame.
Category = Literal[
    "exception", "oom", "host_oom", "native_crash", "cuda_error", "straggler", "collective_mismatch", "rendezvous", "port_in_use",
    "network", "nan", "bad_arguments", "checkpoint", "dataloader_worker", "disk_full", "arch_mismatch",
    "config", "unknown",
]
CATEGORIES: tuple[str, ...] = Category.__args__  # type: ignore[attr-defined]
# Kinds that name no failure: an exception no signature knows (usually the user's own code), or nothing found.
UNCATALOGUED: frozenset[str] = frozenset({"exception", "unknown"})
NOUNS = {"rank": ("jobs.rank", "jobs.ranks"), "task": ("jobs.task", "jobs.tasks")}  # phrase keys: one, several

# What followed from it: the loud lines that are consequences, never the cause.
SymptomCategory = Literal[
    "collective_timeout",  # NCCL watchdog / gloo recv / barrier timeouts
    "peer_closed",  # "Connection closed by peer", "remote worker crashing", broken pipe
    "killed_by_launcher",  # SIGTERM/SIGKILL torchrun sent to the survivors
    "process_abort",  # NCCL "taking the entire process down", SIGABRT after a watchdog
    "launcher_summary",  # ChildFailedError's block, "first observed failure"
    "collective_wait",  # live: ranks waiting in a collective for the odd one out
    "flight_recorder",  # what the Flight Recorder dumps add
    "stuck_in_kernel",  # live: a process whose /proc reads block (uninterruptible sleep)
]


@dataclass(frozen=True)
class RootCause:
    category: str
    rank: int | None
    summary: str
    host: str | None = None
    evidence: list[str] = field(default_factory=list)  # the log lines (or stack lines) that show it
    where: str | None = None  # "train.py:35": the deepest frame outside site-packages
    confidence: float = 0.5  # 0..1


@dataclass(frozen=True)
class Symptom:
    category: str
    ranks: list[int]
    summary: str


@dataclass(frozen=True)
class TimelineEvent:
    t: str | None  # ISO-8601 when the log printed a time, else None
    rank: int | None
    event: str


@dataclass
class JobDiagnosis:
    kind: Literal["log", "hang"]
    root_cause: RootCause | None
    symptoms: list[Symptom] = field(default_factory=list)
    timeline: list[TimelineEvent] = field(default_factory=list)
    ranks: list[int] = field(default_factory=list)  # every rank the evidence mentions
    why_consequences: str = ""  # one line: why the other errors follow from the root cause
    collective: str | None = None  # "ALLREDUCE SeqNum=4": where the others waited, when printed
    next_evidence: list[str] = field(default_factory=list)  # what would tell, when this cannot
    search_lines: list[str] = field(default_factory=list)  # the root-cause lines documents are retrieved for
    # The sentences above in another language, for an answer in it: {"zh": {"root": ..., "why": ..., "symptoms": ...}}
    wording: dict[str, dict[str, str]] = field(default_factory=dict)
    picture: Any = None  # jobs.picture.JobPicture: the lanes and marks the timeline picture draws (not in to_json)

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "root_cause": asdict(self.root_cause) if self.root_cause else None,
            "symptoms": [asdict(s) for s in self.symptoms],
            "timeline": [asdict(e) for e in self.timeline],
            "ranks": self.ranks,
            "why_consequences": self.why_consequences,
            "collective": self.collective,
            "next_evidence": self.next_evidence,
        }


@cache
def _category_words() -> dict[str, dict[str, Any]]:
    table = json.loads(resources.files("jobs").joinpath("data/category_words.json").read_text(encoding="utf-8"))
    return {name: entry for name, entry in table.items() if not name.startswith("_")}


def search_terms(category: str, lines: list[str]) -> list[str]:
    """What retrieval searches the documents with for a root cause of ``category`` shown by ``lines``: the lines
    and the category's words (``jobs/data/category_words.json``, else its name); a kind the documents describe by
    its behaviour alone is searched with its words alone."""
    entry = _category_words().get(category)
    if entry is None:
        return [*lines, category.replace("_", " ")]
    return [entry["words"]] if entry.get("instead_of_lines") else [*lines, entry["words"]]


def clip(text: str, limit: int = 240) -> str:
    """``text`` up to ``limit`` characters, cut at a word boundary with "…" when it is longer."""
    if len(text) <= limit:
        return text
    cut = text[:limit]
    space = cut.rfind(" ")
    return (cut[:space] if space > limit // 2 else cut).rstrip(" ,;:") + "…"


def only_if_quoted(category: str) -> bool:
    """A kind only a section quoting its own error answers (``only_if_quoted`` in ``category_words.json``)."""
    return bool(_category_words().get(category, {}).get("only_if_quoted"))


def listed(items: Sequence[str], lang: Lang = "en") -> str:
    """"0, 1 and 2", with the list separators of ``lang``."""
    if len(items) < 2:
        return "".join(items)
    return say("jobs.list_sep", lang).join(items[:-1]) + say("jobs.list_and", lang) + items[-1]


def ranks_text(ranks: Iterable[int], lang: Lang = "en", noun: Literal["rank", "task"] = "rank") -> str:
    """"rank 1", "ranks 0 and 2", "ranks 0-63", "ranks 0-3,7,9-12": how a diagnosis names ranks, in ``lang``
    (the phrase book's ``jobs.rank``/``jobs.ranks``); ``noun`` "task" names Slurm's tasks."""
    ordered = sorted(set(ranks))
    if not ordered:
        return say("jobs.no_rank", lang)
    one, many = NOUNS[noun]
    if len(ordered) == 1:
        return say(one, lang, rank=ordered[0])
    if len(ordered) > 3 and ordered == list(range(ordered[0], ordered[-1] + 1)):
        shown = f"{ordered[0]}-{ordered[-1]}"
    elif len(ordered) > 6:
        shown = span(ordered)
    else:
        shown = listed([str(r) for r in ordered], lang)
    return say(many, lang, ranks=shown)


def span(ranks: Iterable[int]) -> str:
    """0-3,7,9-12: contiguous runs collapsed."""
    ordered = sorted(set(ranks))
    if not ordered:
        return ""
    parts: list[str] = []
    start = prev = ordered[0]
    for value in ordered[1:]:
        if value == prev + 1:
            prev = value
            continue
        parts.append(f"{start}-{prev}" if prev > start else str(start))
        start = prev = value
    parts.append(f"{start}-{prev}" if prev > start else str(start))
    return ",".join(parts)
