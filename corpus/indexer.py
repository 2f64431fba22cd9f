"""`traindoc index`: files -> section chunks -> embeddings in the store, incrementally by content hash.

Unchanged files are skipped, changed files replaced, deleted files removed. One writer at a time: a
lock file in the data directory makes a second run say who holds it, wait (up to ``lock_timeout_s``) and then
refuse (``corpus.index_lock``). New and changed files' chunks are embedded and stored ``BATCH`` at a time across
files, so a small file costs what a chunk of a big one does. A full disk is said as such (``DiskFullError``),
never as a damaged index: nothing is rebuilt for it.
After every run the chunks are written to a local snapshot that the lexical index is built from.

Only confined documents are read (``corpus.discovery``: regular files under the folder they were configured
from, within ``TRAINDOC_MAX_DOC_MB``); what was skipped is in the report, with why. A big document is
embedded and stored in batches, with a progress bar on a terminal, in memory bounded by the batch. A store
that fails SQLite's integrity check is rebuilt by a plain run, not trusted because the manifest agrees.
The manifest (``corpus.manifest``) also records each document's size and time, for the cheap check a question
runs (``corpus.freshness``) before it is answered.
"""

from __future__ import annotations

import hashlib
import logging
import os
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from common.errors import IndexStoreError, InputError
from common.memory import limit_malloc_arenas, return_freed_memory
from common.settings import Settings
from corpus import BUILTIN_DIR
from corpus.chunking import Chunk, HeadingsDiffer, chunk_document
from corpus.discovery import SUFFIXES, Found, Refused, read_document
from corpus.discovery import discover as discover_documents
from corpus.embedding import Embedder
from corpus.frontmatter import split_front_matter
from corpus.manifest import (
    corpus_roots,
    display_source,
    read_manifest,
    remembered_roots,
    roots_registry,
    store_files,
    write_manifest,
)
from corpus.private_files import WRITTEN_PREFIX, narrow_index, write_private_text
from corpus.renderings import english_runbook, original_path
from corpus.store import StoredChunk, VectorStore, disk_full, low_space, no_space, remove_local_index

__all__ = ["SUFFIXES", "IndexReport", "build_index", "discover", "display_source", "embed_text", "unsafe_to_open"]
log = logging.getLogger(__name__)
BATCH = 256  # chunks embedded and stored at a time: memory stays bounded whatever a document's size


@dataclass
class IndexReport:
    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    chunks_written: int = 0
    chunks_total: int = 0
    chunks_embedded: int = 0  # sent to the embedding model
    chunks_reused: int = 0  # found in the embedding cache (an earlier or interrupted run, the shipped vectors)
    advice: list[tuple[str, str]] = field(default_factory=list)  # a team document's flagged names and claims

    def summary(self) -> str:
        reused = f"; {self.chunks_reused} of them from the embedding cache" if self.chunks_reused else ""
        return (
            f"{len(self.added)} added, {len(self.updated)} updated, {len(self.removed)} removed, "
            f"{len(self.unchanged)} unchanged, {len(self.skipped)} skipped; "
            f"{self.chunks_written} chunks embedded, {self.chunks_total} in the index{reused}"
        )


def embed_text(chunk: Chunk) -> str:
    """What is embedded for a chunk: its heading path, then its text."""
    return f"{chunk.section}\n{chunk.text}"


def discover(paths: Iterable[Path], max_bytes: int = 50 * 2**20) -> list[Path]:
    """The document files under ``paths`` (files or folders), sorted; only what may be read (see
    ``corpus.discovery``)."""
    return discover_documents(paths, max_bytes).files


def _max_bytes(settings: Settings) -> int:
    return int(settings.max_doc_mb * 2**20)


def _progress(items: Sequence[Path], enabled: bool) -> Iterable[Path]:
    if not enabled or len(items) < 20 or not sys.stderr.isatty():
        return items
    from tqdm import tqdm

    return tqdm(items, desc="indexing", unit="file", file=sys.stderr)


