"""The incidents this cluster resolved: ``incidents.jsonl`` beside the feedback store, one incident a line.

The file is created with mode 0600 and rewritten whole (a temporary file renamed over it) under a lock, so the
web server's threads, the Slack bot and a `traindoc incidents` command never interleave their writes. A line
that is not an incident (a hand edit gone wrong) is skipped with a warning, never a failure of the answer.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from common.errors import ConfigError
from incidents.model import Incident

log = logging.getLogger(__name__)
FILE = "incidents.jsonl"
MAX_FILE_BYTES = 16 * 2**20  # a file read for matching, at most (a few thousand incidents)


def local_path(feedback_db: Path) -> Path:
    """Where a cluster's incidents live: beside the feedback store they came from (TRAINDOC_FEEDBACK_DB)."""
    return feedback_db.with_name(FILE)


def read_incidents(path: Path, source: str = "") -> list[Incident]:
    """The incidents of a file, oldest first; a file that cannot be read gives none (said once in the log)."""
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            log.warning("incidents: %s is larger than %d MB: not read", path, MAX_FILE_BYTES // 2**20)
            return []
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        log.debug("incidents: cannot read %s: %s", path, exc)
        return []
    return list(_parse(text.splitlines(), path, source))


def _parse(lines: Iterable[str], path: Path, source: str) -> Iterator[Incident]:
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            yield Incident.from_json(json.loads(line), source)
        except ValueError as exc:  # json.JSONDecodeError is a ValueError
            log.warning("incidents: %s line %d skipped: %s", path, number, exc)


class IncidentStore:
    def __init__(self, path: Path) -> None:
        self.path = path

    def all(self) -> list[Incident]:
        return read_incidents(self.path) if self.path.exists() else []

    def add(self, incident: Incident) -> Incident:
        with self._locked():
            self._write([*self.all(), incident])
        return incident

    def note(self, incident_id: str, note: str) -> Incident | None:
        """Set what the user changed on incident ``incident_id``; None when there is no such incident."""
        with self._locked():
            incidents = self.all()
            found = next((i for i in incidents if i.id == incident_id), None)
            if found is None:
                return None
            noted = found.with_note(note)
            self._write([noted if i.id == incident_id else i for i in incidents])
        return noted

    def delete(self, incident_id: str) -> bool:
        with self._locked():
            incidents = self.all()
            kept = [i for i in incidents if i.id != incident_id]
            if len(kept) == len(incidents):
                return False
            self._write(kept)
        return True

    def merge(self, incoming: Iterable[Incident]) -> int:
        """Add the incidents this store does not hold yet (by id); how many were added."""
        with self._locked():
            incidents = self.all()
            held = {i.id for i in incidents}
            new: list[Incident] = []
            for incident in incoming:
                if incident.id not in held:
                    held.add(incident.id)
                    new.append(incident)
            if new:
                self._write([*incidents, *new])
        return len(new)

    def _locked(self):  # type: ignore[no-untyped-def]
        from filelock import FileLock

        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(f"cannot write the incidents file {self.path}: {exc}",
                              hint="set TRAINDOC_FEEDBACK_DB to a file in a writable folder") from exc
        return FileLock(str(self.path) + ".lock", timeout=30)

    def _write(self, incidents: list[Incident]) -> None:
        write_incidents(self.path, incidents)


def write_incidents(path: Path, incidents: Iterable[Incident], mode: int = 0o600) -> int:
    """Write ``incidents`` to ``path`` (replaced whole; mode 0600 unless said: an export is made to be shared);
    how many were written."""
    lines = [json.dumps(i.to_json(), ensure_ascii=False) for i in incidents]
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as out:
            out.write("".join(line + "\n" for line in lines))
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except OSError as exc:
        temporary.unlink(missing_ok=True)
        raise ConfigError(f"cannot write the incidents file {path}: {exc}",
                          hint="choose a writable file (or set TRAINDOC_FEEDBACK_DB to a writable folder's file)") from exc
    return len(lines)
