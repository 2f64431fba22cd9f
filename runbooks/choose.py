"""Which runbook answers a failure: the one whose kind the diagnosis names, refined by the lines the log shows.

A job's diagnosis names a triage category (``jobs.diagnosis``). Several runbooks may answer one category (a
``config`` failure is a DeepSpeed batch assertion, an op that fails to build, ``/dev/shm`` too small, NCCL's
interface choice...): the runbook among them whose message appears in the root cause's lines wins (the longest
such message: the most specific); otherwise the category's default (``runbooks/data/defaults.json``), which a
catch-all category does not have. Without a diagnosis (a pasted error, a question), a runbook answers only when
one of its messages appears in the error lines or the question.
"""

from __future__ import annotations

import json
import re
from bisect import bisect_right
from collections.abc import Collection, Iterable, Sequence
from functools import cache
from importlib import resources
from typing import Any

from common.absent_platforms import without_absent_packages
from jobs.diagnosis import HANG_WORDS
from runbooks.catalog import Runbook, runbooks_in
from runbooks.registry import in_nccl_info, notices

# A line NCCL logs at INFO level reports what it found and chose ("No plugin found (libnccl-net.so), using internal
# implementation"): healthy jobs print it. Only a kind's own INFO message names it there (registry: nccl_info).
NCCL_INFO = re.compile(r"\bNCCL INFO\b")
RUNBOOK_SOURCE = re.compile(r"(?:^|/)runbooks/(?P<lang>[a-z]{2})/(?P<kind>[a-z0-9_]+)\.md$")
OPTION_VALUE = re.compile(r"(?<![\w-])--?[A-Za-z][\w-]{0,60}(?:[ =](?!--?[A-Za-z])[^\s\\]{1,200})?")
# A path or a file name ("text-generation-webui/models", "generation_config.json") names where a file lies, not a
# later part of the run: the words that rule a stage out are read without them.
PATH_OR_FILE = re.compile(r"(?:(?<![\w/])[~.]{0,2}/|\b[A-Za-z]:\\)[^\s'\"`()\[\]]{1,200}|\b[\w.-]{1,80}/[\w.-]{1,80}/[^\s'\"`()\[\]]{0,200}"
                          r"|\b[\w.-]{1,80}\.(?:json|ya?ml|py|sh|txt|bin|safetensors|pt|pth|ckpt|cfg|toml|log)\b")


@cache
def _defaults() -> dict[str, str]:
    table = json.loads(resources.files("runbooks").joinpath("data/defaults.json").read_text(encoding="utf-8"))
    return {key: str(value) for key, value in table.items() if not key.startswith("_")}


def _kinds(lang: str = "en") -> dict[str, Runbook]:
    return runbooks_in(lang)


def in_language(kind: str, lang: str) -> Runbook | None:
    """The runbook of ``kind`` in ``lang``, else in English."""
    return runbooks_in(lang).get(kind) or runbooks_in("en").get(kind)


def _best_quoted(books: Iterable[Runbook], lines: Sequence[str], skip: Collection[str] = ()) -> tuple[Runbook, str] | None:
    """(the runbook with the longest message found in ``lines`` (as the failure prints it; a long one also retyped in
    other letter case), other than the messages in ``skip``; inside NCCL's INFO lines only the messages NCCL prints
    there; the line that shows it)."""
    best: tuple[int, Runbook, str] | None = None
    errors = [line for line in lines if not NCCL_INFO.search(line)]
    wrapped = _Wrapped(errors)
    retyped = _Retyped(errors)
    for book in books:
        info = in_nccl_info(book.kind)
        for message in book.messages:
            if len(message) < 8 or message in skip or (best is not None and len(message) <= best[0]):
                continue
            if (line := next((line for line in (lines if message in info else errors) if message in line), None)
                    or (wrapped.line_of(message) if message not in info else None)
                    or (retyped.line_of(message) if message not in info else None)) is not None:
                best = (len(message), book, line)
    return (best[1], best[2]) if best else None


RETYPED_LENGTH = 24  # a message this long, written in other letter case, is still that message


class _Retyped:
    """Error lines read without letter case, for a long message the asker retyped or lower-cased ("nvidia geforce rtx
    5090 with cuda capabilities sm_120 is not compatible with the current pytorch installation"): a short one in
    other case is a word of prose. Lowered when first asked."""

    def __init__(self, lines: Sequence[str]) -> None:
        self._lines = lines
        self._lowered: list[str] | None = None

    def line_of(self, message: str) -> str | None:
        if len(message) < RETYPED_LENGTH:
            return None
        if self._lowered is None:
            self._lowered = [line.lower() for line in self._lines]
        wanted = message.lower()
        return next((line for line, low in zip(self._lines, self._lowered, strict=True) if wanted in low), None)


