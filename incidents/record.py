"""An answer marked as what fixed it becomes a resolved incident.

The front ends hand over what they hold of the answer: the ``Answer`` itself (the CLI, the Slack bot while it
holds it), or its JSON (``Answer.to_json()``: the web chat's state, a file `ask --json` wrote, the last answer
`ask` kept). Either carries the failure's signature (``"failure"``) and the first fix (``"verdict"``).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from common.errors import InputError
from common.secrets import mask
from incidents.model import Incident, new_incident
from incidents.signature import Failure, failure_of
from incidents.store import IncidentStore

log = logging.getLogger(__name__)
LAST_ANSWER = "last-answer.json"  # beside the incidents: what `traindoc feedback fixed` marks without a FILE


def resolution(answer: Any) -> tuple[Failure | None, str, str]:
    """(the failure, traindoc's first fix, the question) of an ``Answer`` or of its JSON."""
    if isinstance(answer, Mapping):
        failure = Failure.from_json(answer["failure"]) if isinstance(answer.get("failure"), Mapping) else None
        verdict = answer.get("verdict")
        fix = str(verdict.get("fix") or "") if isinstance(verdict, Mapping) else ""
        return failure, first_line(fix), str(answer.get("question") or "")
    failure = getattr(answer, "failure", None) or failure_of(answer)
    verdict = getattr(answer, "verdict", None)
    fix = (verdict.fix_line or first_line(verdict.fix_text)) if verdict is not None else ""
    return failure, fix, answer.question


def first_line(text: str) -> str:
    """The first command (or sentence) of a fix: what an incident line can carry."""
    return next((line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")), "")


def record_fixed(store: IncidentStore, answer: Any, *, note: str = "", channel: str = "") -> Incident | None:
    """Keep ``answer`` (an ``Answer`` or its JSON) as a resolved incident; None when it identifies no failure (a
    question with no error message: there is nothing to recognise it by)."""
    failure, fix, question = resolution(answer)
    if failure is None or not failure.keys:
        return None
    return store.add(new_incident(failure, fix=fix, note=note, question=question, channel=channel))


def keep_last(path: Path, answer: Any) -> None:
    """Keep what `traindoc feedback fixed` needs of the last answer `ask` printed (masked, mode 0600); an answer
    that identifies no failure removes the one kept before (it would be marked in its place)."""
    failure, fix, question = resolution(answer)
    try:
        if failure is None:
            path.unlink(missing_ok=True)
            return
        data = {"question": mask(question), "failure": failure.to_json(), "verdict": {"fix": mask(fix)}}
        path.parent.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as out:
            json.dump(data, out, ensure_ascii=False)
    except OSError as exc:  # the answer was printed: a read-only data folder only costs `feedback fixed`
        log.debug("cannot keep the last answer at %s: %s", path, exc)


def read_answer(path: Path) -> dict[str, Any]:
    """An answer's JSON from a file (`ask --json` output, or the last answer `ask` kept)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read an answer from {path}: {exc}", hint="give a file `ask --json` wrote") from exc
    if not isinstance(data, dict) or "question" not in data:
        raise InputError(f"{path} is not an answer", hint="give a file `ask --json` wrote")
    return data
