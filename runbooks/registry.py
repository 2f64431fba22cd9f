"""The registry of failure kinds: the one place a kind is defined, every other table names kinds from here.

A kind is one runbook (``corpus/runbooks/<lang>/<kind>.md``): its front matter gives the title, the triage
categories that diagnose it and the messages that identify it; ``data/kinds.json`` adds what tells it apart from
its neighbours (``signals``, the report's own words), which of its messages other failures print too
(``generic``: they name the kind only beside a signal) and the neighbours themselves. ``problems()`` checks every
table that names a kind (the hang stages, the triage defaults, the seed sections' kinds) against it, and that no
two kinds claim the same identifying message.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

from runbooks.catalog import runbooks_in


@dataclass(frozen=True)
class Kind:
    name: str
    title: str
    triage: tuple[str, ...]
    messages: tuple[str, ...]  # what the failure prints (front matter, English runbook)
    generic: frozenset[str]  # those of ``messages`` other failures print too
    signal_patterns: tuple[str, ...]  # words of a report that tell this kind from its neighbours (compiled when asked)
    neighbours: dict[str, str]  # neighbour kind -> what tells them apart
    yields_to: tuple[str, ...] = ()  # neighbours that lead instead when only their signal shows
    # Details a follow-up to a neighbour adds that make this kind the one that differs ("and in Kubernetes?" after an
    # NCCL hang: a pod's /dev/shm). Read only for follow-ups: a first question naming a platform names no failure.
    detail_patterns: tuple[str, ...] = ()
    confirm_with: str = ""  # the command that shows this failure now and its absence after the fix (traindoc check)
    ruled_out_by: tuple[str, ...] = ()  # stated facts of the setup under which this is not the failure (one node)
    notices: frozenset[str] = frozenset()  # those of ``messages`` that name it only where nothing else quoted does
    nccl_info: frozenset[str] = frozenset()  # those of ``messages`` NCCL prints in its INFO lines: they name it there
    # Neighbour -> {"when": the moment (a regular expression of the report's words) at which this kind's failure is
    # that neighbour's, "fix": a fragment of the neighbour's fix the moment calls for}: an out-of-memory error while an
    # FSDP checkpoint is saved is the full state dict gathered on GPU, and gathering it with CPU offload comes first.
    narrows_to: dict[str, dict[str, str]] = field(default_factory=dict)
    # The asker's own words that state this kind outright, with no error quoted ("V100 不支持 bf16", "bf16 is not
    # supported on our T4s"): they lead where nothing quoted decides. Only where the words leave no neighbour open.
    stated_by: tuple[str, ...] = ()
    # {"when": words of the report, "fix": a fragment of one of this kind's own fixes}: a moment of the failure that
    # calls for that fix first (a CPU allocation of terabytes is a size gone wrong, not RAM to free).
    moments: tuple[dict[str, str], ...] = ()

    @property
    def specific(self) -> tuple[str, ...]:
        return tuple(m for m in self.messages if m not in self.generic and m not in self.notices)

    @property
    def signals(self) -> tuple[re.Pattern[str], ...]:
        return _compiled(self.signal_patterns)

    def signal_in(self, text: str) -> str | None:
        """The words of ``text`` that tell this kind from its neighbours, or None. Words the report denies ("to avoid
        OOM", "no NaN", "没有出现 OOM") are not its failure, nor are the words of the kind's own notices (Ray's list
        of possible causes names the OOM killer whatever killed the worker)."""
        inside = [(at, at + len(m)) for m in self.notices for at in _occurrences(text, m)]
        return next((found.group(0) for pattern in self.signals for found in pattern.finditer(text)
                     if not denied(text, found.start())
                     and not any(start <= found.start() < end for start, end in inside)), None)

    def detail_in(self, text: str) -> str | None:
        """The follow-up detail of ``text`` that makes this kind the one that differs, or None."""
        found = next((m for p in _compiled(self.detail_patterns) if (m := p.search(text)) is not None), None)
        return found.group(0) if found is not None else None


# A report's words that deny what follows them, with at most a filler word between: "to avoid OOM", "no more NaN",
# "isn't an OOM", "没有出现 OOM", "避免 OOM". Read back from where a signal starts, on its own line.
DENIED = re.compile(
    r"(?:(?<![\w'])(?:no|not|without|never|avoid(?:s|ed|ing)?|prevent(?:s|ed|ing)?)|n't)"
    r"(?:\s+(?:a|an|the|any|more|getting|hitting|seeing|causing))?\s+$"
    r"|(?:没有|没|不是|并非|避免|防止|不会)(?:出现|发生|遇到|再)?\s*$",
    re.IGNORECASE)
DENIAL_REACH = 40  # characters before a signal read for a denial


def _occurrences(text: str, message: str) -> list[int]:
    found, at = [], text.find(message)
    while at >= 0:
        found.append(at)
        at = text.find(message, at + len(message))
    return found


def denied(text: str, start: int) -> bool:
    """Whether the words just before ``start`` deny what starts there."""
    before = text[max(0, start - DENIAL_REACH):start]
    return DENIED.search(before.rpartition("\n")[2]) is not None


@cache
def _compiled(patterns: tuple[str, ...]) -> tuple[re.Pattern[str], ...]:
    """A kind's signals, compiled the first time a report is checked against them (a cold start compiles none)."""
    return tuple(re.compile(p, re.IGNORECASE) for p in patterns)


