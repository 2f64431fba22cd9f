"""What the last `traindoc index` run recorded in the data folder, and which folders the corpus is read from.

``manifest.json`` holds the embedding model, the store's version, each document's content hash, each
document's size and modification time as the run found them (``stats``: what lets a question check the
corpus cheaply, ``corpus.freshness``), the chunk count and the store's own files. ``roots.json`` remembers
every path ever passed to `traindoc index`.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from pathlib import Path
from typing import Any

from common.settings import REPO_ROOT, Settings

log = logging.getLogger(__name__)
Stat = list[int]  # [size in bytes, modification time in ns]


def display_source(path: Path, *, resolved: bool = False) -> str:
    """A document's name in the index: its path in the checkout, else its absolute path. ``resolved``: ``path``
    has its links resolved already (what ``corpus.discovery`` found), so it is not resolved again."""
    resolved_path = path if resolved else path.resolve()
    try:
        return str(resolved_path.relative_to(REPO_ROOT))
    except ValueError:
        return str(resolved_path)


def shared_source(source: str) -> str:
    """A document's name where others read it (the web chat, its API, Slack): a path in the checkout as it is, a
    team document by its folder and file name, never the server's absolute path."""
    path = Path(source)
    return f"{path.parent.name}/{path.name}" if path.is_absolute() else source


def manifest_path(settings: Settings) -> Path:
    return settings.data_dir / "manifest.json"


def read_manifest(settings: Settings) -> dict[str, Any] | None:
    try:
        manifest = json.loads(manifest_path(settings).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return manifest if isinstance(manifest, dict) else None


def write_manifest(settings: Settings, payload: dict[str, Any], *, full_disk_fails: bool = False) -> bool:
    """Replace the manifest at once (a reader never sees half of it); False when it could not be written.
    ``full_disk_fails``: a full disk raises (`traindoc index` says so) instead of a warning."""
    from corpus.store import no_space

    target = manifest_path(settings)
    tmp: str | None = None
    try:
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".manifest-")
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(payload, handle, ensure_ascii=False, sort_keys=True)
        os.replace(tmp, target)
    except OSError as exc:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)  # half a manifest, on a full disk too
        if full_disk_fails and no_space(exc):
            raise
        log.warning("could not record the index manifest: %s", exc)
        return False
    return True


def store_files(settings: Settings) -> dict[str, list[int]]:
    """Every file of the local store with its size and modification time, as a run leaves them."""
    files: dict[str, list[int]] = {}
    root = settings.chroma_dir
    try:
        for path in sorted(root.rglob("*")):
            if path.is_file():
                info = path.stat()
                files[str(path.relative_to(root))] = [info.st_size, info.st_mtime_ns]
    except OSError:
        return {}
    return files


def roots_registry(settings: Settings) -> Path:
    return settings.data_dir / "roots.json"


def remembered_roots(settings: Settings) -> list[str]:
    """The paths passed to `traindoc index` before, as recorded (``[]`` when none or unreadable)."""
    registry = roots_registry(settings)
    if not registry.exists():
        return []
    try:
        return [str(p) for p in json.loads(registry.read_text(encoding="utf-8"))]
    except (OSError, ValueError, TypeError):
        log.warning("ignored an unreadable %s", registry)
        return []


def corpus_roots(settings: Settings, remembered: list[str] | None = None) -> list[Path]:
    """The configured corpus folders, then every remembered one, each once."""
    from corpus.discovery import real_path

    configured = [str(real_path(p) or p) for p in settings.corpus_paths]  # a loop reads as a folder that is not there
    others = remembered_roots(settings) if remembered is None else remembered
    return [Path(p) for p in dict.fromkeys(configured + others)]
