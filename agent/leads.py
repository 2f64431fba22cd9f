"""Which runbook leads an answer: one ordered table of small rules, strongest evidence first.

Each rule reads the same ``LeadEvidence`` and returns a ``Lead`` (the kind, why, the words it rests on), ``Stop``
(the evidence decides that no runbook leads: later, weaker rules are not asked) or None (it has nothing to say).
The first rule that answers decides; the answer says why it leads with what it leads (``Lead.because``). A new
kind of evidence is one function and one row of ``RULES``.

    diagnosis        the job's triage names a kind (its logs compared across ranks)
    quoted           a pasted line shows a message that identifies a kind (the most specific message wins; a
                     generic head, ``ZeroDivisionError`` or ``No module named X``, identifies nothing)
    named_thing      a generic head whose named thing tells the kind: ``No module named X`` where X is no published
                     package (the project's own), ``KeyError: 'RANK'`` (a launcher's variable), a transformers
                     submodule, name or class attribute missing (its API moved between releases)
    hang_stage       the report says the job hangs and names the stage (runbooks/data/hang_stages.json)
    stated           the asker's own words state a kind outright (registry: stated_by; "v100 不支持 bf16")
    retrieved        a document section answers and retrieval is as sure of a runbook (a likeness), or nearly as sure
                     where the report signals that runbook's kind alone and the section's kinds not at all (or at all
                     where the section's first install command is the one the report shows failing)
    section_kind     the section that answers is recorded about a kind (corpus/data/section_kinds.json)
    unstaged_hang    a training job hangs and nothing above names where: the command that finds where ranks wait

A kind the setup the asker states rules out (registry: ruled_out_by; "single node" for the network between nodes)
leads only on what the failure printed (the diagnosis, its own message), and not at all where the fact is binding
(another accelerator, another framework); a weaker rule may answer instead.

A follow-up's new words that name a neighbour of the chosen kind, and the earlier turns did not, move the lead to
that neighbour ("and on 8 nodes?" after a collective timeout: the network between nodes).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from agent.exceptions import recognise
from agent.stated import binding_facts, stated_facts
from common.absent_platforms import without_absent_packages
from common.language import Lang
from corpus.kinds import about_no_kind, section_kinds
from jobs.diagnosis import JobDiagnosis
from runbooks.choose import (
    BROAD_CATEGORIES,
    for_category,
    for_hang_stage,
    hang_stage_named,
    kind_of_source,
    past_its_stage,
    quoted_message,
)
from runbooks.registry import (
    moment_fix,
    narrowed,
    neighbour_named,
    neighbours_of,
    ruled_out,
    signalled,
    stated_kind,
    unsignalled_generic,
    yielded,
)

CHOSEN_CONFIDENCE = 0.9  # a runbook named by the diagnosis or by the exact message it answers
RUNBOOK_ALONE = 0.75  # where no section answers, how sure retrieval must be of a runbook (with its kind's signal)
# How much less sure of a runbook than of the best section retrieval may be for the runbook (with its kind's signal)
# to lead: the two confidences come from different pools and differ by noise. Chosen on the worked parts of the
# visible sets (dev, dev2, two thirds of dev3, fresh, half of the fresh_b reports): 0.05 moved one report, to the right
# runbook, and none away; 0.1 cost one.
ABOUT_AS_SURE = 0.05
# The same, where the answering section is about no kind, or about kinds whose signals the report does not show (a
# section on slow training for a report of a process Killed with RAM full), while the report shows words that signal
# the runbook's kind and none of its neighbours: the evidence tells the runbook's kind apart, the section's likeness
# does not. Chosen on the worked parts of the visible sets (0.15 and 0.25 moved the same two reports, both to the
# right runbook, none away); the held parts, scored as totals only, rose (dev3 0.70 -> 0.78) and lost nothing.
LESS_SURE_PAST_AN_UNSHOWN_KIND = 0.15


@dataclass(frozen=True)
class Retrieved:
    """The runbook retrieval found to answer the question (searched apart from the documents), and how sure."""

    source: str
    confidence: float | None


@dataclass(frozen=True)
class LeadEvidence:
    """What the lead decision reads: the question, the job's diagnosis, the error lines, and what retrieval found."""

    text: str
    job: JobDiagnosis | None
    errors: Sequence[str]
    lang: Lang
    retrieved: Retrieved | None = None  # the runbook retrieval found most alike
    documents: float | None = None  # the confidence that the best document section answers; None when none does
    best_section: tuple[str, str] | None = None  # (source, heading path) of the section that answers
    by_section_kind: bool = True  # False where a probe's finding gives the first fix
    new_words: str = ""  # a follow-up's own words (``text`` holds them after what they follow up on)
    pasted: bool = False  # the job is a cascade pasted into the question, not logs read from files
    section_ran: str = ""  # the answering section's first install command, which the report shows already failed

    def words(self) -> str:
        """All the report's own words: the question, its error lines, the lines the job's cause shows."""
        job_lines = [*self.job.root_cause.evidence, *self.job.search_lines] if self.job and self.job.root_cause else []
        return without_absent_packages("\n".join([self.text, *self.errors, *job_lines]))


