"""The local read model of the index: every chunk plus its lexical index, pickled after each
`traindoc index` run, so a query never re-tokenises the corpus. Keyed by the store's version: a
snapshot that does not match (another machine re-indexed a shared Chroma server) is rebuilt from
the store.
"""

from __future__ import annotations

import logging
import os
import pickle
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass

from agent.settings import Settings
from corpus.chunking import PATH_SEPARATOR
from corpus.errorlines import error_lines, normalise
from corpus.families import catalogue_version, covered
from corpus.lexical import BM25Index, tokenize
from corpus.store import StoredChunk, snapshot_path

FORMAT = "4"
log = logging.getLogger(__name__)


@dataclass
class KnowledgeSnapshot:
    version: str
    chunks: list[StoredChunk]
    bm25: BM25Index
    heading_bm25: BM25Index
    error_signatures: list[list[frozenset[str]]]
    families: list[frozenset[str]]
    format: str = ""

    def position(self) -> dict[str, int]:
        return {c.chunk_id: i for i, c in enumerate(self.chunks)}


def signature(line: str) -> frozenset[str]:
    return frozenset(t for t in tokenize(normalise(line)) if t != "#")


def _code_error_lines(text: str) -> list[str]:
    lines: list[str] = []
    in_fence = False
    for line in text.splitlines():
        if line.strip().startswith("```"):
            in_fence = not in_fence
            continue
        if in_fence or "`" in line:
            lines.append(line.replace("`", " "))
    return error_lines(lines, limit=20)


def build_snapshot(chunks: Sequence[StoredChunk], version: str) -> KnowledgeSnapshot:
    ordered = sorted(chunks, key=lambda c: (c.source, c.section, c.part))
    documents = [tokenize(f"{c.section}\n{c.text}") for c in ordered]
    headings = [tokenize(c.section.split(PATH_SEPARATOR, 1)[-1]) for c in ordered]
    signatures = [
        [s for s in (signature(line) for line in _code_error_lines(c.text)) if len(s) >= 3] for c in ordered
    ]
    families = [covered(f"{c.section}\n{c.text}") for c in ordered]
    return KnowledgeSnapshot(
        version, list(ordered), BM25Index(documents), BM25Index(headings), signatures, families, snapshot_format()
    )


def snapshot_format() -> str:
    return f"{FORMAT}-{catalogue_version()}"


def write_snapshot(settings: Settings, chunks: Sequence[StoredChunk], version: str) -> KnowledgeSnapshot:
    snapshot = build_snapshot(chunks, version)
    target = snapshot_path(settings)
    try:
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".chunks-")
        with os.fdopen(fd, "wb") as handle:
            pickle.dump(snapshot, handle, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, target)
    except OSError as exc:
        log.warning("could not cache the lexical index at %s: %s", target, exc)
    return snapshot


def read_snapshot(settings: Settings) -> KnowledgeSnapshot | None:
    try:
        with snapshot_path(settings).open("rb") as handle:
            snapshot = pickle.load(handle)
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError, TypeError, ValueError):
        return None
    if not isinstance(snapshot, KnowledgeSnapshot) or getattr(snapshot, "format", None) != snapshot_format():
        return None
    return snapshot
