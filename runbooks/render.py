"""A runbook as the lead of an answer: what it means, the job's own facts, the checks, the fixes in order and
what not to do, each item cited to the runbook and linked to its upstream source."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from common.language import Lang, say
from common.textsafe import clip_words, code_span
from corpus.chunking import chunk_id_for
from runbooks.catalog import Item, Runbook
from runbooks.quoted import quoted_facts

FixFilter = Callable[[Item], bool]
INLINE_CODE = re.compile(r"`([^`\n]+)`")
ELIDED = re.compile(r"\.\.\.|…|<[a-z_ ]+>")  # a quoted message's variable part left out


def citation_section(book: Runbook) -> str:
    """The section a runbook is indexed and cited as: the English runbook's title (a runbook in another language is
    chunked under the English one's headings, corpus.renderings), so both languages are one section."""
    from runbooks.catalog import runbooks_in

    english = runbooks_in("en").get(book.kind)
    return english.title if english is not None else book.title


def citation_chunk_id(book: Runbook) -> str:
    return chunk_id_for(book.source, citation_section(book), 0)


def _item_lines(number: str, item: Item, n: int, lang: Lang) -> list[str]:
    lines = [f"{number} {item.text} [{n}]"]
    for block in item.code:
        lines.extend(["", *("   " + line if line else "" for line in block.splitlines())])
    return lines + [""]


def _job_facts(facts: Sequence[str], lang: Lang) -> list[str]:
    return [f"**{say('runbook_your_job', lang)}** " + "; ".join(facts), ""] if facts else []


def _as_quoted(messages: Sequence[str]) -> list[str]:
    """The messages as a fix quotes them: without a trailing ": " (`undefined symbol` for "undefined symbol: ")."""
    return [message.rstrip(": ") for message in messages]


def written_for(item: Item, messages: Sequence[str]) -> list[str]:
    """The runbook messages a fix is written for: the inline code spans of its text that quote one of them, whole
    or cut short where its variable part is elided (`Got completion ... error 12` for "Got completion from peer")."""
    quoted = _as_quoted(messages)
    return [span for span in INLINE_CODE.findall(item.text)
            if len(span) >= 8 and any(message in span or _cut_short(span, message) for message in quoted)]


def _cut_short(span: str, message: str) -> bool:
    """``span`` quotes ``message`` with its end elided: its first part (8 characters at least) opens the message."""
    pieces = ELIDED.split(span)
    return len(pieces) > 1 and len(head := pieces[0].strip()) >= 8 and message.startswith(head)


def _in_order(span: str, line: str) -> bool:
    """Every part of an elided quote is in ``line``, in the quote's order."""
    at = 0
    for piece in (p.strip() for p in ELIDED.split(span)):
        if piece:
            found = line.find(piece, at)
            if found < 0:
                return False
            at = found + len(piece)
    return True


def for_this_message(fixes: Sequence[Item], messages: Sequence[str], evidence: Sequence[str]) -> list[Item]:
    """The fixes in the runbook's order, those written for the message the log shows first; when the log shows one
    of the runbook's messages, the fixes written for its other messages (another failure of the family: error 802
    for an `invalid device ordinal`) leave."""
    quoted = _as_quoted(messages)

    def shown(item: Item) -> bool:  # the fix's quote is in the log; a quote that elides its variable part ("...",
        # "<n>"), by the runbook message inside it
        return any(span in line or (ELIDED.search(span) and (any(m in span and m in line for m in quoted)
                                                              or _in_order(span, line)))
                   for span in written_for(item, messages) for line in evidence)

    first = [item for item in fixes if shown(item)]
    if not first and not any(message in line for message in messages for line in evidence):
        return list(fixes)  # the log shows none of the runbook's messages: every fix may apply
    return first + [item for item in fixes if not written_for(item, messages)]


