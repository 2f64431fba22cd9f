"""Does the index hold the corpus as it is configured now? The cheap check a question runs before it is answered.

The corpus folders are walked (``corpus.discovery``: names, sizes, modification times; nothing is read) and
compared with what the last `traindoc index` run recorded (``corpus.manifest``). Only a document whose size or
time differs is read and hashed, to tell an edit from a touch (a checkout, a copy); no model is loaded. A data
folder whose manifest predates the recorded sizes and times is hashed once, and the times are then recorded.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass, field
from pathlib import Path

from common.settings import Settings
from corpus.discovery import discover
from corpus.manifest import corpus_roots, display_source, read_manifest, write_manifest

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CorpusChange:
    """What the index lacks or still holds, by source name (as the index names documents)."""

    added: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    missing_roots: tuple[str, ...] = ()  # configured folders (TRAINDOC_CORPUS) that do not exist
    unknown: bool = False  # nothing recorded to compare with: only an index run can tell
    touched: dict[str, list[int]] = field(default_factory=dict, compare=False)  # same content, new size/time

    @property
    def to_index(self) -> bool:
        """An index run would change what the index holds."""
        return bool(self.added or self.changed or self.removed or self.unknown)

    @property
    def documents(self) -> int:
        """New and changed documents: what answers do not use until they are indexed."""
        return len(self.added) + len(self.changed)

    def __bool__(self) -> bool:
        return self.to_index or bool(self.missing_roots)


def _max_bytes(settings: Settings) -> int:
    return int(settings.max_doc_mb * 2**20)


def _recorded(settings: Settings) -> tuple[dict[str, list[int]], dict[str, str]] | None:
    """(size and time, content hash) by source as the last run recorded them; from the snapshot's chunks when
    there is no manifest (hashes only); None when nothing is recorded."""
    manifest = read_manifest(settings)
    if manifest is not None and isinstance(manifest.get("files"), dict):
        stats = manifest.get("stats")
        return (stats if isinstance(stats, dict) else {}), manifest["files"]
    from corpus.snapshot import read_snapshot

    snapshot = read_snapshot(settings)
    if snapshot is None:
        return None
    return {}, {chunk.source: chunk.file_hash for chunk in snapshot.chunks}


def _content_hash(path: Path, settings: Settings) -> str | None:
    from corpus.discovery import read_document

    try:
        return hashlib.sha256(read_document(path, _max_bytes(settings))).hexdigest()
    except OSError:
        return None


def corpus_change(settings: Settings) -> CorpusChange:
    """What differs between the configured corpus and the index's record of it (empty when nothing does)."""
    missing = tuple(str(p) for p in settings.corpus_paths if not p.exists())
    recorded = _recorded(settings)
    if recorded is None:
        return CorpusChange(missing_roots=missing, unknown=True)
    stats, hashes = recorded
    found = discover([r for r in corpus_roots(settings) if r.exists()], _max_bytes(settings))
    current = {display_source(path, resolved=True): path for path in found.files}
    known = set(stats) | set(hashes)
    added = sorted(set(current) - known)
    changed: list[str] = []
    touched: dict[str, list[int]] = {}
    for source, path in current.items():
        if source not in known or stats.get(source) == found.stats.get(path):
            continue
        if source in hashes and _content_hash(path, settings) == hashes[source]:
            touched[source] = found.stats[path]
        else:
            changed.append(source)
    removed = sorted(known - set(current))
    return CorpusChange(tuple(added), tuple(sorted(changed)), tuple(removed), missing, touched=touched)


def record_touched(settings: Settings, change: CorpusChange) -> None:
    """Record the new sizes and times of documents whose content is as indexed, so the next check does not read
    them again. Skipped when another run holds the index lock (it records them itself) or the folder is
    read-only."""
    if not change.touched:
        return
    from filelock import FileLock, Timeout

    try:
        with FileLock(str(settings.data_dir / "index.lock"), timeout=0):
            manifest = read_manifest(settings)
            if manifest is None:
                return
            recorded = manifest.get("stats")
            stats: dict[str, list[int]] = recorded if isinstance(recorded, dict) else {}
            write_manifest(settings, {**manifest, "stats": {**stats, **change.touched}})
    except (Timeout, OSError) as exc:
        log.debug("did not record the corpus's times: %s", exc)