def _embed_bar(cache: Any, pending: Sequence[Any], enabled: bool) -> Any:
    """One bar over every chunk still to store, with the time left, on a terminal only, when the model has work
    (chunks already in the embedding cache go by at once)."""
    if not enabled or not pending or not sys.stderr.isatty():
        return None
    total = sum(p.count for p in pending)
    fresh = sum(cache.missing([embed_text(c) for c in p.chunks]) for p in pending if p.chunks is not None)
    if fresh == 0 and all(p.chunks is not None for p in pending):
        return None
    from tqdm import tqdm

    names = pending[0].path.name if len(pending) == 1 else f"{len(pending)} files"
    return tqdm(total=total, desc=f"embedding {names}", unit="chunk", file=sys.stderr, leave=False,
                postfix=f"{fresh} new" if fresh else None, dynamic_ncols=True)


KEEP_CHARS = 4 * 2**20  # changed files' chunks held between reading and embedding, per file


@dataclass
class _Pending:
    """A new or changed file: read, hashed and chunked, waiting to be embedded."""

    path: Path
    source: str
    file_hash: str
    previous: tuple[str, list[str]] | None
    chunks: list[Chunk] | None  # None: too big to hold, chunked again when stored
    count: int


def _read_chunks(path: Path, source: str, settings: Settings, report: IndexReport, seen: set[str],
                 unreadable: set[str]) -> tuple[str, list[Chunk]] | None:
    """(content hash, chunks) of one document, or None when it cannot be read (the reason is in the report)."""
    try:
        raw = read_document(path, _max_bytes(settings))
    except Refused as exc:  # not a document any more: its chunks leave the index
        report.skipped.append((source, exc.strerror or str(exc)))
        return None
    except OSError as exc:
        seen.add(source)
        unreadable.add(source)
        report.skipped.append((source, exc.strerror or str(exc)))
        log.info("skipped %s: %s", source, exc.strerror or exc)  # the caller reports skips
        return None
    seen.add(source)
    file_hash = hashlib.sha256(raw).hexdigest()
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        unreadable.add(source)
        report.skipped.append((source, f"not valid UTF-8 (byte {exc.start})"))
        log.info("skipped %s: not valid UTF-8 (byte %d)", source, exc.start)
        return None
    del raw
    meta, body = split_front_matter(text) if path.suffix.lower() in (".md", ".markdown") else ({}, text)
    original, rendered = None, meta.get("rendering_of")
    if (meta.get("kind") and meta.get("lang") not in (None, "en") and not isinstance(rendered, str)
            and english_runbook(path).is_file()):
        rendered = str(english_runbook(path))  # a runbook in another language renders the English one
    if isinstance(rendered, str):
        try:  # a rendering is chunked under its original's headings (corpus.renderings)
            target = english_runbook(path) if meta.get("kind") else original_path(path, rendered)
            original = split_front_matter(read_document(target, _max_bytes(settings)).decode("utf-8-sig"))[1]
        except (OSError, UnicodeDecodeError) as exc:
            report.skipped.append((source, f"a rendering of {rendered}, which cannot be read ({exc})"))
            return None
    try:
        chunks = chunk_document(body, source, title=path.stem, headings_from=original, whole=bool(meta.get("kind")))
    except HeadingsDiffer as exc:
        report.skipped.append((source, f"a rendering of {rendered} whose headings differ from it: {exc}"))
        return None
    if not path.resolve().is_relative_to(BUILTIN_DIR.resolve()):  # a team's own document: say what to fix in it
        report.advice.extend((source, message) for chunk in chunks for message in flagged_advice(chunk, meta))
    return file_hash, chunks


FLAGGED_CLAIMS = frozenset({"wrong", "stale", "harmful"})


