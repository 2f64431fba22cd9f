"""The runbook that leads an answer: the fix follows the diagnosis.

When a job's diagnosis, a pasted error or the best retrieved section names a failure kind that one of
traindoc's runbooks answers, that runbook (in the asker's language) is citation [1] and supplies the fixes; the
sections retrieval found follow as See also, so a section about another kind never supplies the first fix.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import replace
from functools import partial
from typing import Any

from agent.answer import Citation
from agent.leads import CHOSEN_CONFIDENCE, Lead, LeadEvidence, Retrieved, decide
from agent.stated import Setup
from common.language import Lang, say
from common.textsafe import clip_words
from corpus.kinds import about_other_kinds, section_kinds
from jobs.diagnosis import JobDiagnosis
from jobs.render import worsening
from runbooks.catalog import Item, Runbook
from runbooks.choose import for_hang, in_language, kind_of_source, related_kinds
from runbooks.registry import neighbours_of
from runbooks.render import citation_chunk_id, citation_section, job_facts, runbook_markdown


def choose(text: str, job: JobDiagnosis | None, errors: Sequence[str], lang: Lang, retrieved: Retrieved | None = None,
           documents: float | None = None, best_section: tuple[str, str] | None = None, *,
           by_section_kind: bool = True) -> tuple[Runbook, float | None] | None:
    """(the runbook in ``lang``, the confidence that it answers) or None: agent.leads decides which kind leads."""
    found = leading(LeadEvidence(text, job, errors, lang, retrieved, documents, best_section, by_section_kind))
    return (found[0], found[1].confidence) if found is not None else None


def leading(evidence: LeadEvidence) -> tuple[Runbook, Lead] | None:
    """(the runbook in the asker's language, the lead that chose it) or None (agent.leads.RULES decides)."""
    lead = decide(evidence)
    book = in_language(lead.kind, evidence.lang) if lead is not None else None
    return (book, lead) if book is not None and lead is not None else None


def about_the_same_failure(book: Runbook, citations: Sequence[Citation], quoting: Collection[str]) -> list[Citation]:
    """The sections that may follow the runbook: those not recorded as being about another kind of failure than
    the runbook's (or a kind related to it, runbooks.choose.related_kinds, or one of its neighbours in the registry:
    a multi-node section after a collective timeout) or about none, unless the section quotes
    the question's own error message (``quoting``: chunk ids). A section about a port clash is no answer to an fp16
    overflow, nor is a FlashAttention install note an answer to a CUDA library that fails to load. Those recorded
    about a related kind only (quoting nothing asked) come after the rest, and those that only diagnose (role
    "diagnosis") after those that fix, each part in retrieval's order: a vLLM KV-cache error is answered by the vLLM
    OOM section before the generic OOM one (on the 43 fresh reports two moved, both to the right section; on dev +
    dev2 none), a port clash by "port in use" before "leftover processes" (one dev report moved, to the right one)."""
    kinds = related_kinds(book.kind) | neighbours_of(book.kind)  # a neighbour's section is what to read next
    kept = [c for c in citations if c.chunk_id in quoting or not about_other_kinds(c.source, c.section, kinds)]
    return sorted(kept, key=lambda c: (False, False) if c.chunk_id in quoting else
                  (_about_a_relative_only(book.kind, c), _only_diagnoses(c)))


def _only_diagnoses(citation: Citation) -> bool:
    """The section is recorded as one that explains or checks, giving no fix (a team's section is not recorded)."""
    return section_kinds(citation.source, citation.section).role == "diagnosis"


def _about_a_relative_only(kind: str, citation: Citation) -> bool:
    """The section is recorded about failure kinds, not ``kind`` itself (a team's section is not recorded: it stays)."""
    kinds = section_kinds(citation.source, citation.section).kinds
    return bool(kinds) and kind not in kinds


def documents_after(book: Runbook, established: bool, answering: Sequence[Citation], quoting: Collection[str],
                    retrieved: Sequence[Citation] = (), named_whole: bool = False) -> list[Citation]:
    """The documents' sections cited after the runbook: those the answerability check let through (``answering``);
    where the kind is ``established`` (the diagnosis's, the pasted message's or the reported hang stage's, not a
    likeness), less those about another failure. Citing the sections recorded about the kind where none answered
    cost 2 of 25 held-out unanswerable reports their right no_match (a device-side assert is not the seed's CUDA set-up)
    and won one answerable report of 158: a kind says which failure, not that a section answers this report of it.
    The exception is evidence that names the failure whole (``named_whole``, see names_the_failure_whole), where no
    section can differ from the report by its message: there the sections retrieval found (``retrieved``) that are
    recorded about that very kind answer it although none scored as answering."""
    if not established:
        return list(answering)
    if not answering and named_whole:
        kinds = related_kinds(book.kind)
        return [c for c in retrieved if set(section_kinds(c.source, c.section).kinds) & kinds]
    return about_the_same_failure(book, answering, quoting)


def names_the_failure_whole(lead: Lead, text: str, job: JobDiagnosis | None, book: Runbook) -> bool:
    """The evidence for the lead names the failure whole: a hang at the stage the runbook is about (a hang has no
    message of its own for a section to differ by), or a missing module that is the asker's own package (the rule
    ``own_module``: every project's package has its own name, so a section about another project's package not
    importable is about the same failure)."""
    return lead.rule == "own_module" or hang_stage(text, job, book)


def hang_stage(text: str, job: JobDiagnosis | None, book: Runbook) -> bool:
    """The runbook is the kind of a hang the report shows: a job diagnosed as hanging, or a question saying its job
    hangs at the stage this runbook is about (runbooks.choose.for_hang)."""
    if job is not None and job.root_cause is not None:
        return job.kind == "hang"
    hung = for_hang(text)
    return hung is not None and hung.kind == book.kind


def about_finding(source: str, finding: Any) -> bool:
    """The runbook cited as ``source`` is about what a probe found: every word of one of the finding's topics is in
    the runbook's title or messages, the failure it names (arch_mismatch and an sm_120 finding; not an extension's
    arch runbook and a CPU-only torch). Not its description, whose context words ("PyTorch", "build", "CUDA") every
    CUDA runbook shares."""
    from agent.diagnose import names_a_topic

    kind = kind_of_source(source)
    book = in_language(kind, "en") if kind else None
    return book is not None and names_a_topic(finding.topics, " ".join([book.title, *book.messages]))


def lead_with(book: Runbook, citations: Sequence[Citation], lang: Lang, limit: int) -> list[Citation]:
    """The runbook as [1], then the documents' sections in the order given (documents_after puts those about an
    established kind's own failure first; here, sorting every answer's sections by the runbook's kind moved 3 of 126
    real reports' right section either way and widened the gap between English and Chinese askers), renumbered:
    ``limit`` citations in all."""
    text = runbook_markdown(book, 1, lang)
    first = Citation(n=1, source=book.source, section=citation_section(book), chunk_id=citation_chunk_id(book),
                     score=max([1.0, *(c.score for c in citations)]), text=text, title=book.title)
    return [first, *(replace(c, n=i) for i, c in enumerate(citations[: max(limit - 1, 0)], 2))]


TAKES_STACKS = "traindoc hang"  # the fix that takes every rank's stack: done already when the diagnosis is a live snapshot


def runbook_lead(book: Runbook, job: JobDiagnosis | None, lang: Lang, setup: Setup | None = None,
                 lead: Lead | None = None, pasted: Sequence[str] = ()) -> str:
    """The runbook's markdown for this answer: with the job's own facts, without the fixes that would make the
    diagnosed cause worse (a longer timeout once a cause is named, CPU offload when the host's RAM ran out), and with
    the fixes the asker has already tried, or that contradict the setup the asker states, last (``setup``)."""
    tried = None if setup is None else partial(_tried, setup=setup, lang=lang)
    why = say(f"lead_why_{lead.rule}", lang, because=_short(lead.because)) if lead is not None and lead.because else ""
    set_wrong = settings_not_read(pasted, lang)
    renamed = arguments_refused(pasted, lang)  # the fix the error names exactly, before the runbook's own
    if job is None or job.root_cause is None:
        return runbook_markdown(book, 1, lang, tried=tried, why=why, evidence=pasted,  # a fix for the message pasted first
                                first=lead.fix if lead is not None else "", notes=set_wrong, named=renamed)
    root, rules = job.root_cause, worsening(job)
    if root.rank is not None:  # the logs name the rank: its fix first, the command that finds a rank after it
        tried = partial(_rank_named, rank=root.rank, lang=lang, then=tried)

    def harm(item: Item) -> str | None:
        text = "\n".join([item.text, *item.code])
        if job.kind == "hang" and any(TAKES_STACKS in code for code in item.code):
            return "stacks_already_taken"  # the live snapshot is that evidence: its stacks are above
        return next((note for pattern, note in rules if pattern.search(text)), None)

    notes = sorted({note for item in book.items.get("fixes", ()) if (note := harm(item)) is not None})
    # The line that names the cause: the one showing the runbook's message, else the error itself.
    naming = [line for line in root.evidence if any(message in line for message in book.messages)] or root.evidence
    return runbook_markdown(book, 1, lang, job_facts=job_facts(root.rank, root.host, root.where, naming, lang,
                                                                      [*root.evidence, *job.search_lines]),
                            keep_fix=lambda item: harm(item) is None, notes=[*set_wrong, *(say(note, lang) for note in notes)],
                            evidence=[*root.evidence, *job.search_lines], tried=tried, why=why,
                            first=lead.fix if lead is not None else "", named=renamed)


def settings_not_read(lines: Sequence[str], lang: Lang) -> list[str]:
    """A note for each environment variable the report sets that upstream does not read, does not define, or renamed
    (advice.names, upstream_names.json): "You set `NCCL_TIMEOUT`: nothing reads it ..." above the fixes."""
    from advice.names import env_findings

    notes: dict[str, str] = {}
    for line in lines[:400]:
        for found in env_findings(line):
            if not found.flagged or found.name in notes or f"{found.name}=" not in line.replace(" =", "="):
                continue  # read, or only named (not set) on this line
            if found.status == "deprecated" and not found.replacement:
                continue
            note = (found.note_zh if lang == "zh" and found.note_zh else found.note) or ""
            if found.status == "not_read" and not note:
                continue
            notes[found.name] = say(f"stated_env_{found.status}", lang, name=found.name, note=note, project=found.project,
                                    version=found.version, replacement=found.replacement or "")
    return list(notes.values())


def arguments_refused(lines: Sequence[str], lang: Lang) -> list[Item]:
    """A fix for each argument the pasted error shows refused that its library renamed or removed (advice.renamed,
    renamed_arguments.json), before the runbook's own: "Pass `attn_implementation` instead of
    `use_flash_attention_2`: transformers 5.0 no longer takes it", with the search for where the script passes it."""
    from advice.renamed import refused

    fixes = []
    for row, flag in refused(lines):
        instead = row.instead_zh if lang == "zh" and row.instead_zh else row.instead
        since = say("renamed_fix_since", lang, since=row.since) if row.since else ""
        key = "renamed_fix_instead" if instead or not row.new else "renamed_fix"
        text = say(key, lang, old=row.old, new=row.new, project=row.project, gone_in=row.gone_in, since=since,
                   instead=instead, source=row.source)
        was = say("renamed_fix_was", lang, old=f"--{row.old}" if flag else row.old)
        write = [] if not row.new else [f"--{row.new} ...   # {was}" if flag else f"{row.use or row.new + '=...'}   # {was}"]
        search = (f"grep -rnw '{row.old}' --include=*.py --include=*.yaml --include=*.json --include=*.sh .   "
                  f"# {say('renamed_fix_check', lang)}")
        code = "\n".join(["```bash", search, *(["# then, in its place:", *write] if write else []), "```"])
        fixes.append(Item(text, (code,), (row.source,)))
    return fixes


def _short(line: str, most: int = 160) -> str:
    """A quoted line on one line, cut at a word within ``most`` characters (never mid-word or mid-number), with no
    backtick to break its code span."""
    return clip_words(line.replace("`", "'"), most)


def _rank_named(item: Item, rank: int, lang: Lang, then: Callable[[Item], str | None] | None) -> str | None:
    """The note that moves the evidence command after the fixes where the logs already name the rank."""
    if any(TAKES_STACKS in code for code in item.code):
        return say("rank_named_evidence_after", lang, rank=rank)
    return then(item) if then is not None else None


def _tried(item: Item, setup: Setup, lang: Lang) -> str | None:
    """The note for a fix the asker already applied ("you already run with 0.95") or whose setup they rule out."""
    code = "\n".join(item.code)
    if (stated := setup.already(code)) is not None:
        return say("stated_already", lang, setting=stated.setting, value=stated.value)
    if features := setup.already_uses(code):
        names = [say(f"feature_{feature.replace(' ', '_')}", lang) for feature in features]
        return say("stated_already_uses", lang, features=say("feature_joiner", lang).join(names))
    if (fact := setup.contradicted(code)) is not None:
        return say("stated_contradicts", lang, fact=say(f"fact_{fact.replace(' ', '_')}", lang))
    return None


__all__ = [
    "CHOSEN_CONFIDENCE", "Retrieved", "about_finding", "about_the_same_failure", "choose", "hang_stage", "leading",
    "documents_after", "lead_with", "runbook_lead",
]
