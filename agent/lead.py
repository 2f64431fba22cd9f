"""The runbook that leads an answer: the fix follows the diagnosis.

When a job's diagnosis, a pasted error or the best retrieved section names a failure kind that one of
traindoc's runbooks answers, that runbook (in the asker's language) is citation [1] and supplies the fixes; the
sections retrieval found follow as See also, so a section about another kind never supplies the first fix.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import replace

from agent.answer import Citation
from common.language import Lang, say
from jobs.diagnosis import JobDiagnosis
from jobs.render import worsening
from runbooks.catalog import Item, Runbook
from runbooks.choose import for_category, for_lines, in_language, kind_of_source
from runbooks.render import citation_chunk_id, citation_section, job_facts, runbook_markdown

CHOSEN_CONFIDENCE = 0.9  # a runbook named by the diagnosis or by the exact message it answers


def choose(text: str, job: JobDiagnosis | None, errors: Sequence[str], citations: Sequence[Citation],
           lang: Lang, answering: Collection[str] = ()) -> tuple[Runbook, bool] | None:
    """(the runbook in ``lang``, whether the evidence named it) or None. The diagnosis decides first; then the
    error lines and the question; then a runbook that retrieval found to answer among the sections it checked
    (``answering``: their chunk ids): a runbook is checked against upstream and gives its fixes in order, so it
    leads a document section that answers too (which stays cited)."""
    book = None
    if job is not None and job.root_cause is not None:
        root = job.root_cause
        lines = [*root.evidence, *job.search_lines]
        book = for_category(root.category, lines) or (for_lines(lines) if root.category != "unknown" else None)
    if book is None:
        book = for_lines([*errors, *text.splitlines()])
    if book is not None:
        chosen = in_language(book.kind, lang)
        return (chosen, True) if chosen is not None else None
    for citation in citations[:1] or ():
        if (kind := kind_of_source(citation.source)) is not None:
            chosen = in_language(kind, lang)
            return (chosen, False) if chosen is not None else None
    for citation in citations[1:]:
        if citation.chunk_id in answering and (kind := kind_of_source(citation.source)) is not None:
            chosen = in_language(kind, lang)
            return (chosen, False) if chosen is not None else None
    return None


def lead_with(book: Runbook, citations: Sequence[Citation], lang: Lang) -> list[Citation]:
    """The runbook as [1], then the other citations renumbered; the runbook's own sections (in any language)
    are not repeated."""
    own = {b.source for b in (in_language(book.kind, "en"), in_language(book.kind, "zh")) if b is not None}
    text = runbook_markdown(book, 1, lang)
    first = Citation(n=1, source=book.source, section=citation_section(book), chunk_id=citation_chunk_id(book),
                     score=1.0, text=text)
    rest = [c for c in citations if c.source not in own]
    return [first, *(replace(c, n=i) for i, c in enumerate(rest, 2))]




def runbook_lead(book: Runbook, job: JobDiagnosis | None, lang: Lang) -> str:
    """The runbook's markdown for this answer: with the job's own facts, and without the fixes that would make
    the diagnosed cause worse (a longer timeout once a cause is named, CPU offload when the host's RAM ran out)."""
    if job is None or job.root_cause is None:
        return runbook_markdown(book, 1, lang)
    root, rules = job.root_cause, worsening(job)

    def harm(item: Item) -> str | None:
        text = "\n".join([item.text, *item.code])
        return next((note for pattern, note in rules if pattern.search(text)), None)

    notes = sorted({note for item in book.items.get("fixes", ()) if (note := harm(item)) is not None})
    return runbook_markdown(book, 1, lang, job_facts=job_facts(root.rank, root.host, root.where, root.evidence, lang),
                            keep_fix=lambda item: harm(item) is None, notes=[say(note, lang) for note in notes])


__all__ = ["CHOSEN_CONFIDENCE", "choose", "lead_with", "runbook_lead"]