def flagged_advice(chunk: Chunk, meta: dict[str, object]) -> list[str]:
    """What advice.review would flag in a chunk when shown: names upstream does not know, deprecated or read by
    nothing, and wrong, stale or harmful commands, one line each."""
    from advice.review import review

    project = meta.get("project")
    checked = review(chunk.text, chunk.source, chunk.section, "en", declared_project=project if isinstance(project, str) else None)
    return list(dict.fromkeys(
        f"{chunk.section}: `{flag.id if flag.kind == 'name' else flag.original}` {flag.verdict}: {flag.reason}"
        for flag in checked.flags
        if (flag.kind == "name" and flag.verdict in ("unknown", "deprecated", "not_read"))
        or (flag.kind == "claim" and flag.verdict in FLAGGED_CLAIMS)
    ))


def document_chunks(paths: Sequence[Path], settings: Settings) -> list[Chunk]:
    """Every chunk of the documents under ``paths``, read as `traindoc index` reads them (renderings under their
    original's headings, runbooks whole); a document that cannot be read gives none."""
    chunks: list[Chunk] = []
    for path in discover(paths, _max_bytes(settings)):
        read = _read_chunks(path, display_source(path), settings, IndexReport(), set(), set())
        chunks += read[1] if read is not None else []
    return chunks


@dataclass
class _Batch:
    """Chunks of one or more files: embedded in one run of model calls, stored in one write, one cache shard."""

    records: list[StoredChunk] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    parts: list[int] = field(default_factory=list)  # each chunk's file's chunk count
    finished: list[tuple[_Pending, list[str], int]] = field(default_factory=list)  # (file, stale ids, chunks)


def _store_pending(pending: Sequence[_Pending], store: VectorStore, embedder: Embedder, cache: Any, bar: Any,
                   settings: Settings, report: IndexReport, hashes: dict[str, str]) -> None:
    """Embed and store the new and changed files' chunks ``BATCH`` at a time across files: a small file costs
    about what a chunk of a big one does, not a store write, a model call and a cache shard of its own (a big
    document's batches are its own). Every chunk carries its file's chunk count, so a file the build stopped in
    the middle of reads as changed next time."""
    batch = _Batch()
    for item in pending:
        if item.count >= BATCH and (batch.records or batch.finished):
            # A big document starts a batch of its own: the small files before it are stored before its long work.
            _write_batch(batch, store, embedder, cache, bar, report)
            batch = _Batch()
        chunks, file_hash = item.chunks, item.file_hash
        if chunks is None:  # too big to hold while the others were read: chunked again now
            again = _read_chunks(item.path, item.source, settings, IndexReport(), set(), set())
            if again is None:
                continue
            file_hash, chunks = again
            hashes[item.source] = file_hash
        for chunk in chunks:
            batch.records.append(StoredChunk(chunk.chunk_id, item.source, chunk.section, chunk.text, file_hash,
                                             chunk.part))
            batch.texts.append(embed_text(chunk))
            batch.parts.append(len(chunks))
            if len(batch.records) >= BATCH:
                _write_batch(batch, store, embedder, cache, bar, report)
                batch = _Batch()
        stale = sorted(set(item.previous[1]) - {c.chunk_id for c in chunks}) if item.previous else []
        batch.finished.append((item, stale, len(chunks)))
    _write_batch(batch, store, embedder, cache, bar, report)


def _write_batch(batch: _Batch, store: VectorStore, embedder: Embedder, cache: Any, bar: Any,
                 report: IndexReport) -> None:
    """Store one batch (its new vectors flushed to the cache first), then drop the chunks of the files it
    finished that their new versions no longer have."""
    if batch.records:
        vectors = cache.embed(embedder, batch.texts)
        cache.flush()
        store.upsert(batch.records, vectors, parts=batch.parts)
        if bar is not None:
            bar.update(len(batch.records))
    store.delete([chunk_id for _, stale, _ in batch.finished for chunk_id in stale])
    for item, _, count in batch.finished:
        report.chunks_written += count
        (report.updated if item.previous else report.added).append(item.source)


