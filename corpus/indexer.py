"""`traindoc index`: files -> section chunks -> embeddings in the store, incrementally by content hash.

Unchanged files are skipped, changed files replaced, deleted files removed. One writer at a time: a
lock file in the data directory makes a second run wait (up to ``lock_timeout_s``) and then refuse.
After every run the chunks are written to a local snapshot that the lexical index is built from.
"""

from __future__ import annotations

import hashlib
import logging
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from common.errors import IndexBusyError, IndexStoreError, InputError
from common.settings import REPO_ROOT, Settings
from corpus.chunking import Chunk, chunk_document
from corpus.embedding import Embedder
from corpus.store import StoredChunk, VectorStore, remove_local_index

SUFFIXES = (".md", ".markdown", ".txt", ".rst")
log = logging.getLogger(__name__)


@dataclass
class IndexReport:
    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    chunks_written: int = 0
    chunks_total: int = 0

    def summary(self) -> str:
        return (
            f"{len(self.added)} added, {len(self.updated)} updated, {len(self.removed)} removed, "
            f"{len(self.unchanged)} unchanged, {len(self.skipped)} skipped; "
            f"{self.chunks_written} chunks embedded, {self.chunks_total} in the index"
        )


def embed_text(chunk: Chunk) -> str:
    """What is embedded for a chunk: its heading path, then its text."""
    return f"{chunk.section}\n{chunk.text}"


def display_source(path: Path) -> str:
    resolved = path.resolve()
    try:
        return str(resolved.relative_to(REPO_ROOT))
    except ValueError:
        return str(resolved)


def discover(paths: Iterable[Path]) -> list[Path]:
    """The document files under ``paths`` (files or folders), sorted, hidden folders skipped."""
    found: set[Path] = set()
    for path in paths:
        if not path.exists():
            raise InputError(f"no such file or folder: {path}")
        if path.is_file():
            if path.suffix.lower() not in SUFFIXES:
                raise InputError(f"{path}: not a .md, .txt or .rst file")
            found.add(path.resolve())
            continue
        for candidate in path.rglob("*"):
            relative = candidate.relative_to(path).parts
            if any(part.startswith(".") for part in relative):
                continue
            if candidate.is_file() and candidate.suffix.lower() in SUFFIXES:
                found.add(candidate.resolve())
    return sorted(found)


def _progress(items: Sequence[Path], enabled: bool) -> Iterable[Path]:
    if not enabled or len(items) < 20 or not sys.stderr.isatty():
        return items
    from tqdm import tqdm

    return tqdm(items, desc="indexing", unit="file", file=sys.stderr)


def build_index(
    settings: Settings,
    embed: Callable[[], Embedder],
    paths: Sequence[Path] | None = None,
    *,
    rebuild: bool = False,
    progress: bool = True,
) -> IndexReport:
    from filelock import FileLock, Timeout

    try:
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        lock = FileLock(str(settings.data_dir / "index.lock"), timeout=settings.lock_timeout_s)
        lock.acquire()
    except Timeout as exc:
        raise IndexBusyError(
            f"another `traindoc index` is running on {settings.data_dir}",
            hint=f"waited {settings.lock_timeout_s:.0f} s; try again when it has finished",
        ) from exc
    except OSError as exc:
        raise IndexStoreError(
            f"cannot write to the data directory {settings.data_dir}: {exc.strerror or exc}",
            hint="set TRAINDOC_DATA_DIR to a writable folder",
        ) from exc
    try:
        return _index_locked(settings, embed, paths, rebuild=rebuild, progress=progress)
    finally:
        lock.release()