def _data(name: str, package: str = "runbooks") -> Any:
    return json.loads(resources.files(package).joinpath(f"data/{name}").read_text(encoding="utf-8"))


@cache
def kinds() -> dict[str, Kind]:
    """Every kind, by name (the English runbooks' front matter with data/kinds.json beside it)."""
    extra = _data("kinds.json")["kinds"]
    table: dict[str, Kind] = {}
    for name, book in runbooks_in("en").items():
        row = extra.get(name, {})
        table[name] = Kind(name, book.title, book.triage, book.messages, frozenset(row.get("generic", ())),
                           tuple(row.get("signals", ())),
                           dict(row.get("neighbours", {})), tuple(row.get("yields_to", ())),
                           tuple(row.get("follow_up_details", ())), str(row.get("confirm_with", "")),
                           tuple(row.get("ruled_out_by", ())), frozenset(row.get("notices", ())),
                           frozenset(row.get("nccl_info", ())), dict(row.get("narrows_to", {})),
                           tuple(row.get("stated_by", ())), tuple(row.get("moments", ())))
    return table


def kind(name: str) -> Kind | None:
    return kinds().get(name)


def signalled(name: str, text: str) -> str | None:
    """The words of ``text`` that tell kind ``name`` from its neighbours (None: none, or no such kind)."""
    found = kind(name)
    return found.signal_in(text) if found is not None else None


def yielded(name: str, text: str) -> tuple[str, str] | None:
    """(the neighbour, its words) that leads instead of kind ``name`` (data/kinds.json yields_to): the report quotes
    one of that neighbour's own messages (PyTorch's "not compatible with the current PyTorch installation" beside
    the "no kernel image" both print), or shows that neighbour's signal and none of this kind's own."""
    own = kind(name)
    if own is None or not own.yields_to:
        return None
    for other in own.yields_to:
        neighbour = kind(other)
        if neighbour is not None and (quoted := next((m for m in neighbour.specific if m in text), None)) is not None:
            return other, quoted
    if own.signal_in(text) is not None:
        return None
    for other in own.yields_to:
        if (words := signalled(other, text)) is not None:
            return other, words
    return None


def narrowed(name: str, text: str) -> tuple[str, str, str] | None:
    """(the neighbour, the words of the moment, the fix it calls for) that kind ``name``'s failure narrows to in
    ``text`` (data/kinds.json narrows_to): the report says when the failure came (a checkpoint being saved) and shows
    that neighbour's own signal (FSDP): "CUDA out of memory while saving" in an FSDP job is the full state dict
    gathered on one GPU."""
    own = kind(name)
    for other, row in (own.narrows_to.items() if own is not None else ()):
        moment = _compiled((row["when"],))[0]
        found = next((m for m in moment.finditer(text) if not denied(text, m.start())), None)
        if found is not None and signalled(other, text) is not None:
            return other, found.group(0), row.get("fix", "")
    return None


def moment_fix(name: str, text: str) -> tuple[str, str] | None:
    """(the words of the moment, the fix it calls for) of kind ``name`` in ``text`` (data/kinds.json moments): the
    report shows a moment of this kind's failure that one of its own fixes answers first."""
    own = kind(name)
    for row in (own.moments if own is not None else ()):
        found = _compiled((row["when"],))[0].search(text)
        if found is not None:
            return found.group(0), row["fix"]
    return None


STATED_IN = 4000  # how much of a report the asker's own statement of a kind is read in (its title and opening)


def stated_kind(text: str) -> tuple[str, str] | None:
    """(the kind, the words) that the report's opening states outright (data/kinds.json ``stated_by``), not denied,
    in the asker's own words: a line of pasted output that reads alike (lmdeploy's "Device does not support
    bfloat16" between its timestamped lines) states nothing (corpus.errorlines.output_lines)."""
    from corpus.errorlines import output_lines

    head = text[:STATED_IN]
    output: set[int] | None = None
    for name, own in kinds().items():
        for pattern in _compiled(own.stated_by):
            for found in pattern.finditer(head):
                if denied(head, found.start()):
                    continue
                output = output_lines(head.split("\n")) if output is None else output
                if head.count("\n", 0, found.start()) not in output:
                    return name, found.group(0)
    return None


def neighbours_of(name: str) -> frozenset[str]:
    """The kinds a report of kind ``name`` is most often confused with (data/kinds.json neighbours)."""
    own = kind(name)
    return frozenset(own.neighbours) if own is not None else frozenset()