def build_index(
    settings: Settings,
    embed: Callable[[], Embedder],
    paths: Sequence[Path] | None = None,
    *,
    rebuild: bool = False,
    progress: bool = True,
) -> IndexReport:
    from corpus.index_lock import hold_index_lock

    started = time.time()
    with hold_index_lock(settings):
        remove_stale_temporaries(settings, started - STALE_AFTER_S)
        try:
            return _index_locked(settings, embed, paths, rebuild=rebuild, progress=progress)
        except OSError as exc:  # what the store's boundary did not translate: the manifest, the registry
            if no_space(exc):
                raise disk_full(settings.data_dir) from exc
            raise
        finally:
            narrow_written(settings)


def narrow_written(settings: Settings) -> None:
    """What an older traindoc wrote wider (0644) than it now does, narrowed: the index's files 0600, its folders
    0700 (corpus.private_files); the data folder itself is narrowed when the index lock is taken."""
    from corpus.index_lock import holder_path, lock_path
    from corpus.manifest import manifest_path
    from corpus.snapshot import store_version_path
    from corpus.store import snapshot_path

    cache = settings.cache_dir
    files = [snapshot_path(settings), manifest_path(settings), roots_registry(settings), lock_path(settings),
             holder_path(settings), store_version_path(settings), *cache.glob("embeddings-*.npz")]
    narrow_index(files, [settings.chroma_dir] * (settings.chroma_url is None), folders=[cache])


# what a run writes, then renames into place
STALE_PREFIXES = (".chunks-", ".emb-", ".manifest-", ".knowledge-", WRITTEN_PREFIX)
STALE_AFTER_S = 60.0  # a temporary file this much older than the run is no live writer's


def remove_stale_temporaries(settings: Settings, before: float) -> list[str]:
    """Remove the temporary files a killed run or a full disk left behind (``STALE_PREFIXES``, in the data folder
    and its cache folder, last written before ``before``); called with the index lock held, so no other index
    run is writing them. Their names, for the debug log."""
    folders = [settings.data_dir] + [settings.cache_dir] * settings.cache_dir.resolve().is_relative_to(
        settings.data_dir.resolve())
    removed: list[str] = []
    for folder in folders:
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            try:
                if (entry.name.startswith(STALE_PREFIXES) and entry.is_file(follow_symlinks=False)
                        and entry.stat(follow_symlinks=False).st_mtime < before):
                    os.unlink(entry.path)
                    removed.append(entry.name)
            except OSError as exc:  # a read-only folder: left for a run that can
                log.debug("could not remove %s: %s", entry.path, exc)
    if removed:
        log.debug("removed %d stale temporary files: %s", len(removed), ", ".join(removed[:20]))
    return removed


