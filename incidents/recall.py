"""The one call ``ask()`` makes once the answer is composed: the failure's signature on the answer, and a line
first when this cluster resolved the same failure before.

The line goes above the verdict, beside the runbook's fix: the new job's evidence, the verdict and the fixes stay
as they are (the cause may differ this time; the line says what worked then). Where no incident file exists, no
file is opened.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from common.language import Lang, say
from common.textsafe import code_span, escape_markdown
from incidents.signature import failure_of

if TYPE_CHECKING:
    from incidents.match import Match

log = logging.getLogger(__name__)


def incident_files(settings: Any) -> list[tuple[Path, str]]:
    """(file, source) of every incident file that exists: this cluster's own (source ""), then each team folder's
    of TRAINDOC_CORPUS (its top level: ``incidents.jsonl``, ``*.incidents.jsonl``), named by its file."""
    from common.settings import BUILTIN_DIR
    from incidents.store import FILE, local_path  # a team folder's: incidents.jsonl, or <team>.incidents.jsonl

    own = local_path(settings.feedback_path)
    found = [(own, "")] if own.is_file() else []
    for folder in settings.corpus_paths:
        if folder == BUILTIN_DIR:
            continue
        if folder.is_file():
            files = [folder] if folder.name.endswith(FILE) else []
        else:
            try:
                files = sorted(p for p in folder.iterdir() if p.name == FILE or p.name.endswith("." + FILE))
            except OSError:
                continue
        found += [(path, path.name) for path in files if path.is_file() and path != own]
    return found


def recall(answer: Any, settings: Any) -> None:
    """Set ``answer.failure``; where incidents match it, ``answer.incidents`` and the line that leads the answer."""
    answer.failure = failure_of(answer)
    if answer.failure is None:
        return
    files = incident_files(settings)
    if not files:
        return
    from incidents.match import matches  # only where an incident file exists: a cold ask reads none
    from incidents.store import read_incidents

    found = matches(answer.failure, [i for path, source in files for i in read_incidents(path, source)])
    if not found:
        return
    answer.incidents = [as_json(m) for m in found]
    line = seen_line(found, answer.lang)
    answer.answer = f"{line}\n\n{answer.answer}"
    if answer.brief:
        answer.brief = f"{line}\n\n{answer.brief}"


def as_json(match: Match) -> dict[str, Any]:
    """A matched incident as the answer's JSON carries it (``"incidents"``)."""
    incident = match.incident
    return {"id": incident.id, "date": incident.date, "kind": incident.kind, "hosts": list(incident.failure.hosts),
            "gpus": list(incident.failure.gpus), "fix": incident.fix, "note": incident.note, "rule": match.rule,
            "same_host": match.same_host, "source": incident.source or "local"}


def seen_line(found: list[Match], lang: Lang) -> str:
    """"Seen before: this cluster saw this on 2026-11-20 on node gpu-17; what fixed it then: ..." for the first
    match; how many more there are."""
    incident = found[0].incident
    place = ""
    if incident.failure.hosts:
        place += say("incidents.on_node", lang, node=escape_markdown(", ".join(incident.failure.hosts[:2])))
    if incident.failure.gpus:
        place += say("incidents.on_gpu", lang, gpu=escape_markdown(", ".join(incident.failure.gpus[:2])))
    if incident.note:
        fix = escape_markdown(incident.note)
    elif incident.fix:
        shown = escape_markdown(incident.fix) if incident.fix.endswith((".", "。")) else code_span(incident.fix)
        fix = say("incidents.their_fix", lang, fix=shown)
    else:
        fix = say("incidents.no_fix", lang)
    line = say("incidents.seen", lang, date=incident.date, place=place, fix=fix)
    if incident.source:
        line += say("incidents.team", lang, file=escape_markdown(incident.source))
    if len(found) > 1:
        line += say("incidents.more", lang, count=len(found))
    return line
