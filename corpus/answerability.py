"""Does the best section answer the question? Decided from what the two share, not from a list.

Evidence, each a number for the question and one candidate section:
- ``ident_oov``: idf-weighted share of the error line's identifiers (exception classes, API names,
  flags, ALL-CAPS names, snake/camel/dotted words) that the knowledge base never mentions: a term no
  document contains names a problem no document describes; terms every section uses weigh little (a
  question with no identifier at all gets ``word_oov`` here: no identifier is no evidence they are known);
- ``word_oov``: the same over every content word of the question (English words, Chinese bigrams);
- ``unknown``: the two together (both unknown is stronger evidence than either);
- ``error_cover``: idf-weighted share of the error line's terms (or the question's) the section contains;
- ``quoted_error``: share of an error message quoted in the section that the question's lines contain;
- ``dense``: the section's cosine similarity to the question (its scale is the embedding model's own, so
  the weights are fitted per model);
- ``dense_margin``: how far the section's cosine similarity stands above the other candidates';
- ``agreement``: how many single signals (words, headings, meaning) put the section in their top 3;
- ``family``: +1 when a curated failure family was recognised and the section covers it, -1 when
  recognised and not covered, 0 when none was (a user's runbooks, an uncatalogued failure);
- ``platform``: -1 when the question is about a platform (TPU, ROCm, MPS ...) the section never names.

A logistic model (``AnswerabilityModel``) turns them into a probability that the section answers and a
threshold on it into the decision; the confidence the answer states is that probability recalibrated
(``calibration``, fitted on held-out cases: how often an answer with this probability cited a right section
first). Its weights live in data/answerability.json, one model per embedding model, fitted by
``python -m evaluation.crossval --fit`` and measured by ``traindoc eval --cv``; every feature is relative to the
knowledge base, so the same weights serve a user's own runbooks.
"""

from __future__ import annotations

import builtins
import json
import math
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from functools import cache
from importlib import resources
from typing import Any

import numpy as np

from corpus.lexical import DocumentStatistics, tokenize

FEATURES = ("ident_oov", "word_oov", "unknown", "error_cover", "quoted_error", "dense", "dense_margin", "agreement",
            "family", "platform")
# The direction each piece of evidence may push: what the knowledge base lacks counts against, what the
# section shares counts for. A fit that gives one the other sign is explaining noise (see evaluation.crossval).
SIGNS = {"ident_oov": -1, "word_oov": -1, "unknown": -1, "error_cover": 1, "quoted_error": 1, "dense": 1, "dense_margin": 1,
         "agreement": 1, "family": 1, "platform": 1}

# Things a user pastes that identify their setup, not their problem: paths, URLs, file names, versions.
# Each branch starts only where a word starts (a lookbehind or \b before a fixed character), so a hostile
# question (a megabyte without a space, "a.a.a.a...") is scanned once, not once from every position.
NOISE = re.compile(
    r"(?<!\S)\S*[/\\]\S*"  # paths and URLs: the whole word
    r"|(?<![\w.-])(?P<lead>[.-]*)\w[\w.-]*\."  # file names, from the first letter of their run of [\w.-]
    r"(?:py|ipynb|json|jsonl|ya?ml|sh|txt|log|cc|cpp|cu|c|h|hpp|md|toml|cfg|ini|csv|pt|pth|bin|ckpt)\b"
    r"|\b\d+(?:\.\d+)+\w*|\b0x[0-9a-f]+\b|\bv\d[\w.]*",
    re.IGNORECASE,
)
WORD = re.compile(r"--?[A-Za-z][\w-]*\w|[A-Za-z_][A-Za-z0-9_]*(?:(?:\.|::)[A-Za-z_][A-Za-z0-9_]*)*")
CAMEL = re.compile(r"[a-z][A-Z]|[A-Z]{2}[a-z]")
# Log decoration (glog's E0406 prefix, rank tags, levels) and Python's own exception classes name no problem.
GENERIC = re.compile(r"[ewif]\d{4}|rank\d+|(?:info|warn|warning|error|debug|fatal|critical|trace|notice)", re.IGNORECASE)
BUILTIN_EXCEPTIONS = frozenset(
    name.lower() for name in dir(builtins) if name.endswith(("Error", "Exception", "Warning", "Interrupt"))
)