def runbook_markdown(book: Runbook, n: int, lang: Lang, *, job_facts: Sequence[str] = (),
                     keep_fix: FixFilter | None = None, notes: Sequence[str] = (), evidence: Sequence[str] = (),
                     tried: Callable[[Item], str | None] | None = None, why: str = "", first: str = "",
                     named: Sequence[Item] = ()) -> str:
    """The runbook's part of an answer, cited as ``[n]``. ``keep_fix``: which fixes apply to this job (a fix
    that would make the diagnosed cause worse leaves, with ``notes`` saying why); ``evidence``: the job's lines
    that show the cause (a fix written for the message they show comes first); ``tried``: a fix the asker has
    already applied, or one that contradicts what the asker states, gives the note that says so, and comes last;
    ``why``: the sentence that says why this runbook leads (agent.leads); ``first``: a fragment of the fix the
    evidence calls for (a hang stage's fix, runbooks/data/hang_stages.json), which comes first; ``named``: fixes a
    sourced table gives for exactly what the evidence names (a renamed argument, advice.renamed), before all."""
    parts = [f"### {say('likely_cause', lang, title=book.title, n=n)}", ""] + ([f"_{why}_", ""] if why else [])
    meaning = book.parts.get("means", "").strip()
    if meaning:
        parts.extend([meaning + f" [{n}]", ""])
    parts.extend(_job_facts(job_facts, lang))
    checks = book.items.get("checks", ())
    if checks:
        parts.extend([f"### {say('runbook_checks', lang)}", ""])
        for i, item in enumerate(checks, 1):
            parts.extend(_item_lines(f"{i}.", item, n, lang))
    fixes = [item for item in book.items.get("fixes", ()) if keep_fix is None or keep_fix(item)]
    fixes = for_this_message(fixes, book.messages, evidence)
    if first:
        called = [item for item in fixes if first in "\n".join([item.text, *item.code])]
        fixes = called + [item for item in fixes if item not in called]
    fixes = [*named, *fixes]
    if tried is not None:
        said = {id(item): note for item in fixes if (note := tried(item)) is not None}
        fixes = [item for item in fixes if id(item) not in said] + [item for item in fixes if id(item) in said]
        notes = [*notes, *dict.fromkeys(said.values())]
    if fixes:
        parts.extend([f"### {say('fixes', lang)}", ""])
        parts.extend(f"> {note.removeprefix('> ')}\n" for note in notes)  # a phrase may be written as a quote
        for i, item in enumerate(fixes, 1):
            parts.extend(_item_lines(f"{i}.", item, n, lang))
    avoid = book.items.get("avoid", ())
    if avoid:
        parts.extend([f"### {say('runbook_avoid', lang)}", ""])
        for item in avoid:
            parts.extend(_item_lines("-", item, n, lang))
    parts.append(f"_{say('runbook_applies', lang, applies=book.applies_to, checked=book.checked)}_")
    return "\n".join(parts).strip()


def _head(line: str, most: int) -> str:
    """``line`` cut to ``most`` characters at the end of a sentence where it has one, else with an ellipsis."""
    if len(line) <= most:
        return line
    end = line.rfind(". ", 0, most)
    return line[:end] if end > most // 3 else clip_words(line, most)


def job_facts(rank: int | None, host: str | None, where: str | None, evidence: Sequence[str], lang: Lang,
              lines: Sequence[str] = ()) -> list[str]:
    """The job's own facts the fixes apply to: the rank, its host, its file:line, the line that names the cause,
    and what the job's ``lines`` (``evidence`` when none) say in numbers and names (runbooks.quoted)."""
    facts = []
    if rank is not None:
        facts.append(say("rank", lang, rank=rank) + (f" ({host})" if host else ""))
    elif host:
        facts.append(host)
    if where:
        facts.append(code_span(where))
    if evidence:
        facts.append(code_span(_head(re.sub(r"\s+", " ", evidence[0]).strip(), 200)))
    return facts + quoted_facts(list(lines) or list(evidence), lang)


__all__ = ["citation_chunk_id", "citation_section", "job_facts", "runbook_markdown"]
