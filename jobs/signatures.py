"""What a log line means, from the curated table in ``jobs/data/signatures.json``.

A line is a root-cause candidate (it can start a cascade: OOM, KeyError, EADDRINUSE...), a symptom
(a collective timeout, a lost peer, the launcher's SIGTERM: what follows from another rank's
failure) or nothing; a launcher's line may also report how ranks ended (``exit_report``: torchrun's
"failed (exitcode: -9)", srun's "task 3: Killed", Lightning's "Child process ... terminated with code").
Every signature has literals one of which it must contain (``literal``: a string or a list; every plain alternative
of its pattern holds one, tests/jobs/test_signature_literals.py), so most lines are dismissed by substring tests
before any regex runs; every pattern is linear (bounded repetitions, no nested quantifiers).
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
    "World size", "world size", "Num processes", "num_processes",
    "Starting elastic", "Rendezvous", "rendezvous", "SeqNum", "--nproc", "--num_gpus", "--num-gpus",
    "OpType", "hang", "Hang", "killed", "Killed", "exits with return code",
)
# c10's "Stack trace of the failed collective" frames ("#2 main from /job/train.py:35") are read too.
STRUCTURE_LINE = re.compile(r"^\s*(?:rank|exitcode|host|time|error_file|traceback)\s*:|^\s*\[\d+\]:\s*$|^#\d+ \S+ from \S")


@dataclass(frozen=True)
class Signature:
    kind: Literal["root", "symptom"]
    category: str
    literals: tuple[str, ...]  # a line the signature can match holds one of them (the first names the signature)
    pattern: re.Pattern[str]
    summary: str
    explain: bool = False  # the line alone does not say what it means: the root cause's sentence carries the summary
    unless: re.Pattern[str] | None = None  # a line that also shows this is something else (an HTTP client's reset)

    @property
    def literal(self) -> str:
        return self.literals[0]

    def may_match(self, text: str) -> bool:
        return any(literal in text for literal in self.literals)

    def reads(self, text: str) -> re.Match[str] | None:
        """The signature's match in ``text``, unless the line also shows its ``unless`` words."""
        if not self.may_match(text) or (found := self.pattern.search(text)) is None:
            return None
        return None if self.unless is not None and self.unless.search(text) else found


@dataclass(frozen=True)
class Meaning:
    kind: Literal["root", "symptom"]
    category: str
    summary: str
    match: str  # the matched text
    explain: bool = False


@dataclass(frozen=True)
class ExitShape:
    launcher: str
    literal: str
    pattern: re.Pattern[str]


@dataclass(frozen=True)
class ExitReport:
    """What one launcher line says about how ranks ended. ``code`` is negative for a signal."""

    launcher: str
    code: int | None
    ranks: tuple[int, ...] = ()  # the rank it names (srun: every task of "tasks 0-3")
    local_rank: int | None = None
    host: str | None = None
    pid: int | None = None
    oom: bool = False  # Slurm's "Out Of Memory": its cgroup's OOM kill


# strsignal(3)'s words, as srun prints a task's end, and the signal names CPython and torchrun print.
SIGNAL_WORDS = {"Hangup": 1, "Interrupt": 2, "Quit": 3, "Illegal instruction": 4, "Aborted": 6, "Bus error": 7,
                "Floating point exception": 8, "Killed": 9, "Segmentation fault": 11, "Broken pipe": 13, "Terminated": 15}
SIGNAL_NUMBERS = {"SIGHUP": 1, "SIGINT": 2, "SIGQUIT": 3, "SIGILL": 4, "SIGABRT": 6, "SIGBUS": 7, "SIGFPE": 8,
                  "SIGKILL": 9, "SIGSEGV": 11, "SIGPIPE": 13, "SIGTERM": 15}
MAX_TASKS = 4096  # "tasks 0-100000" names no rank worth listing


def _data() -> dict:  # type: ignore[type-arg]
    return json.loads(resources.files("jobs").joinpath("data/signatures.json").read_text(encoding="utf-8"))  # type: ignore[no-any-return]


@cache
def signatures() -> tuple[Signature, ...]:
    data = _data()
    table: list[Signature] = []
    for kind in ("symptom", "root"):  # a timeout line that also says "error" is a symptom first
        for row in data[kind]:
            literal = row["literal"]
            literals = (literal,) if isinstance(literal, str) else tuple(literal)
            unless = re.compile(row["unless"]) if row.get("unless") else None
            table.append(Signature(kind, row["category"], literals, re.compile(row["pattern"]), row["summary"],
                                   bool(row.get("explain")), unless))
    return tuple(table)


@cache
def exit_shapes() -> tuple[ExitShape, ...]:
    return tuple(ExitShape(row["launcher"], row["literal"], re.compile(row["pattern"])) for row in _data()["exits"])


def _tasks(text: str) -> tuple[int, ...]:
    """Slurm's task list ("3", "0-3", "1,4-5") as ranks; an unreadable or huge list names none."""
    ranks: list[int] = []
    for part in text.split(","):
        low, _, high = part.partition("-")
        if not low.isdigit() or (high and not high.isdigit()):
            return ()
        first, last = int(low), int(high or low)
        if last < first or len(ranks) + last - first >= MAX_TASKS:
            return ()
        ranks.extend(range(first, last + 1))
    return tuple(ranks)


def exit_report(text: str) -> ExitReport | None:
    """How a launcher line says ranks ended, when it is one of the shapes in ``exit_shapes``. A shell's or a
    container's 128+N exit code is signal N."""
    for shape in exit_shapes():
        if shape.literal not in text or (found := shape.pattern.search(text)) is None:
            continue
        g = found.groupdict()
        code: int | None = None
        if g.get("code"):
            code = int(g["code"])
            if 128 < code < 160:
                code = 128 - code
        elif g.get("oom"):
            code = -9
        elif g.get("signum") or g.get("signame") or g.get("sigtext"):
            number = SIGNAL_NUMBERS.get(g.get("signame") or "") or SIGNAL_WORDS.get(g.get("sigtext") or "")
            if number is None and (g.get("signum") or "").isdigit():
                number = int(g["signum"])
            code = -number if number else None
        if code is None:
            continue
        ranks = _tasks(g["task"]) if g.get("task") else ((int(g["rank"]),) if g.get("rank") else ())
        local = int(g["local_rank"]) if g.get("local_rank") else None
        return ExitReport(shape.launcher, code, ranks, local, g.get("host"), int(g["pid"]) if g.get("pid") else None,
                          bool(g.get("oom")))
    return None


def meaning(text: str) -> Meaning | None:
    """The first signature ``text`` matches."""
    for signature in signatures():
        if (found := signature.reads(text)) is not None:
            return Meaning(signature.kind, signature.category, signature.summary, found.group(0), signature.explain)
    return None


@cache
def literals() -> tuple[str, ...]:
    return tuple(dict.fromkeys([lit for s in signatures() for lit in s.literals] + [s.literal for s in exit_shapes()]
                               + list(STRUCTURE_LITERALS)))


def worth_reading(text: str) -> bool:
    """Could this line matter to the triage? (the same test GNU grep runs on big files)."""
    return any(lit in text for lit in literals()) or STRUCTURE_LINE.search(text) is not None


@cache
def prefilter_regex() -> str:
    """One POSIX extended regex for `grep -E` over the middle of a big log (``grep_literals``)."""
    data = _data()
    return "|".join(re.sub(r"([.^$*+?()\[\]{}|\\])", r"\\\1", lit) for lit in data["grep_literals"])