@dataclass(frozen=True)
class Lead:
    """A runbook kind leads: which rule decided, the words of the report it rests on, and how sure."""

    kind: str
    rule: str
    because: str  # the line or words that decided ("" for a likeness)
    confidence: float | None
    established: bool  # named by the evidence (diagnosis, message, stage), not a likeness
    fix: str = ""  # the fix the evidence calls for (a fragment of one of the runbook's fixes); "": the runbook's order


@dataclass(frozen=True)
class Stop:
    """The evidence decides that no runbook leads (a diagnosed kind no runbook answers)."""

    rule: str


Rule = Callable[[LeadEvidence], "Lead | Stop | None"]


def diagnosis(ev: LeadEvidence) -> Lead | Stop | None:
    """The job's logs name the root cause: its category's runbook, refined by the lines the cause shows."""
    job = ev.job
    if job is None or job.root_cause is None:
        return None
    if not _timed_out_or_hung(job):  # only the launcher's reaction shown: no timeout to answer, the cause is above
        return None if ev.pasted else Stop("diagnosis")  # a paste's own words (a message it quotes) may decide, below
    wrapped = _wrapped_on(ev.text, job.root_cause.evidence) if ev.pasted else []
    lines = [*job.root_cause.evidence, *job.search_lines, *wrapped]
    book = for_category(job.root_cause.category, lines, unsignalled_generic(ev.words()))
    if book is None and job.root_cause.category in BROAD_CATEGORIES and ev.pasted:
        return None  # a pasted report's broad category ("config") names no kind: the message it quotes may, below
    if book is None:  # the diagnosis named a kind no runbook answers; the other lines are its consequences
        return Stop("diagnosis")
    return Lead(book.kind, "diagnosis", next(iter(job.root_cause.evidence), ""), CHOSEN_CONFIDENCE, True)


WRAPPED_LINES = 3  # how many lines after a pasted root-cause line may hold the rest of its wrapped message


def _wrapped_on(text: str, evidence: Sequence[str]) -> list[str]:
    """The lines of a pasted report that follow its root-cause line: where the paste wrapped the message ("...
    killed by signal: Bus" / "error. It is possible that dataloader's workers are out of shared" / "memory."),
    they hold the rest of it."""
    first = next((line.strip() for line in evidence if line.strip()), "")
    lines = text.splitlines()
    at = next((i for i, line in enumerate(lines) if first and first in line), None)
    return [] if at is None else lines[at + 1:at + 1 + WRAPPED_LINES]


def quoted(ev: LeadEvidence) -> Lead | None:
    """A pasted error line (else a line of the question) shows the message that identifies a kind (the longest: the
    most specific); a message other failures print too (registry: generic) only beside the kind's signal."""
    generic = unsignalled_generic(ev.words())
    for lines in (list(ev.errors), ev.text.splitlines()):
        if (found := quoted_message(lines, generic)) is not None:
            book, line = found
            return Lead(book.kind, "quoted", line.strip(), CHOSEN_CONFIDENCE, True)
    return None


def named_thing(ev: LeadEvidence) -> Lead | None:
    """A generic exception whose named thing tells the kind (agent/data/exceptions.json): a missing module that is no
    published package is the project's own package not importable where the job runs; ``KeyError: 'RANK'`` a
    launcher's variable never set; a missing submodule, name or class attribute of transformers an API moved between
    releases."""
    raised = recognise([*ev.errors, *ev.text.splitlines()])
    if raised is None or not (kind := raised.own_kind or raised.named_kind):
        return None
    because = "own_module" if raised.own_kind else "named_thing"  # why it leads, in words (lead_why_<because>)
    return Lead(kind, because, raised.line, CHOSEN_CONFIDENCE, True, "" if raised.own_kind else raised.named_fix)


def hang_stage(ev: LeadEvidence) -> Lead | None:
    """The report says the job hangs and where: the runbook of that stage."""
    if (found := hang_stage_named(ev.text)) is None:
        return None
    book, words, fix = found
    return Lead(book.kind, "hang_stage", words, CHOSEN_CONFIDENCE, True, fix)


