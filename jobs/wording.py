"""How the job reader says things, in either language, from the phrase book (``common/data/phrases/jobs.json``):
ranks and lists named the way each language names them, the (English, Chinese) pairs a verdict carries, and the
consequences of a failure (``jobs.consequences``) and a SIGKILL (``jobs.timeline``) in Chinese. Those two modules
still write their English themselves; the same keys hold it, and a test holds the two alike."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any, Literal

from common.language import Lang, say
from jobs.diagnosis import span

# category -> the phrase keys of what the ranks did (one rank, several ranks)
SYMPTOMS = {
    "collective_timeout": ("jobs.symptom.collective_timeout", "jobs.symptom.collective_timeout"),
    "peer_closed": ("jobs.symptom.peer_closed", "jobs.symptom.peer_closed"),
    "killed_by_launcher": ("jobs.symptom.killed_by_launcher", "jobs.symptom.killed_by_launcher.many"),
    "process_abort": ("jobs.symptom.process_abort", "jobs.symptom.process_abort.many"),
}
NOUNS = {"rank": ("jobs.rank", "jobs.ranks"), "task": ("jobs.task", "jobs.tasks")}  # phrase keys: one, several
KILLED_BY_SIGKILL = say("jobs.killed_by_sigkill", "zh")


def pair(key: str, **values: Any) -> tuple[str, str]:
    """(English, Chinese) of the phrase ``key``."""
    return say(key, "en", **values), say(key, "zh", **values)


def both(said: Callable[..., str], *args: Any) -> tuple[str, str]:
    """(English, Chinese) of ``said(lang, *args)``."""
    return said("en", *args), said("zh", *args)


def listed(items: Sequence[str], lang: Lang) -> str:
    """"0, 1 and 2", with the list separators of ``lang``."""
    if len(items) < 2:
        return "".join(items)
    return say("jobs.list_sep", lang).join(items[:-1]) + say("jobs.list_and", lang) + items[-1]


def rank_names(ranks: Iterable[int], lang: Lang, noun: Literal["rank", "task"] = "rank") -> str:
    """"rank 1", "ranks 0 and 2", "ranks 0-63", "ranks 0-3,7,9-12" (``jobs.diagnosis.ranks_text``) in ``lang``;
    ``noun`` "task" names Slurm's tasks."""
    ordered = sorted(set(ranks))
    if not ordered:
        return say("jobs.no_rank", lang)
    if len(ordered) == 1:
        return say(NOUNS[noun][0], lang, rank=ordered[0])
    if len(ordered) > 3 and ordered == list(range(ordered[0], ordered[-1] + 1)):
        shown = f"{ordered[0]}-{ordered[-1]}"
    elif len(ordered) > 6:
        shown = span(ordered)
    else:
        shown = listed([str(r) for r in ordered], lang)
    return say(NOUNS[noun][1], lang, ranks=shown)


def clock(when: datetime | None, lang: Lang) -> str:
    """" at 10:01:02": when it happened, after what happened (``jobs.timeline.clock``)."""
    return say("jobs.clock", lang, time=when) if when else ""


def symptom(category: str, ranks: Sequence[int], waited_in: str, lang: Lang = "zh") -> str:
    """What ``ranks`` did, where they waited (``jobs.consequences.consequences_of``'s sentence)."""
    if category == "launcher_summary":
        return say("jobs.symptom.launcher_summary", lang)
    keys = SYMPTOMS.get(category)
    what = say(keys[len(ranks) != 1], lang) if keys else category
    who = rank_names(ranks, lang) if ranks else say("jobs.other_ranks", lang)
    if waited_in:
        return say("jobs.symptom_in", lang, who=who, what=what, where=waited_in)
    return say("jobs.symptom", lang, who=who, what=what)


def why(rank: int | None, symptoms: Sequence[str], launcher_summary: bool, lang: Lang = "zh") -> str:
    """Why the consequences are not causes (``jobs.consequences.why``). ``symptoms``: their sentences in ``lang``,
    the launcher's own summary left out; ``launcher_summary``: torchrun's table is among them."""
    culprit = say("jobs.why.rank_failed", lang, rank=rank) if rank is not None else say("jobs.why.that_failure", lang)
    said = say("jobs.clause_sep", lang).join(symptoms) if symptoms else say("jobs.why.summarised", lang)
    named = say("jobs.why.first_observed", lang) if launcher_summary else ""
    gap = " " if said[:1].isascii() else ""  # Chinese text sets a space before a Latin word
    return say("jobs.why", lang, said=said, culprit=culprit, lead=say("jobs.timeout_lead", lang), named=named, gap=gap)
