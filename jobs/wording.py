"""How the job reader says things, in either language, from the phrase book (``common/data/phrases/jobs.json``):
ranks and lists named the way each language names them, the (English, Chinese) pairs a verdict carries, and the
consequences of a failure and why they are not causes (``jobs.consequences``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from common.language import Lang, say
from jobs.diagnosis import listed, ranks_text

# category -> the phrase keys of what the ranks did (one rank, several ranks)
SYMPTOMS = {
    "collective_timeout": ("jobs.symptom.collective_timeout", "jobs.symptom.collective_timeout"),
    "peer_closed": ("jobs.symptom.peer_closed", "jobs.symptom.peer_closed"),
    "killed_by_launcher": ("jobs.symptom.killed_by_launcher", "jobs.symptom.killed_by_launcher.many"),
    "process_abort": ("jobs.symptom.process_abort", "jobs.symptom.process_abort.many"),
}
rank_names = ranks_text  # "rank 1", "ranks 0 and 2" in either language (``jobs.diagnosis.ranks_text``)
__all__ = ["both", "clock", "listed", "pair", "rank_names", "symptom", "why"]


def pair(key: str, **values: Any) -> tuple[str, str]:
    """(English, Chinese) of the phrase ``key``."""
    return say(key, "en", **values), say(key, "zh", **values)


def both(said: Callable[..., str], *args: Any) -> tuple[str, str]:
    """(English, Chinese) of ``said(lang, *args)``."""
    return said("en", *args), said("zh", *args)


def clock(when: datetime | None, lang: Lang) -> str:
    """" at 10:01:02": when it happened, after what happened (``jobs.timeline.clock``)."""
    return say("jobs.clock", lang, time=when) if when else ""


def symptom(category: str, ranks: Sequence[int], waited_in: str, lang: Lang,
            report: str = "jobs.symptom.launcher_summary") -> str:
    """What ``ranks`` did, where they waited (``jobs.consequences.consequences_of``'s sentence); ``report``: the phrase
    that names the launcher's report, for the category ``launcher_summary``."""
    if category == "launcher_summary":
        return say(report, lang)
    keys = SYMPTOMS.get(category)
    what = say(keys[len(ranks) != 1], lang) if keys else category
    who = rank_names(ranks, lang) if ranks else say("jobs.other_ranks", lang)
    if waited_in:
        return say("jobs.symptom_in", lang, who=who, what=what, where=waited_in)
    return say("jobs.symptom", lang, who=who, what=what)


def why(rank: int | None, symptoms: Sequence[str], launcher_summary: bool, lang: Lang) -> str:
    """Why the consequences are not causes (``jobs.consequences.why``). ``symptoms``: their sentences in ``lang``,
    the launcher's own summary left out; ``launcher_summary``: torchrun's table is among them."""
    culprit = say("jobs.why.rank_failed", lang, rank=rank) if rank is not None else say("jobs.why.that_failure", lang)
    said = say("jobs.clause_sep", lang).join(symptoms) if symptoms else say("jobs.why.summarised", lang)
    named = say("jobs.why.first_observed", lang) if launcher_summary else ""
    gap = " " if said[:1].isascii() else ""  # Chinese text sets a space before a Latin word
    return say("jobs.why", lang, said=said, culprit=culprit, lead=say("jobs.timeout_lead", lang), named=named, gap=gap)
