"""Known failure families (a curated catalogue in data/error_families.json).

Recognising the family of a question tells two things retrieval scores cannot: whether a section
is *about* that failure (its text covers the family), and whether the knowledge base has any
answer at all (a TPU question is not answered by a CUDA section, however similar the words).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources

import numpy as np

from common.absent_platforms import without_absent_platforms
from common.hang_words import HANG_PATTERN, NAMED_PATTERN, expand

MATCHING = "ascii-boundaries"  # how the patterns are compiled: part of the catalogue's version (snapshots cache covers)


@dataclass(frozen=True)
class Family:
    name: str
    kind: str  # "error", "platform" (vetoes sections that never name it), "framework" (named, never a veto), "symptom"
    detect: re.Pattern[str]
    cover: re.Pattern[str]


def _raw() -> str:
    return resources.files("corpus").joinpath("data/error_families.json").read_text(encoding="utf-8")


@cache
def catalogue() -> tuple[Family, ...]:
    data = json.loads(_raw())
    families = tuple(
        # ASCII word boundaries: an English word glued to Chinese ("单卡OOM", "显存OOM了") still stands alone.
        Family(f["name"], f["kind"], re.compile(expand(f["detect"]), re.M | re.ASCII),
               re.compile(expand(f["cover"]), re.M | re.ASCII))
        for f in data["families"]
    )
    names = [f.name for f in families]
    if len(names) != len(set(names)):
        raise ValueError("error_families.json names a family twice")
    return families


@cache
def catalogue_version() -> str:
    return hashlib.sha256((_raw() + MATCHING + HANG_PATTERN + NAMED_PATTERN).encode()).hexdigest()[:12]


def detect(text: str) -> list[Family]:
    text = without_absent_platforms(text)  # "PyTorch XPU available: False" names no platform the job runs on
    return [f for f in catalogue() if f.detect.search(text)]


def covered(text: str) -> frozenset[str]:
    """Names of the families a document section is about."""
    return frozenset(f.name for f in catalogue() if f.cover.search(text))


@dataclass(frozen=True)
class Recognition:
    platforms: tuple[Family, ...]
    errors: tuple[Family, ...]
    frameworks: tuple[Family, ...] = ()  # named in the question: shown, never a veto (a JAX job's NCCL error is NCCL's)
    symptoms: tuple[Family, ...] = ()  # a hang, a multi-node-only failure: sections about it rank first, no evidence

    @property
    def names(self) -> list[str]:
        return [f.name for f in self.platforms + self.errors + self.symptoms + self.frameworks]

    @property
    def ranks(self) -> bool:
        """A platform, an error or a symptom family was recognised: sections about it rank first."""
        return bool(self.platforms or self.errors or self.symptoms)

    def evidence(self, covers: np.ndarray, row: int) -> tuple[float, float]:
        """(family, platform) for one chunk, as corpus.answerability reads them: family +1 when the chunk
        covers a recognised error family, -1 when error families were recognised and it covers none, 0
        when none was; platform -1 when a recognised platform (TPU, ROCm, MPS ...) is one it never names."""
        index = {f.name: i for i, f in enumerate(catalogue())}
        platform = -1.0 if any(not covers[row, index[p.name]] for p in self.platforms) else 0.0
        if not self.errors:
            return 0.0, platform
        return (1.0 if any(covers[row, index[e.name]] for e in self.errors) else -1.0), platform

    def coverage_matrix(self, covers: np.ndarray) -> np.ndarray:
        """``coverage`` for every chunk at once; ``covers`` is chunks x catalogue (see snapshot)."""
        index = {f.name: i for i, f in enumerate(catalogue())}
        rows = covers.shape[0]
        ok = np.ones(rows, dtype=bool)
        for platform in self.platforms:
            ok &= covers[:, index[platform.name]]
        named = self.errors + self.symptoms
        if not named:
            return ok.astype(np.float32)
        share = covers[:, [index[e.name] for e in named]].sum(axis=1) / len(named)
        return np.where(ok & (share > 0), share, 0).astype(np.float32)


def recognise(question: str, error_lines: list[str]) -> Recognition:
    """Platforms anywhere in the text, frameworks where an error line is theirs; error families in the error lines (or
    a short question)."""
    found = detect(question)
    in_errors = detect("\n".join(error_lines)) if error_lines else []
    # A framework's own error line (its message, its library) makes the failure that framework's: then it counts as
    # a platform. Named only in the prose ("my JAX job"), the failure the lines show is what is answered.
    platforms = tuple(f for f in found if f.kind == "platform" or (f.kind == "framework" and f in in_errors))
    scope = "\n".join(error_lines) if error_lines else (question if len(question) < 600 else "")
    in_scope = detect(scope)
    errors = tuple(f for f in in_scope if f.kind == "error")
    symptoms = tuple(f for f in in_scope if f.kind == "symptom")
    return Recognition(platforms, errors, tuple(f for f in found if f.kind == "framework" and f not in platforms), symptoms)