def _index_locked(
    settings: Settings,
    embed: Callable[[], Embedder],
    paths: Sequence[Path] | None,
    *,
    rebuild: bool,
    progress: bool,
) -> IndexReport:
    from corpus.snapshot import read_snapshot, record_store_version, write_snapshot

    limit_malloc_arenas()  # before chromadb's threads start: what they free is reused, not kept per thread
    embedder = embed()
    roots = _registered_roots(settings, paths)
    found = discover_documents([r for r in roots if r.exists()], _max_bytes(settings))
    files = found.files
    damaged = settings.chroma_url is None and not rebuild and (_damaged(settings) or unsafe_to_open(settings))
    if damaged:
        log.warning("the index failed its integrity check (%s); rebuilding it", damaged)
    elif not rebuild and settings.chroma_url is None:
        unchanged = _unchanged_since_last_run(settings, embedder.name, found)
        if unchanged is not None:
            return unchanged
    if rebuild or damaged:
        remove_local_index(settings)
    try:
        store = VectorStore(settings, embedder, create=True)
        stored = store.file_hashes()
        store.count()  # reads the vector segment too: a damaged HNSW file fails here, not at the next query
    except IndexStoreError as exc:
        if settings.chroma_url or rebuild:
            raise
        log.warning("the index is unreadable (%s); rebuilding it", exc.message)
        remove_local_index(settings)
        store = VectorStore(settings, embedder, create=True)
        stored = store.file_hashes()
    if rebuild and settings.chroma_url:
        store.delete([cid for _, ids in stored.values() for cid in ids])
        stored = {}

    from corpus.embedding_cache import EmbeddingCache

    cache = EmbeddingCache(embedder.name, settings.cache_dir / f"embeddings-{embedder.name.replace('/', '_')}.npz")
    report = IndexReport(skipped=list(found.skipped))
    seen: set[str] = set()
    unreadable: set[str] = set()  # a read that failed for now (permissions): its chunks stay until it reads again
    hashes: dict[str, str] = {}
    pending: list[_Pending] = []
    for path in _progress(files, progress):
        source = display_source(path)
        read = _read_chunks(path, source, settings, report, seen, unreadable)
        if read is None:
            continue
        file_hash, chunks = read
        hashes[source] = file_hash
        previous = stored.get(source)
        if previous and previous[0] == file_hash:
            report.unchanged.append(source)
            continue
        count = len(chunks)
        keep = sum(len(c.text) for c in chunks) <= KEEP_CHARS  # a big document is chunked again when its turn comes
        pending.append(_Pending(path, source, file_hash, previous, chunks if keep else None, count))
    bar = _embed_bar(cache, pending, progress)
    try:
        _store_pending(pending, store, embedder, cache, bar, settings, report, hashes)
    finally:
        cache.flush()  # an interrupted build keeps what it embedded: the next run starts from there
        if bar is not None:
            bar.close()
    report.chunks_embedded, report.chunks_reused = cache.embedded, cache.reused

    for source, (_, ids) in stored.items():
        if source not in seen and source not in unreadable:
            store.delete(ids)
            report.removed.append(source)

    cache.save()
    del cache, pending  # their vectors and chunks are in the store now: free them before it is read back whole
    if report.chunks_embedded >= BATCH:  # a big build: the model's memory goes back before the snapshot is built
        _release_model(embedder)
    stored_chunks = store.all_chunks()
    version = hashlib.sha256(
        "\n".join(sorted(f"{c.chunk_id}:{c.file_hash}" for c in stored_chunks)).encode()
    ).hexdigest()[:16]
    if version != store.version:
        store.set_version(version)
    current = read_snapshot(settings)
    if current is None or current.version != version or current.vectors is None or current.embed_model != embedder.name:
        write_snapshot(settings, stored_chunks, version, store.vectors, embedder.name)
    record_store_version(settings, version)
    report.chunks_total = len(stored_chunks)
    # A document that could not be read is recorded as found (its size and time): the next question does not
    # index it again until it changes; its hash is not, so the next `traindoc index` tries it again.
    _write_manifest(settings, embedder.name, version, hashes, len(stored_chunks), corpus_stats(found))
    return report


def _release_model(embedder: Embedder) -> None:
    """Drop the loaded model and hand the freed heap back to the system (glibc keeps it otherwise)."""
    release = getattr(embedder, "release", None)
    if release is not None:
        release()
    return_freed_memory()


def corpus_stats(found: Found) -> dict[str, list[int]]:
    """Each document's [size, mtime in ns] by its source name, as discovery found it (before it was read: a
    change while it is read shows as a change next time)."""
    return {display_source(path): found.stats[path] for path in found.files if path in found.stats}


def _write_manifest(settings: Settings, model: str, version: str, hashes: dict[str, str], chunks: int,
                    stats: dict[str, list[int]]) -> None:
    write_manifest(settings, {"embed_model": model, "version": version, "files": hashes, "chunks": chunks,
                              "store_files": store_files(settings), "stats": stats}, full_disk_fails=True)