def without_noise(text: str) -> str:
    """``text`` with its paths, URLs, file names, versions and hex numbers blanked out (a file name's leading
    dots or dashes stay: they were never part of the name)."""
    return NOISE.sub(lambda m: (m["lead"] or "") + " ", text)


def identifiers(text: str) -> list[str]:
    """Distinct identifier-like words, lower-cased: what names an API, an error or a setting."""
    found: dict[str, None] = {}
    for word in WORD.findall(without_noise(text)):
        bare = word.strip("-_.:")
        if len(bare) < 3 or GENERIC.fullmatch(bare) or bare.lower() in BUILTIN_EXCEPTIONS:
            continue
        if (
            word.startswith("--")
            or "_" in bare or "." in bare or "::" in bare
            or CAMEL.search(bare)
            or (bare.isupper() and sum(c.isalpha() for c in bare) >= 3)
            or (re.search(r"[A-Za-z]", bare) and re.search(r"\d", bare))
        ):
            found.setdefault(bare.lower(), None)
    return list(found)


def document_frequency(bm25: DocumentStatistics, term: str) -> int:
    """How many chunks contain ``term`` (read back from BM25's idf, which is exact)."""
    if bm25.size == 0:
        return 0
    return max(0, round((bm25.size + 0.5) / math.expm1(bm25.idf(term)) - 0.5))


def _known(bm25: DocumentStatistics, identifier: str) -> bool:
    if document_frequency(bm25, identifier) > 0:
        return True
    # A qualified name counts when its last part is known (torch.cuda.OutOfMemoryError -> outofmemoryerror).
    tail = re.split(r"\.|::", identifier)[-1]
    return tail != identifier and len(tail) >= 4 and document_frequency(bm25, tail) > 0


def _unknown_share(bm25: DocumentStatistics, terms: Sequence[str]) -> float:
    """The idf-weighted share of ``terms`` no chunk contains. A term every section uses (pytorch, gpu)
    says little either way; one no section uses weighs the most."""
    if not terms:
        return 0.0
    unknown = np.array([not _known(bm25, t) for t in terms], dtype=bool)
    weights = np.array([bm25.idf(_known_form(bm25, t)) for t in terms], dtype=np.float64)
    return float(weights[unknown].sum() / weights.sum()) if weights.sum() > 0 else 0.0


def _known_form(bm25: DocumentStatistics, term: str) -> str:
    tail = re.split(r"\.|::", term)[-1]
    return tail if document_frequency(bm25, term) == 0 and tail != term and document_frequency(bm25, tail) > 0 else term


def _content_tokens(text: str) -> list[str]:
    return list(dict.fromkeys(t for t in tokenize(without_noise(text)) if len(t) >= 2 and not t.isdigit() and t != "#"))


@dataclass(frozen=True)
class Evidence:
    ident_oov: float = 0.0
    word_oov: float = 0.0
    unknown: float = 0.0
    error_cover: float = 0.0
    quoted_error: float = 0.0
    dense: float = 0.0
    dense_margin: float = 0.0
    agreement: float = 0.0
    family: float = 0.0
    platform: float = 0.0
    quoted_message: float = 0.0  # quoted_error less the messages that only head others (not a feature of the model)

    def vector(self) -> np.ndarray:
        return np.array([getattr(self, name) for name in FEATURES], dtype=np.float64)

    def as_dict(self) -> dict[str, float]:
        return {k: round(v, 4) for k, v in asdict(self).items()}