class _Wrapped:
    """Error lines read as one text where a message was wrapped across lines ("... is killed by signal: Bus" /
    "error. It is possible that dataloader's workers are out of shared" / "memory."): a paste from a terminal, an
    e-mail or a web page breaks long messages at spaces. Built when first asked."""

    def __init__(self, lines: Sequence[str]) -> None:
        self._lines = lines
        self._text: str | None = None
        self._starts: list[int] = []

    def line_of(self, message: str) -> str | None:
        """The line where ``message`` begins, found with the lines' breaks read as spaces; None if it is not there
        (or has no space to break at)."""
        if " " not in message or len(self._lines) < 2:
            return None
        if self._text is None:
            parts = [" ".join(line.split()) for line in self._lines]
            self._starts = [0]
            for part in parts[:-1]:
                self._starts.append(self._starts[-1] + len(part) + 1)
            self._text = " ".join(parts)
        if (at := self._text.find(" ".join(message.split()))) < 0:
            return None
        return self._lines[bisect_right(self._starts, at) - 1]


def for_category(category: str, lines: Sequence[str], skip: Collection[str] = ()) -> Runbook | None:
    """The English runbook for a diagnosed ``category`` whose root cause shows ``lines`` (``skip``: messages that
    name no kind here, runbooks.registry.unsignalled_generic)."""
    books = _kinds()
    listing = [book for book in books.values() if category in book.triage]
    if (quoted := _best_quoted(listing, lines, skip)) is not None:
        return quoted[0]
    default = _defaults().get(category)
    return books.get(default) if default else None


# Triage categories only a job's diagnosis establishes, by comparing its ranks: one rank's pasted watchdog line reads
# the same whether a straggler or a lost peer caused it (a collective timeout whose cause is not yet known).
DIAGNOSED_ONLY = frozenset({"straggler"})


def for_lines(lines: Sequence[str]) -> Runbook | None:
    """The English runbook whose message the lines show (quoted_message), if any."""
    found = quoted_message(lines)
    return found[0] if found else None


def quoted_message(lines: Sequence[str], generic: Collection[str] = ()) -> tuple[Runbook, str] | None:
    """(the English runbook, the line) whose message the pasted error lines (or the question) show, if any. A progress line that
    healthy runs print too ("Initializing TorchBackend in DeepSpeed") counts only where the lines say the job hangs
    or end with it: in the middle of a paste whose error is something else, it is only the job's start-up. A notice
    (registry: a warning the job goes on past, accelerate's "Using DeepSpeed's value"; a list of possible causes,
    Ray's dead worker) counts only where no other message is quoted and the lines do not say the job hangs. A runbook
    whose kind only a diagnosis tells apart (DIAGNOSED_ONLY) is not chosen by a pasted line."""
    last = next((line for line in reversed(lines) if line.strip()), "")
    hang = any(HANG_WORDS.search(line) for line in lines[:400])
    skip = [*generic, *([] if hang else [m for m in _progress() if m not in last])]
    books = [book for book in _kinds().values() if not (book.triage and set(book.triage) <= DIAGNOSED_ONLY)]
    resolved = notices()  # they name their kind only where nothing else is quoted
    if (found := _best_quoted(books, lines, [*skip, *resolved])) is not None:
        return found
    if any(HANG_WORDS.search(line) for line in lines[:400] if not any(n in line for n in resolved)):
        return None  # the job hangs: a warning it printed before is not why (the warning's own words aside)
    return _best_quoted(books, lines, skip)


@cache
def _stage_table() -> dict[str, Any]:
    return dict(json.loads(resources.files("runbooks").joinpath("data/hang_stages.json").read_text(encoding="utf-8")))


def _progress() -> list[str]:
    return [str(message) for row in _stage_table()["stages"] for message in row.get("progress", ())]


# The catch-all triage categories (several failure kinds with different first fixes: data/defaults.json gives them
# no default) and "unknown": sharing one of them makes two kinds no relatives.
BROAD_CATEGORIES = frozenset({"config", "exception", "cuda_error", "checkpoint", "unknown"})


def related_kinds(kind: str) -> frozenset[str]:
    """``kind`` and the kinds that share a specific triage category with it (an extension built without the GPU's
    arch and the PyTorch build without it are both ``arch_mismatch``; fp16 loss-scale overflow and NaN loss both
    ``nan``): a section about one of them is about the same failure."""
    books = _kinds()
    own = set(books[kind].triage) - BROAD_CATEGORIES if kind in books else set()
    return frozenset({kind} | {other for other, book in books.items() if own & set(book.triage)})