def _damaged(settings: Settings) -> str:
    """Why the local store fails SQLite's integrity check, or "" (also when there is no store yet)."""
    import sqlite3

    path = settings.chroma_dir / "chroma.sqlite3"
    if not path.exists():
        return ""
    try:
        with closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=5)) as db:
            rows = db.execute("PRAGMA quick_check(3)").fetchall()
    except sqlite3.Error as exc:
        if no_space(exc) or low_space(path):
            raise disk_full(settings.chroma_dir) from exc
        return str(exc)
    verdict = "; ".join(str(r[0]) for r in rows)
    return "" if verdict == "ok" else verdict


def unsafe_to_open(settings: Settings) -> str:
    """Why the store would kill this process when opened ("" when it would not): checked in a child process,
    and only when the store's files are not as the last run left them (a run that died, another writer, a
    damaged disk), since a damaged vector file aborts the process that loads it."""
    if not (settings.chroma_dir / "chroma.sqlite3").exists():
        return ""
    manifest = read_manifest(settings)
    if manifest is not None and manifest.get("store_files") == store_files(settings):
        return ""
    from corpus.store_check import store_damage

    return store_damage(settings)


def _unchanged_since_last_run(settings: Settings, model: str, found: Found) -> IndexReport | None:
    """The report of a run with nothing to do, when the files, the model, the store and the snapshot are all
    as the last successful run left them; None when anything differs (then the store is consulted)."""
    files = found.files
    from corpus.snapshot import read_snapshot

    manifest = read_manifest(settings)
    if manifest is None:
        return None
    if manifest.get("embed_model") != model or not _looks_like_sqlite(settings.chroma_dir / "chroma.sqlite3"):
        return None  # a missing or clobbered store is rebuilt, not trusted because the manifest says so
    if manifest.get("store_files") != store_files(settings):
        return None  # the store's files changed since the last run wrote them: consult (and check) the store
    recorded: dict[str, str] = manifest.get("files", {})
    current: dict[str, str] = {}
    for path in files:
        try:
            current[display_source(path)] = hashlib.sha256(read_document(path, _max_bytes(settings))).hexdigest()
        except OSError:
            return None
    if current != recorded:
        return None
    snapshot = read_snapshot(settings)
    if snapshot is None or snapshot.version != manifest.get("version"):
        return None
    if manifest.get("stats") != (stats := corpus_stats(found)):  # touched, not changed: the next question checks cheaply
        write_manifest(settings, {**manifest, "stats": stats})
    return IndexReport(unchanged=sorted(current), skipped=list(found.skipped),
                       chunks_total=int(manifest.get("chunks", len(snapshot.chunks))))


def _looks_like_sqlite(path: Path) -> bool:
    try:
        with path.open("rb") as handle:
            return handle.read(16) == b"SQLite format 3\x00"
    except OSError:
        return False


def _named_root(path: Path) -> Path:
    """A folder or file named to `traindoc index`, resolved; a symlink loop is the user's to fix, in one line."""
    from corpus.discovery import real_path

    real = real_path(path)
    if real is None:
        raise InputError(f"{path}: a symlink loop, not a file or folder")
    return real


def _registered_roots(settings: Settings, paths: Sequence[Path] | None) -> list[Path]:
    """The configured corpus folders plus every path ever passed to `traindoc index` (remembered)."""
    import json

    registry = roots_registry(settings)
    remembered = remembered_roots(settings)
    explicit = [str(_named_root(p)) for p in paths or ()]
    for path in explicit:
        if not Path(path).exists():
            raise InputError(f"no such file or folder: {path}")
    remembered = sorted(set(remembered) | set(explicit))
    if explicit:
        write_private_text(registry, json.dumps(remembered, indent=1))
    for path in remembered:
        if not Path(path).exists():
            log.warning("%s no longer exists; its documents leave the index", path)
    return corpus_roots(settings, remembered)
