"""A hang diagnosis's sentences in either language, from the phrase book (``common/data/phrases/hang.json``):
jobs.stacks, jobs.hang and `traindoc hang` say each one in English and in Chinese from the same fields. Function
names, file:line, commands and environment variables stay as they are; an error message quoted from py-spy or a
server stays as printed.

A place's label carries its phrase (``Place.phrase``); a snapshot's source arrives as jobs.hang and jobs.procs
wrote it, in English, and is matched against the English of its phrase, in the order of ``SOURCES``, and said
again from the fields it carries.
"""

from __future__ import annotations

import re
import string
from collections.abc import Iterable, Mapping, Sequence
from functools import cache
from typing import TYPE_CHECKING

from common.language import Lang, say, template
from jobs.diagnosis import span
from jobs.wording import rank_names

if TYPE_CHECKING:
    from jobs.diagnosis import JobDiagnosis
    from jobs.flight_recorder import FrFinding
    from jobs.places import Place, StackGroup

LABELS_AT = {  # a label that already ends in an aside takes the user's file:line inside it
    "hang.label.backward_waits": "hang.label.backward_waits.at",
    "hang.label.cuda_sync": "hang.label.cuda_sync.at",
}
# Where a snapshot came from, and which job (jobs.hang, jobs.procs).
SOURCES = ("hang.source.pyspy", "hang.source.debug_server", "hang.source.flight_recorder", "hang.source.ranks_behind",
           "hang.source.ranks_of")
FIELD_SHAPES = {"count": r"\d+"}  # a field not named here is any text
HINTS = ("hang.hint.fr", "hang.hint.nccl", "hang.hint.detail", "hang.hint.native", "hang.hint.nodes",
         "hang.hint.same_launch", "hang.hint.endpoint_reachable")  # jobs.stack_hints
FR_HINT = say("hang.hint.fr", "zh")
DETAIL_HINT = say("hang.hint.detail", "zh")


# -- where a group is --------------------------------------------------------------------------------------------

@cache
def _pattern(key: str) -> re.Pattern[str]:
    """The English of ``key`` as a pattern that matches a text it was said as, a group per field."""
    parts = [re.escape(literal) + (f"(?P<{name}>{FIELD_SHAPES.get(name, '.+')})" if name else "")
             for literal, name, _, _ in string.Formatter().parse(template(key, "en"))]
    return re.compile("".join(parts))


def _read_back(keys: Sequence[str], text: str) -> tuple[str, dict[str, str]] | None:
    """The first of ``keys`` whose English ``text`` is, with the fields it was said with."""
    for key in keys:
        found = _pattern(key).fullmatch(text)
        if found:
            return key, found.groupdict()
    return None


def label(where: Place, lang: Lang) -> str:
    """A place's label in ``lang``: its phrase, or the name ("dist.barrier") or quoted error it is."""
    if where.phrase is None:
        return where.label
    key, values = where.phrase
    return say(key, lang, **dict(values))


def source(text: str, lang: Lang) -> str:
    """Where a snapshot came from, and which job (jobs.hang, jobs.procs)."""
    found = _read_back(SOURCES, text)
    return say(found[0], lang, **found[1]) if found else text


def _label_at(where: Place, at: str, lang: Lang) -> str:
    """A label with the user's file:line: "dist.barrier (train.py:77)"."""
    if where.phrase is not None and where.phrase[0] in LABELS_AT:
        return say(LABELS_AT[where.phrase[0]], lang, where=at, **dict(where.phrase[1]))
    return say("hang.place.at", lang, label=label(where, lang), where=at)


def place(where: Place, lang: Lang) -> str:
    """Where a group is: ``Place.text()`` in ``lang``."""
    if where.kind == "unreadable":
        return label(where, lang)
    if where.kind in ("collective", "rendezvous", "device"):
        if where.user is not None:
            return _label_at(where, where.user.where, lang)
        said = label(where, lang)
        return say("hang.place.in", lang, label=said, inner=where.inner.text()) if where.inner else said
    if where.user is None:
        return where.inner.text() if where.inner else "?"
    text = say("hang.place.function", lang, function=where.user.function, where=where.user.where)
    if where.inner is not None and where.inner != where.user:
        text += say("hang.place.inside", lang, inner=where.inner.text())
    return text