@cache
def _stages() -> tuple[tuple[str, tuple[re.Pattern[str], ...], tuple[re.Pattern[str], ...], bool, str], ...]:
    """(kind, words that name its stage, words that rule it out: a later part of the run the report names, whether
    the words name a stage: the last row's only say what hangs, and the hang's own words say why it leads; the fix
    the stage calls for: a fragment of one of the runbook's fixes, "" for the runbook's own order)."""
    def compiled(words: list[str]) -> tuple[re.Pattern[str], ...]:
        return tuple(re.compile(word, re.IGNORECASE) for word in words)

    return tuple((row["kind"], compiled(row["words"]), compiled(row.get("unless", [])), row.get("names_stage", True),
                  str(row.get("fix", ""))) for row in _stage_table()["stages"])


def past_its_stage(kind: str, text: str) -> bool:
    """The report says its job hangs and names a later part of the run than ``kind``'s stage (a row of
    data/hang_stages.json for that kind whose ``unless`` words the report shows: a DeepSpeed job that hangs at its
    first batch is past DeepSpeed's start-up)."""
    head = _stage_words(text)
    later = _later_words(head)
    if HANG_WORDS.search(later) is None:
        return False
    return any(row_kind == kind and any(u.search(later) for u in unless)
               for row_kind, _words, unless, _names, _fix in _stages())


def _stage_words(text: str) -> str:
    """The report's first 4,000 characters, without an environment listing's absent packages."""
    return without_absent_packages(text[:4000])


def _later_words(head: str) -> str:
    """``head`` as the words that say it hangs and that rule a stage out read it: without paths, file names and a
    command line's option values ("--finetuning_type freeze", "--save_steps 100": how the job was launched, not what
    it does now)."""
    return OPTION_VALUE.sub(" ", PATH_OR_FILE.sub(" ", head))


def for_hang(text: str) -> Runbook | None:
    """The English runbook of the hang stage the report names (for_hang_stage), if any."""
    found = for_hang_stage(text)
    return found[0] if found else None


def for_hang_stage(text: str, *, staged: bool = True) -> tuple[Runbook, str] | None:
    """(the English runbook, the words that named the stage) for a report that says its job hangs and names where
    (data/hang_stages.json): "deepspeed 一直在等 ... Initializing TorchBackend" is a DeepSpeed start-up hang. Read
    from the report's first 4,000 characters (a prose question, or a paste's opening). ``staged=False``: the rows
    that name no stage, only what hangs (a training job), with the hang's own words."""
    found = hang_stage_named(text, staged=staged)
    return (found[0], found[1]) if found is not None else None


def hang_stage_named(text: str, *, staged: bool = True) -> tuple[Runbook, str, str] | None:
    """for_hang_stage, with the fix the stage calls for (a fragment of one of the runbook's fixes: ``synced_gpus``
    for generate() under ZeRO-3), "" where the runbook's own order holds."""
    head = _stage_words(text)
    later = _later_words(head)
    if (hang := HANG_WORDS.search(later)) is None:
        return None
    books = _kinds()
    for kind, words, unless, names_stage, fix in _stages():
        if names_stage != staged or kind not in books or any(u.search(later) for u in unless):
            continue
        if (named := next((m for w in words if (m := w.search(head)) is not None), None)) is not None:
            return books[kind], _shown(named.group(0)) if names_stage else hang.group(0), fix
    return None


SHOWN_WORDS = 80  # the most of a report's words a lead quotes as its reason


def _shown(words: str) -> str:
    """The words that named a stage as a lead quotes them: on one line, the two ends of a long match (a model's name
    and, lines below, its ZeRO stage)."""
    flat = " ".join(words.split())
    half = SHOWN_WORDS // 2
    return flat if len(flat) <= SHOWN_WORDS else f"{flat[:half].rstrip()} … {flat[-half:].lstrip()}"


def kind_of_source(source: str) -> str | None:
    """The kind of a cited runbook file (``corpus/runbooks/<lang>/<kind>.md``), else None."""
    found = RUNBOOK_SOURCE.search(source)
    book = runbooks_in(found["lang"]).get(found["kind"]) if found else None
    return book.kind if book is not None and book.source == source else None


__all__ = [
    "BROAD_CATEGORIES", "for_category", "for_hang", "for_hang_stage", "for_lines", "hang_stage_named", "in_language",
    "kind_of_source", "quoted_message", "past_its_stage", "related_kinds",
]
