"""The job's own facts in its error lines, quoted into a runbook's "In your job" line: how much an OOM asked for
and which processes held the GPU's memory, NCCL's last error, the NCCL variables the job set. The patterns and
their wording are data (data/job_facts.json)."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources

from common.language import Lang

UNITS = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40, "KB": 10**3, "MB": 10**6, "GB": 10**9,
         "TB": 10**12}
MOST_ITEMS = 6


@dataclass(frozen=True)
class FactPattern:
    id: str
    pattern: re.Pattern[str]
    wording: dict[str, str]
    item: dict[str, str]
    each: bool = False
    larger: tuple[str, str] | None = None  # (a, b): say `larger_<lang>` when a's size exceeds b's
    larger_wording: dict[str, str] | None = None


@cache
def fact_patterns() -> tuple[FactPattern, ...]:
    data = json.loads(resources.files("runbooks").joinpath("data/job_facts.json").read_text(encoding="utf-8"))
    return tuple(
        FactPattern(
            f["id"], re.compile(f["pattern"]), {"en": f["en"], "zh": f["zh"]},
            {"en": f.get("item_en", ""), "zh": f.get("item_zh", "")}, bool(f.get("each")),
            tuple(f["larger"]) if "larger" in f else None,
            {"en": f["larger_en"], "zh": f["larger_zh"]} if "larger" in f else None,
        )
        for f in data["facts"]
    )


def size_bytes(text: str) -> float | None:
    number, _, unit = text.partition(" ")
    try:
        return float(number) * UNITS[unit]
    except (ValueError, KeyError):
        return None


def _one(fact: FactPattern, match: re.Match[str], lang: Lang) -> list[str]:
    said = [fact.wording[lang].format(**match.groupdict())]
    if fact.larger and fact.larger_wording:
        a, b = (size_bytes(match.group(name)) for name in fact.larger)
        if a is not None and b is not None and a > b:
            said.append(fact.larger_wording[lang])
    return said


def quoted_facts(lines: Sequence[str], lang: Lang) -> list[str]:
    """What the job's lines say, in the order of data/job_facts.json; each fact once."""
    said: list[str] = []
    for fact in fact_patterns():
        matches = [m for line in lines for m in fact.pattern.finditer(line)]
        if not matches:
            continue
        if not fact.each:
            said.extend(_one(fact, matches[0], lang))
            continue
        items = list(dict.fromkeys(fact.item[lang].format(**m.groupdict()) for m in matches))
        shown = ", ".join(items[:MOST_ITEMS]) + (f", … (+{len(items) - MOST_ITEMS})" if len(items) > MOST_ITEMS else "")
        said.append(fact.wording[lang].format(items=shown))
    return said


__all__ = ["quoted_facts", "size_bytes"]