def neighbour_named(name: str, new_words: str, earlier: str) -> tuple[str, str] | None:
    """(the neighbour of kind ``name``, its words) that a follow-up's ``new_words`` name and the ``earlier`` turns did
    not: "and on 8 nodes?" after a collective timeout is the network between nodes. None unless exactly one does."""
    own = kind(name)
    named = [(other, words) for other in (own.neighbours if own is not None else ())
             if (words := _named(other, new_words)) is not None and _named(other, earlier) is None]
    return named[0] if len(named) == 1 else None


def _named(name: str, text: str) -> str | None:
    """The words of ``text`` that name kind ``name`` in a follow-up: its signal, or a detail that makes it differ."""
    found = kind(name)
    return None if found is None else found.signal_in(text) or found.detail_in(text)


def unsignalled_generic(text: str) -> frozenset[str]:
    """The generic messages that do not name their kind in ``text``: the report shows none of its signals and none of
    the details that make the kind the one that differs (NCCL's "unhandled system error" in a Docker container is
    its shared memory; a message ``text`` does not show is in the set too: it names nothing here, and its kind's
    signals are not compiled)."""
    return frozenset(m for k in kinds().values() for m in k.generic
                     if m not in text or (k.signal_in(text) is None and k.detail_in(text) is None))



@cache
def in_nccl_info(name: str) -> frozenset[str]:
    """The messages of kind ``name`` that name it inside a line NCCL logs at INFO level (data/kinds.json nccl_info)."""
    found = kinds().get(name)
    return found.nccl_info if found is not None else frozenset()


@cache
def notices() -> frozenset[str]:
    """Every kind's messages that name it only where nothing else quoted does (data/kinds.json notices): a warning a
    job goes on past (accelerate's "Using DeepSpeed's value", the DataLoader's suggested number of workers), or a
    list of possible causes (Ray's dead worker, the OOM killer first) that a more specific message beside it
    settles (runbooks.choose.quoted_message)."""
    return frozenset(m for k in kinds().values() for m in k.notices)


def _stated_facts() -> set[str]:
    """The facts of a setup the asker's words can state (agent/data/stated.json)."""
    return {row["name"] for row in _data("stated.json", "agent")["facts"]}


def ruled_out(name: str, facts: Collection[str]) -> str | None:
    """The stated fact (of ``facts``) under which kind ``name`` is not the failure, if any (data/kinds.json)."""
    own = kind(name)
    return next((fact for fact in own.ruled_out_by if fact in facts), None) if own is not None else None


def _named_by_tables() -> dict[str, set[str]]:
    """Table -> the kinds it names: the hang stages, the triage defaults, the seed sections' kinds, the neighbours."""
    stages = _data("hang_stages.json")["stages"]
    defaults = {str(v) for k, v in _data("defaults.json").items() if not k.startswith("_")}
    sections = _data("section_kinds.json", "corpus")["sections"]
    return {
        "runbooks/data/hang_stages.json": {row["kind"] for row in stages},
        "runbooks/data/defaults.json": defaults,
        "corpus/data/section_kinds.json": {k for rows in sections.values() for row in rows.values() for k in row["kinds"]},
        "runbooks/data/kinds.json": set(_data("kinds.json")["kinds"])
        | {n for row in _data("kinds.json")["kinds"].values()
           for n in [*row.get("neighbours", {}), *row.get("yields_to", ()), *row.get("narrows_to", {})]},
    }


def problems() -> list[str]:
    """What is wrong with the registry: a table naming a kind it lacks, a generic message the kind does not print,
    two kinds claiming one identifying message, a kind without signals."""
    found: list[str] = []
    table = kinds()
    for source, named in _named_by_tables().items():
        found += [f"{source} names kind {name!r}, which the registry lacks" for name in sorted(named - set(table))]
    owners: dict[str, str] = {}
    for k in table.values():
        found += [f"{k.name}: generic message {m!r} is not one of its messages" for m in sorted(k.generic - set(k.messages))]
        found += [f"{k.name}: notice {m!r} is not one of its messages" for m in sorted(k.notices - set(k.messages))]
        found += [f"{k.name}: NCCL INFO message {m!r} is not one of its messages"
                  for m in sorted(k.nccl_info - set(k.messages))]
        found += [f"{k.name}: narrows to {other!r}, which is not one of its neighbours"
                  for other in k.narrows_to if other not in k.neighbours]
        if not k.signal_patterns:
            found.append(f"{k.name}: no signals tell it from its neighbours")
        found += [f"{k.name}: ruled out by {fact!r}, which agent/data/stated.json does not state"
                  for fact in k.ruled_out_by if fact not in _stated_facts()]
        for message in k.messages:
            if (other := owners.setdefault(message, k.name)) != k.name:
                found.append(f"{k.name} and {other} both claim the message {message!r}")
    return found


__all__ = ["Kind", "in_nccl_info", "kind", "kinds", "moment_fix", "narrowed", "neighbour_named", "notices", "problems",
           "ruled_out", "signalled", "stated_kind", "unsignalled_generic", "yielded"]