def stated(ev: LeadEvidence) -> Lead | None:
    """The asker's own words state a kind outright (registry: stated_by; "v100 不支持 bf16"), and nothing quoted decided:
    that kind leads, as sure as a runbook retrieval is sure of alone."""
    if (found := stated_kind(ev.text)) is None:
        return None
    return Lead(found[0], "stated", found[1], RUNBOOK_ALONE, False)


def retrieved(ev: LeadEvidence) -> Lead | Stop | None:
    """A section answers, and retrieval is about as sure of a runbook (ABOUT_AS_SURE): the runbook's checked fixes lead
    it. Where no section answers, only a runbook retrieval is sure of on its own, with its kind's signal (``_alone``);
    not where the answering section is recorded about no kind a runbook answers (a question about training speed that
    reads like the DeepSpeed start-up runbook is answered by the tuning section), unless the report shows the runbook's
    own kind (its signal: "very slow", "GPU utilization is low" for the slow-training runbook past a tuning section)."""
    if ev.documents is None:
        return _alone(ev)
    found = ev.retrieved
    if ev.best_section is not None and about_no_kind(*ev.best_section) and (
            found is None or (kind := kind_of_source(found.source)) is None or signalled(kind, ev.words()) is None):
        return Stop("retrieved")
    if found is None or (kind := kind_of_source(found.source)) is None:
        return None
    text = ev.words()
    if past_its_stage(kind, ev.text):
        return None  # the job hangs later than that kind's stage (a DeepSpeed job at its first batch)
    if (words := signalled(kind, text)) is None:
        # a likeness alone, nothing in the report that tells this kind from its neighbours; unless it shows the
        # neighbour this kind yields to (registry: yields_to), read alike and told apart by the report's own words
        return _yielded_likeness(kind, text, found, ev.documents)
    past_unshown = _section_kind_unshown(ev, text) and _distinctive(kind, words)
    if ev.section_ran and past_unshown:
        return Lead(kind, "retrieved", f"{words} · {ev.section_ran}", found.confidence, False)  # the section's fix failed
    if (found.confidence or 0.0) < ev.documents - (LESS_SURE_PAST_AN_UNSHOWN_KIND if past_unshown else ABOUT_AS_SURE):
        return None
    return Lead(kind, "retrieved", words, found.confidence, False)


def _section_kind_unshown(ev: LeadEvidence, text: str) -> bool:
    """The answering section is about no failure kind, or about kinds none of whose signals ``text`` (the report's
    words) shows: its likeness rests on words the kinds share, not on what tells them apart."""
    if ev.best_section is None:
        return False
    if about_no_kind(*ev.best_section):
        return True
    kinds = section_kinds(*ev.best_section).kinds  # none: a section not recorded (a team's document) is not judged
    return bool(kinds) and all(signalled(kind, text) is None for kind in kinds)


def _distinctive(kind: str, words: str) -> bool:
    """The words that signal ``kind`` signal none of its neighbours ("checkpoint" signals a corrupt file and a
    mismatched one alike; "Killed" only the host's OOM killer)."""
    return all(signalled(other, words) is None for other in neighbours_of(kind))


def _alone(ev: LeadEvidence) -> Lead | None:
    """No document section answers: the runbook retrieval found leads only when retrieval is sure of it on its own
    (RUNBOOK_ALONE) and the report shows that kind's signal; a runbook's broad words alone read like many questions."""
    found = ev.retrieved
    kind = kind_of_source(found.source) if found is not None else None
    if found is None or kind is None or (found.confidence or 0.0) < RUNBOOK_ALONE:
        return None
    text = ev.words()
    if past_its_stage(kind, ev.text):
        return None
    if (words := signalled(kind, text)) is None:
        return _yielded_likeness(kind, text, found, None)
    return Lead(kind, "retrieved", words, found.confidence, False)


def _yielded_likeness(kind: str, text: str, found: Retrieved, documents: float | None) -> Lead | None:
    """Retrieval's runbook is of a kind the report shows nothing of, and the report shows the neighbour that kind
    yields to (registry: yields_to; NCCL's invalid argument and the P2P that consumer GPUs lack read alike): the
    neighbour leads, as sure as retrieval was of the runbook and, where a section answers, about as sure as of it."""
    if (other := yielded(kind, text)) is None:
        return None
    if documents is not None and (found.confidence or 0.0) < documents - ABOUT_AS_SURE:
        return None
    return Lead(other[0], "retrieved", other[1], found.confidence, False)


def section_kind(ev: LeadEvidence) -> Lead | None:
    """The section that answers is recorded about a failure kind (most specific first): that kind's runbook gives
    its checked fixes first, the section follows."""
    if not ev.by_section_kind or ev.best_section is None or ev.documents is None:
        return None
    kinds = section_kinds(*ev.best_section).kinds
    if not kinds or (words := signalled(kinds[0], ev.words())) is None:
        return None  # the section's kind, but nothing in the report tells it from its neighbours
    if past_its_stage(kinds[0], ev.text):
        return None  # the job hangs later than that kind's stage: a likeness the report's own words rule out
    return Lead(kinds[0], "section_kind", words, ev.documents, False)