def _index_locked(
    settings: Settings,
    embed: Callable[[], Embedder],
    paths: Sequence[Path] | None,
    *,
    rebuild: bool,
    progress: bool,
) -> IndexReport:
    from corpus.snapshot import read_snapshot, record_store_version, write_snapshot

    embedder = embed()
    roots = _registered_roots(settings, paths)
    files = discover([r for r in roots if r.exists()])
    if not rebuild and settings.chroma_url is None:
        unchanged = _unchanged_since_last_run(settings, embedder.name, files)
        if unchanged is not None:
            return unchanged
    if rebuild:
        remove_local_index(settings)
    try:
        store = VectorStore(settings, embedder, create=True)
        stored = store.file_hashes()
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
    report = IndexReport()
    seen: set[str] = set()
    hashes: dict[str, str] = {}
    for path in _progress(files, progress):
        source = display_source(path)
        seen.add(source)
        try:
            raw = path.read_bytes()
        except OSError as exc:
            report.skipped.append((source, exc.strerror or str(exc)))
            log.info("skipped %s: %s", source, exc.strerror or exc)  # the caller reports skips
            continue
        file_hash = hashlib.sha256(raw).hexdigest()
        hashes[source] = file_hash
        previous = stored.get(source)
        if previous and previous[0] == file_hash:
            report.unchanged.append(source)
            continue
        try:
            text = raw.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            report.skipped.append((source, f"not valid UTF-8 (byte {exc.start})"))
            log.info("skipped %s: not valid UTF-8 (byte %d)", source, exc.start)
            continue
        chunks = chunk_document(text, source, title=path.stem)
        records = [StoredChunk(c.chunk_id, source, c.section, c.text, file_hash, c.part) for c in chunks]
        vectors = cache.embed(embedder, [embed_text(c) for c in chunks])
        store.upsert(records, vectors)
        stale = sorted(set(previous[1]) - {c.chunk_id for c in records}) if previous else []
        store.delete(stale)
        report.chunks_written += len(records)
        (report.updated if previous else report.added).append(source)

    unreadable = {source for source, _ in report.skipped}
    for source, (_, ids) in stored.items():
        if source not in seen and source not in unreadable:
            store.delete(ids)
            report.removed.append(source)

    cache.save()
    stored_chunks = store.all_chunks()
    version = hashlib.sha256(
        "\n".join(sorted(f"{c.chunk_id}:{c.file_hash}" for c in stored_chunks)).encode()
    ).hexdigest()[:16]
    if version != store.version:
        store.set_version(version)
    current = read_snapshot(settings)
    if current is None or current.version != version or current.vectors is None or current.embed_model != embedder.name:
        write_snapshot(settings, stored_chunks, version, store.vectors(), embedder.name)
    record_store_version(settings, version)
    report.chunks_total = len(stored_chunks)
    if not report.skipped:
        _write_manifest(settings, embedder.name, version, hashes, len(stored_chunks))
    return report


def _manifest_path(settings: Settings) -> Path:
    return settings.data_dir / "manifest.json"


def _write_manifest(settings: Settings, model: str, version: str, hashes: dict[str, str], chunks: int) -> None:
    import json

    payload = {"embed_model": model, "version": version, "files": hashes, "chunks": chunks}
    try:
        _manifest_path(settings).write_text(json.dumps(payload, ensure_ascii=False, sort_keys=True), encoding="utf-8")
    except OSError as exc:
        log.warning("could not record the index manifest: %s", exc)


def _unchanged_since_last_run(settings: Settings, model: str, files: Sequence[Path]) -> IndexReport | None:
    """The report of a run with nothing to do, when the files, the model, the store and the snapshot are all
    as the last successful run left them; None when anything differs (then the store is consulted)."""
    import json

    from corpus.snapshot import read_snapshot

    try:
        manifest = json.loads(_manifest_path(settings).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if manifest.get("embed_model") != model or not _looks_like_sqlite(settings.chroma_dir / "chroma.sqlite3"):
        return None  # a missing or clobbered store is rebuilt, not trusted because the manifest says so
    recorded: dict[str, str] = manifest.get("files", {})
    current: dict[str, str] = {}
    for path in files:
        try:
            current[display_source(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
        except OSError:
            return None
    if current != recorded:
        return None
    snapshot = read_snapshot(settings)
    if snapshot is None or snapshot.version != manifest.get("version"):
        return None
    return IndexReport(unchanged=sorted(current), chunks_total=int(manifest.get("chunks", len(snapshot.chunks))))


def _looks_like_sqlite(path: Path) -> bool:
    try:
        with path.open("rb") as handle:
            return handle.read(16) == b"SQLite format 3\x00"
    except OSError:
        return False


def _registered_roots(settings: Settings, paths: Sequence[Path] | None) -> list[Path]:
    """The configured corpus folders plus every path ever passed to `traindoc index` (remembered)."""
    import json

    registry = settings.data_dir / "roots.json"
    remembered: list[str] = []
    if registry.exists():
        try:
            remembered = [str(p) for p in json.loads(registry.read_text(encoding="utf-8"))]
        except (OSError, ValueError):
            log.warning("ignored an unreadable %s", registry)
    explicit = [str(p.resolve()) for p in paths or ()]
    for path in explicit:
        if not Path(path).exists():
            raise InputError(f"no such file or folder: {path}")
    remembered = sorted(set(remembered) | set(explicit))
    if explicit:
        registry.write_text(json.dumps(remembered, indent=1), encoding="utf-8")
    for path in remembered:
        if not Path(path).exists():
            log.warning("%s no longer exists; its documents leave the index", path)
    configured = [str(p.resolve()) for p in settings.corpus_paths]
    return [Path(p) for p in dict.fromkeys(configured + remembered)]
