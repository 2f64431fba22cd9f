"""What a well-known error code in a log means: CUDA's cudaError_t / CUresult, NCCL's ncclResult_t and the
driver's Xid, from NVIDIA's and PyTorch's documentation and headers (data/error_codes.json). A code is found only
in its own shapes (``Cuda failure 802``, ``CUDA_ERROR_SYSTEM_NOT_READY``, ``NVRM: Xid (PCI:...): 79``, a message in
the words of a library built on torch: ``Failed: Cuda error x.cuh:336 'peer access is not supported ...'``), never in a
``file.cpp:NNNN`` location."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from common.language import Lang

MAX_LINE = 2048  # the linear-time rule: no longer line is matched
FIRST = ("xid", "cuda_error", "nccl_result")  # the most specific first: NCCL's "unhandled cuda error" wraps a CUDA one


@dataclass(frozen=True)
class CodeMeaning:
    family: str  # "cuda_error", "nccl_result", "xid"
    project: str
    code: str
    name: str
    message: str
    meaning: dict[str, str]
    check: str | None
    fix: dict[str, str] | None
    source: str
    line: str  # where the log shows it

    @property
    def head(self) -> str:
        label = {"cuda_error": "CUDA error", "nccl_result": "NCCL result", "xid": "Xid"}.get(self.family, self.family)
        return f"{label} {self.code} ({self.name})" if self.code.isdigit() else f"{label} {self.name}"

    def meaning_in(self, lang: Lang) -> str:
        return self.meaning.get(lang) or self.meaning["en"]

    def said(self, lang: Lang) -> str:
        return f"{self.head}: {self.meaning_in(lang)}"


@dataclass(frozen=True)
class _Family:
    id: str
    project: str
    patterns: tuple[re.Pattern[str], ...]
    codes: dict[str, dict[str, Any]]

    def find(self, match: re.Match[str]) -> tuple[str, dict[str, Any]] | None:
        groups = match.groupdict()
        if groups.get("code") and groups["code"] in self.codes:
            return groups["code"], self.codes[groups["code"]]
        wanted = (groups.get("name") or "").lower()
        said = (groups.get("message") or "").lower()
        for code, row in self.codes.items():
            names = [row.get("name", ""), *row.get("aliases", ())]
            if (wanted and wanted in (n.lower() for n in names)) or (said and said == row.get("message", "").lower()):
                return code, row
        return None


@cache
def _families() -> tuple[_Family, ...]:
    data = json.loads(resources.files("jobs").joinpath("data/error_codes.json").read_text(encoding="utf-8"))
    return tuple(_Family(f["id"], f["project"], tuple(re.compile(p) for p in f["patterns"]), dict(f["codes"]))
                 for f in data["families"])


def meanings(lines: Iterable[str], most: int = 4) -> list[CodeMeaning]:
    """The distinct codes the lines show, in the order first seen."""
    found: dict[tuple[str, str], CodeMeaning] = {}
    for line in lines:
        line = line[:MAX_LINE]
        for family in _families():
            for pattern in family.patterns:
                for match in pattern.finditer(line):
                    hit = family.find(match)
                    if hit is None or (family.id, hit[0]) in found:
                        continue
                    code, row = hit
                    found[(family.id, code)] = CodeMeaning(
                        family.id, family.project, code, row.get("name", ""), row.get("message", ""), dict(row["meaning"]),
                        row.get("check"), dict(row["fix"]) if row.get("fix") else None, row.get("source", ""), line.strip())
        if len(found) >= most:
            break
    return sorted(found.values(), key=lambda m: FIRST.index(m.family) if m.family in FIRST else len(FIRST))[:most]


__all__ = ["CodeMeaning", "meanings"]