def phrase(group: StackGroup, lang: Lang) -> str:
    """A group in a sentence: "ranks 0 and 2 wait in dist.barrier (train.py:77)"."""
    who = rank_names(group.ranks, lang)
    many = len(group.ranks) > 1
    if group.place.kind == "unreadable":
        return say("hang.group.unreadable", lang, who=who, label=label(group.place, lang))
    said = place(group.place, lang)
    if group.place.kind == "elsewhere":
        return say("hang.group.elsewhere", lang, who=who, place=said, are=say("hang.are" if many else "hang.is", lang))
    return say("hang.group.waits", lang, who=who, place=said, gap=_gap(said),
               wait=say("hang.wait" if many else "hang.waits", lang))


def _gap(text: str) -> str:
    """The space Chinese text sets after a Latin word (none after a Chinese character or bracket)."""
    return " " if text[-1:].isascii() else ""


def summary(groups: Sequence[StackGroup], lang: Lang) -> str:
    return say("jobs.clause_sep", lang).join(phrase(g, lang) for g in groups)


# -- what the verdicts add to the summary -------------------------------------------------------------------------

def rendezvous_missing(world_size: int | None, missing: Sequence[int], lang: Lang) -> str:
    return say("hang.rendezvous_missing", lang, world_size=world_size, missing=span(missing))


def remote(count: int, lang: Lang) -> str:
    return say("hang.remote", lang, count=count)


# -- why the others are not the cause -----------------------------------------------------------------------------

def _have(ranks: Sequence[int], lang: Lang) -> str:
    return say("hang.has" if len(ranks) == 1 else "hang.have", lang)


def straggler(waiting: Sequence[int], odd: Sequence[int], lang: Lang) -> str:
    return say("hang.why.straggler", lang, waiting=rank_names(waiting, lang), odd=rank_names(odd, lang), have=_have(odd, lang))


def before_init(waiting: Sequence[int], odd: Sequence[int], call: str, lang: Lang) -> str:
    return say("hang.why.before_init", lang, waiting=rank_names(waiting, lang), call=call, odd=rank_names(odd, lang),
               have=_have(odd, lang))


def gpu_straggler(syncing: Sequence[int], odd: Sequence[int], lang: Lang) -> str:
    return say("hang.why.gpu_straggler", lang, syncing=rank_names(syncing, lang), odd=rank_names(odd, lang),
               are=say("hang.is" if len(odd) == 1 else "hang.are", lang))


def mismatch(majority: Sequence[int], where: Place, lang: Lang) -> str:
    said = place(where, lang)
    return say("hang.why.mismatch", lang, majority=rank_names(majority, lang), place=said, gap=_gap(said))


# -- what would tell more -----------------------------------------------------------------------------------------

def then_stop(kind: str, pid: int, lang: Lang) -> str:
    """``jobs.hang._then_stop``'s last step: stop this job by its launcher."""
    return say("hang.then_stop", lang, kind=kind, pid=pid)


def look_at(group: StackGroup, lang: Lang) -> str:
    """The straggler's next step: why it is still where it is."""
    return say("hang.look_at", lang, who=rank_names(group.ranks, lang), place=place(group.place, lang),
               pid=group.pids[0] if group.pids else "PID", are=say("hang.are" if len(group.ranks) > 1 else "hang.is", lang))


@cache
def _hints() -> dict[str, str]:
    return {say(key, "en"): say(key, "zh") for key in HINTS}


def items(english: Iterable[str], own: Mapping[str, str] | None = None) -> list[str]:
    """Next-evidence items said in English, in Chinese: those built beside the English (``own``), the fixed hints,
    and anything else (a quoted error) as printed."""
    return [(own or {}).get(item) or _hints().get(item) or item for item in english]


# -- the diagnosis's wording --------------------------------------------------------------------------------------

def wording(root: str, why: str = "", next_items: Sequence[str] = (), symptoms: Sequence[str] = (),
            collective: str | None = None) -> dict[str, str]:
    """``JobDiagnosis.wording["zh"]``: what jobs.render and `traindoc hang` show in Chinese ("collective" is the
    collective's place, for `traindoc hang`)."""
    said = {"root": root, "why": why, "next": "\n".join(next_items), "symptoms": say("jobs.clause_sep", "zh").join(symptoms),
            "collective": collective or ""}
    return {key: value for key, value in said.items() if value}


