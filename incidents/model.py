"""A resolved incident: a failure this cluster saw, and what fixed it.

One JSON object per line of ``incidents.jsonl`` (``to_json``); every text in it is masked
(``common.secrets.mask``) when it is made, and again when a file is read (a file from a team folder was written
by someone else's traindoc, or by hand).
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from common.secrets import mask
from incidents.signature import Failure

QUESTION_CHARS = 600
FIX_CHARS = 400
NOTE_CHARS = 600


@dataclass(frozen=True)
class Incident:
    id: str
    date: str  # YYYY-MM-DD, the day it was marked fixed (local time)
    failure: Failure
    fix: str  # traindoc's first fix in the answer that was marked (its command, or its sentence)
    note: str = ""  # what the user said they changed
    question: str = ""
    channel: str = ""  # web, slack, cli
    created: float = field(default_factory=time.time)
    source: str = ""  # where it was read from: "" the local store, else a team file's name (not stored)

    @property
    def kind(self) -> str:
        return self.failure.kind

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "date": self.date, "kind": self.kind, "messages": list(self.failure.messages),
                "keys": list(self.failure.keys), "hosts": list(self.failure.hosts), "gpus": list(self.failure.gpus),
                "fix": self.fix, "note": self.note, "question": self.question, "channel": self.channel,
                "created": round(self.created, 3)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any], source: str = "") -> Incident:
        """An incident from a line of a file; raises ValueError when the line is not one."""
        if not isinstance(data, Mapping) or not data.get("id") or not (data.get("messages") or data.get("keys")):
            raise ValueError("not an incident: it needs an id and the failure's messages")
        try:
            created = float(data.get("created") or 0.0)
        except (TypeError, ValueError):
            created = 0.0
        return cls(id=_clean(data["id"], 40), date=_clean(data.get("date"), 10), failure=Failure.from_json(data),
                   fix=_clean(data.get("fix"), FIX_CHARS), note=_clean(data.get("note"), NOTE_CHARS),
                   question=_clean(data.get("question"), QUESTION_CHARS), channel=_clean(data.get("channel"), 20),
                   created=created, source=source)

    def with_note(self, note: str) -> Incident:
        return replace(self, note=_clean(note, NOTE_CHARS))


def new_incident(failure: Failure, *, fix: str, note: str = "", question: str = "", channel: str = "",
                 now: float | None = None) -> Incident:
    created = time.time() if now is None else now
    return Incident(id=secrets.token_hex(4), date=time.strftime("%Y-%m-%d", time.localtime(created)), failure=failure,
                    fix=_clean(fix, FIX_CHARS), note=_clean(note, NOTE_CHARS), question=_clean(question, QUESTION_CHARS),
                    channel=channel, created=created)


def _clean(value: Any, limit: int) -> str:
    """A stored text: masked, one line of single spaces, at most ``limit`` characters."""
    return mask(" ".join(str(value or "").split()))[:limit]