def evidence(
    *,
    question: str,
    errors: Sequence[str],
    section_text: str,
    bm25: DocumentStatistics,
    quoted_error: float,
    dense: float,
    dense_others: Sequence[float],
    ranks: Sequence[int],
    family: float,
    platform: float = 0.0,
    quoted_message: float = 0.0,
) -> Evidence:
    """The evidence for one question and its best section.

    ``errors``: the question's error lines (empty for a typed question); ``dense_others``: the cosine
    similarities of the other candidate sections; ``ranks``: the section's rank under each single signal.
    """
    key = "\n".join(errors[:3]) if errors else question
    word_oov = _unknown_share(bm25, _content_tokens(question))
    named = identifiers(key) or identifiers(question)
    # No identifier at all is no evidence that the knowledge base knows them: the words speak instead.
    ident_oov = _unknown_share(bm25, named) if named else word_oov

    terms = _content_tokens(key)
    section = set(tokenize(section_text))
    weights = np.array([bm25.idf(t) for t in terms], dtype=np.float64)
    present = np.array([t in section for t in terms], dtype=bool)
    error_cover = float(weights[present].sum() / weights.sum()) if terms and weights.sum() > 0 else 0.0

    others = sorted(dense_others, reverse=True)[:10]
    margin = dense - float(np.mean(others)) if others and dense > 0 else 0.0
    agreement = sum(r < 3 for r in ranks) / len(ranks) if ranks else 0.0
    return Evidence(ident_oov, word_oov, ident_oov * word_oov, error_cover, quoted_error, dense, margin, agreement, family,
                    platform, quoted_message)


def _sigmoid(score: float) -> float:
    return 1.0 / (1.0 + math.exp(-max(-30.0, min(30.0, score))))


@dataclass(frozen=True)
class AnswerabilityModel:
    """Logistic regression over standardised evidence; ``threshold`` on the probability decides. ``calibration``
    (a, b) maps the probability to the confidence stated, sigmoid(a * logit(p) + b): fitted where the answers were
    held out, so that "0.9" is right about nine times in ten (the logistic's own probability was overconfident at
    the top, 0.97 stated for 0.87 right, and underconfident below 0.75). Monotone, so it orders as p does."""

    weights: tuple[float, ...]
    bias: float
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    threshold: float
    features: tuple[str, ...] = FEATURES
    calibration: tuple[float, float] = (1.0, 0.0)

    def probability(self, found: Evidence) -> float:
        x = np.array([getattr(found, name) for name in self.features], dtype=np.float64)
        z = (x - np.array(self.mean)) / np.array(self.scale)
        return _sigmoid(float(np.dot(z, self.weights) + self.bias))

    def decide(self, found: Evidence) -> tuple[bool, float]:
        """(answerable, confidence): confidence is the probability that the section answers.

        A section that never names the platform the question is about (a TPU, ROCm or Apple MPS question
        against CUDA write-ups) does not answer it, however close the words: its fixes would be wrong
        for that hardware. Twelve unanswerable cases cannot teach a weight that strong, so it is a rule."""
        if found.platform < 0:
            return False, 0.0
        p = self.probability(found)
        return p >= self.threshold, self.stated(p)

    def stated(self, p: float) -> float:
        """The confidence to state for probability ``p`` (``calibration``)."""
        a, b = self.calibration
        if (a, b) == (1.0, 0.0):
            return p
        p = min(max(p, 1e-9), 1 - 1e-9)
        return _sigmoid(a * math.log(p / (1 - p)) + b)

    def to_json(self) -> dict[str, Any]:
        return {
            "features": list(self.features), "weights": [round(w, 4) for w in self.weights], "bias": round(self.bias, 4),
            "mean": [round(m, 4) for m in self.mean], "scale": [round(s, 4) for s in self.scale],
            "threshold": round(self.threshold, 4), "calibration": [round(v, 4) for v in self.calibration],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> AnswerabilityModel:
        def floats(key: str) -> tuple[float, ...]:
            return tuple(float(v) for v in data[key])

        calibration = floats("calibration") if "calibration" in data else (1.0, 0.0)
        return cls(floats("weights"), float(data["bias"]), floats("mean"), floats("scale"), float(data["threshold"]),
                   tuple(str(f) for f in data["features"]), (calibration[0], calibration[1]))


@cache
def default_models() -> dict[str, AnswerabilityModel]:
    raw = resources.files("corpus").joinpath("data/answerability.json").read_text(encoding="utf-8")
    return {name: AnswerabilityModel.from_json(spec) for name, spec in json.loads(raw)["models"].items()}


def model_for(embed_model: str) -> AnswerabilityModel:
    """The weights fitted for this embedding model (dense cosines differ in scale between models), else
    the model-independent ones."""
    models = default_models()
    return models.get(embed_model) or models["any"]
