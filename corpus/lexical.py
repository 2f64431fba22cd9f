"""Lexical search: a tokenizer that handles Chinese and error-message English, and Okapi BM25.

Chinese runs become overlapping character bigrams (the standard dictionary-free CJK indexing: no
jieba dictionary to load or cache). English and code become lower-cased words; identifiers are kept
whole and also split (``ncclUnhandledCudaError`` -> ``ncclunhandledcudaerror nccl unhandled cuda
error``; ``sm_120`` -> ``sm_120 sm 120``), so an exact error token and its parts both match.
"""

from __future__ import annotations

import math
import re
from array import array
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from corpus.packed import PackError, Postings, within

CJK_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")
WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*[A-Za-z0-9]|[A-Za-z0-9]")
CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")

STOPWORDS = frozenset(
    """a an and are as at be been but by can could do does did for from has have how i if in into is it
    its me my no not of on or our so that the their then there these this to was we were what when where
    which why will with you your use used using get got also just than after before some any""".split()
)
CJK_STOP = frozenset({"的", "了", "是", "在", "我", "有", "和", "就", "不", "也", "都", "这", "那", "吗", "呢"})


def _word_tokens(word: str) -> list[str]:
    lowered = word.lower().strip(".-_")
    if not lowered or lowered in STOPWORDS:
        return []
    tokens = [lowered]
    pieces = [p.lower() for part in re.split(r"[_.\-]", word) for p in CAMEL.findall(part)]
    if len(pieces) > 1:
        tokens.extend(p for p in pieces if p not in STOPWORDS and p != lowered)
    return tokens


def tokenize(text: str) -> list[str]:
    """Tokens for BM25: CJK bigrams plus normalised words and their identifier parts."""
    tokens: list[str] = []
    position = 0
    for match in CJK_RUN.finditer(text):
        for word in WORD.findall(text[position : match.start()]):
            tokens.extend(_word_tokens(word))
        run = "".join(ch for ch in match.group() if ch not in CJK_STOP) or match.group()
        if len(run) == 1:
            tokens.append(run)
        else:
            tokens.extend(run[i : i + 2] for i in range(len(run) - 1))
        position = match.end()
    for word in WORD.findall(text[position:]):
        tokens.extend(_word_tokens(word))
    return tokens


@dataclass
class _Posting:
    doc_ids: np.ndarray
    freqs: np.ndarray


class _PostingLookup(Protocol):
    def get(self, term: str) -> _Posting | None: ...

    def items(self) -> Iterable[tuple[str, _Posting]]: ...


class _MappedPostings:
    """A packed index's postings (corpus.packed.Postings) as ``_Posting`` rows."""

    def __init__(self, postings: Postings) -> None:
        self._postings = postings

    def get(self, term: str) -> _Posting | None:
        found = self._postings.get(term)
        return None if found is None else _Posting(found[0], found[1])

    def items(self) -> Iterator[tuple[str, _Posting]]:
        return ((term, _Posting(ids, freqs)) for term, (ids, freqs) in self._postings.items())


class BM25Index:
    """Okapi BM25 over pre-tokenised documents, with an inverted index for fast queries."""

    def __init__(self, documents: Iterable[Sequence[str]], k1: float = 1.2, b: float = 0.75) -> None:
        """One pass over ``documents`` (a generator is fine: they are never held together); postings grow in
        C arrays, 8 bytes an entry, not in lists of Python ints (a 20 MB document: a gigabyte otherwise)."""
        self.k1 = k1
        self.b = b
        sizes = array("f")
        postings: dict[str, tuple[array[int], array[float]]] = {}
        for doc_id, tokens in enumerate(documents):
            sizes.append(len(tokens))
            for term, freq in Counter(tokens).items():
                entry = postings.get(term)
                if entry is None:
                    entry = postings[term] = (array("i"), array("f"))
                entry[0].append(doc_id)
                entry[1].append(freq)
        self.size = len(sizes)
        lengths = np.array(sizes, dtype=np.float32)
        self.avg_length = float(lengths.mean()) if self.size else 0.0
        self._norm = (k1 * (1 - b + b * lengths / max(self.avg_length, 1e-9))).astype(np.float32)
        self._postings: _PostingLookup = {
            term: _Posting(np.array(ids, dtype=np.int32), np.array(freqs, dtype=np.float32))
            for term, (ids, freqs) in postings.items()
        }

    def packed(self) -> tuple[dict[str, float], dict[str, np.ndarray]]:
        """(parameters, arrays): the index as ``mapped`` reads it back from a pack (corpus.packed)."""
        rows = {term: (p.doc_ids, p.freqs) for term, p in self._postings.items()}
        arrays = {"norm": self._norm, **Postings.pack(rows, (np.int32, np.float32))}
        return {"k1": self.k1, "b": self.b, "size": self.size, "avg_length": self.avg_length}, arrays

    @classmethod
    def mapped(cls, parameters: Mapping[str, float], arrays: Mapping[str, np.ndarray], prefix: str = "") -> BM25Index:
        """The index ``packed`` wrote, its postings read from the arrays (views of a mapped file) term by term.
        Raises PackError when its document numbers or norms do not fit its size: ``scores`` indexes by them."""
        index = cls.__new__(cls)
        index.k1, index.b = float(parameters["k1"]), float(parameters["b"])
        index.size, index.avg_length = int(parameters["size"]), float(parameters["avg_length"])
        index._norm = arrays[f"{prefix}norm"]
        postings = Postings.unpack(arrays, prefix)
        if index._norm.shape != (index.size,) or len(postings.columns) != 2:
            raise PackError(f"{prefix}norm: not one norm per document")
        within(postings.columns[0], index.size, f"{prefix}doc_ids")
        index._postings = _MappedPostings(postings)
        return index

    def idf(self, term: str) -> float:
        posting = self._postings.get(term)
        df = 0 if posting is None else len(posting.doc_ids)
        return math.log(1 + (self.size - df + 0.5) / (df + 0.5))

    def scores(self, query_tokens: Iterable[str]) -> np.ndarray:
        scores = np.zeros(self.size, dtype=np.float32)
        for term, query_freq in Counter(query_tokens).items():
            posting = self._postings.get(term)
            if posting is None:
                continue
            tf = posting.freqs
            weight = self.idf(term) * (1 + math.log(query_freq))
            scores[posting.doc_ids] += weight * tf * (self.k1 + 1) / (tf + self._norm[posting.doc_ids])
        return scores


class DocumentStatistics(Protocol):
    """What evidence about a section needs of a knowledge base: how many documents, how rare a term is."""

    size: int

    def idf(self, term: str) -> float: ...


class SubsetStatistics:
    """A BM25 index's document statistics over some of its documents (``mask``), without indexing them again:
    what a section's evidence weighs a word by when only part of the knowledge base is searched."""

    def __init__(self, index: BM25Index, mask: np.ndarray) -> None:
        self._index = index
        self._mask = mask.astype(bool)
        self.size = int(self._mask.sum())

    def idf(self, term: str) -> float:
        posting = self._index._postings.get(term)
        df = 0 if posting is None else int(self._mask[posting.doc_ids].sum())
        return math.log(1 + (self.size - df + 0.5) / (df + 0.5))