def unstaged_hang(ev: LeadEvidence) -> Lead | None:
    """A training job hangs and nothing above named where or why (hang_stages.json rows with names_stage false):
    the runbook whose first fix is the command that finds where each rank waits."""
    if (found := for_hang_stage(ev.text, staged=False)) is None:
        return None
    book, words = found
    return Lead(book.kind, "unstaged_hang", words, CHOSEN_CONFIDENCE, True)


RULES: tuple[tuple[str, Rule], ...] = (
    ("diagnosis", diagnosis),  # the logs compared across ranks outweigh any one line
    ("quoted", quoted),  # an identifying message pasted: what the failure printed
    ("named_thing", named_thing),  # a generic head whose named thing tells the kind (the project's own module)
    ("hang_stage", hang_stage),  # a hang has no message: where it stalls names it
    ("stated", stated),  # the asker's words state the kind outright ("bf16 is not supported on our T4s")
    ("retrieved", retrieved),  # likeness: only where a document section answers too
    ("section_kind", section_kind),  # the kind the answering section is recorded about
    ("unstaged_hang", unstaged_hang),  # a training job hangs, no stage named: find where the ranks wait
)


def decide(ev: LeadEvidence) -> Lead | None:
    """The first rule of ``RULES`` that answers decides; None when nothing leads. A kind whose own signal the report
    lacks, while a neighbour's shows, yields to that neighbour (registry: yields_to): a GPU named beside ``no kernel
    image`` and no extension named is the PyTorch build, not an extension. A kind whose failure came at a moment that
    is a neighbour's narrows to it (registry: narrows_to): an OOM while an FSDP checkpoint is saved."""
    facts: tuple[str, ...] | None = None  # the setup the asker states, read when a likeness would lead
    for _name, rule in RULES:
        outcome = rule(ev)
        if isinstance(outcome, Stop):
            return None
        if outcome is not None:
            facts = stated_facts(ev.words()) if facts is None else facts
            if (fact := ruled_out(outcome.kind, facts)) is not None and (
                    outcome.rule not in OUTWEIGH_THE_SETUP or fact in binding_facts()):
                continue  # "single node" and the network between nodes: a weaker rule may still answer
            if (other := yielded(outcome.kind, ev.words())) is not None:
                return replace(outcome, kind=other[0], because=f"{outcome.because} · {other[1]}".strip(" ·"))
            if (moment := narrowed(outcome.kind, ev.words())) is not None:
                return replace(outcome, kind=moment[0], because=f"{outcome.because} · {moment[1]}".strip(" ·"),
                               fix=moment[2])
            if not outcome.fix and (moment_of := moment_fix(outcome.kind, ev.words())) is not None:
                outcome = replace(outcome, fix=moment_of[1])
            earlier = ev.text[: len(ev.text) - len(ev.new_words)]
            if ev.new_words and (named := neighbour_named(outcome.kind, ev.new_words, earlier)) is not None:
                return Lead(named[0], "follow_up", named[1], outcome.confidence, outcome.established)
            return outcome
    return None


# The rules whose evidence is what the failure printed (the job's logs, its own message): a fact of the setup the asker
# states (one node, registry: ruled_out_by) does not outweigh them; it rules a kind out of every other rule. A binding
# fact (agent/data/stated.json: another accelerator, another framework) outweighs them too: ROCm's "HIP error: no
# kernel image" reads like CUDA's, and the CUDA wheel's fixes are not its fixes.
OUTWEIGH_THE_SETUP = frozenset({"diagnosis", "quoted"})

LAUNCHER_REACTIONS = frozenset({"killed_by_launcher", "launcher_summary"})


def _timed_out_or_hung(job: JobDiagnosis) -> bool:
    """False for a log whose cause is unknown and that shows only the launcher stopping its ranks (torchrun's
    SIGTERM, DeepSpeed's "Killing subprocess", Slurm cancelling the step): the "cause not yet known" runbook is
    about timeouts and hangs, and these lines are neither; the verdict asks for the lines above them."""
    if job.root_cause is None or job.root_cause.category != "unknown" or job.kind == "hang" or job.collective:
        return True
    return not job.symptoms or any(s.category not in LAUNCHER_REACTIONS for s in job.symptoms)


__all__ = ["CHOSEN_CONFIDENCE", "RULES", "Lead", "LeadEvidence", "Retrieved", "Stop", "decide"]