def add_symptom(diagnosis: JobDiagnosis, chinese: str) -> None:
    """After ``diagnosis.symptoms.append(...)``: the Chinese symptoms keep saying all of them."""
    own = diagnosis.wording.setdefault("zh", {})
    own["symptoms"] = f"{own['symptoms']}{say('jobs.clause_sep', 'zh')}{chinese}" if own.get("symptoms") else chinese


def stuck_in_kernel(pids: str, seconds: float, lang: Lang) -> str:
    return say("hang.stuck_in_kernel", lang, pids=pids, seconds=seconds)


def no_workers(kind: str, pid: int, nnodes: str | None, target: str | None, inner: str | None, lang: Lang) -> str:
    """``jobs.hang._no_workers``'s summary: a launcher that started no rank."""
    return say("hang.no_workers", lang, kind=kind, pid=pid,
               nodes=say("hang.no_workers.nodes", lang, nnodes=nnodes) if nnodes else "",
               at=say("hang.no_workers.at", lang, target=target) if target else say("hang.no_workers.somewhere", lang),
               stack=say("hang.no_workers.stack", lang, inner=inner) if inner else "")


# -- Flight Recorder ----------------------------------------------------------------------------------------------

def flight_recorder(finding: FrFinding, lang: Lang = "zh") -> str:
    """``FrFinding.summary`` (jobs.flight_recorder.describe), from the finding's fields."""
    label_ = finding.collective or "?"
    expected = finding.expected_ranks or finding.ranks
    joined = [r for r in expected if r not in finding.missing_ranks and r not in finding.mismatched]
    if finding.missing_ranks:
        lasts = say("jobs.clause_sep", lang).join(say("hang.fr.last_was", lang, rank=o.rank, name=o.name, seq=o.seq)
                                                   for o in finding.last_ops if o.rank in finding.missing_ranks)
        return say("hang.fr.never_joined", lang, joined=rank_names(joined, lang), label=label_,
                   missing=rank_names(finding.missing_ranks, lang), lasts=say("hang.fr.lasts", lang, lasts=lasts) if lasts else "")
    # describe() names the first bad collective's ranks the same way with or without a mismatch; the summary's
    # first words are the one mark of a bad collective that no rank called differently (the analyzer's pass_check)
    if finding.mismatched or finding.summary.startswith("ranks diverge at"):
        others = "".join(say("hang.fr.called", lang, rank=r, call=v) for r, v in sorted(finding.mismatched.items()))
        return say("hang.fr.diverge", lang, label=label_, joined=rank_names(joined, lang),
                   name=label_.split(f" #{finding.seq}")[0], others=others)
    pending = [o for o in finding.last_ops if o.state != "completed"]
    if not pending or finding.collective is None:
        return say("hang.fr.all_completed", lang)
    states = {o.state for o in pending}
    one = len(finding.last_ops) == 1
    if states == {"scheduled"} and len(pending) == len(finding.last_ops):
        what = say("hang.fr.never_started_one" if one else "hang.fr.never_started", lang)
    elif "started" in states:
        what = say("hang.fr.stalled", lang)
    else:
        what = say("hang.fr.incomplete", lang)
    lead = (say("hang.fr.dump_ends", lang, rank=finding.last_ops[0].rank, label=label_) if one
            else say("hang.fr.dumps_agree", lang, label=label_))
    return say("hang.fr.pending", lang, lead=lead, what=what,
               where=say("hang.fr.called_at", lang, where=finding.where) if finding.where else "")


def last_op(rank: int, name: str, seq: int, state: str, where: str | None, lang: Lang) -> str:
    """A rank's last recorded collective: "rank 1: last gloo:all_reduce #3 completed at train.py:18"."""
    if where:
        return say("hang.last_op_at", lang, rank=rank, name=name, seq=seq, state=state, where=where)
    return say("hang.last_op", lang, rank=rank, name=name, seq=seq, state=state)
