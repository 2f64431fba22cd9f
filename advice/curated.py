"""Curated facts that correct stale advice wherever a document section is quoted.

A correction applies to a section that is about its subject (its ``context`` matches the section's own
text, its heading path, or the question), whatever was asked: a section that recommends cu124 wheels
for Blackwell GPUs is wrong for every reader. A command line that a changed number cannot fix (a
conda package that was never published, an old pinned build) is replaced whole by a verified command
or a comment; a correction never writes a command that does not exist. Facts and their sources live in
data/curated_facts.json.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources


@dataclass(frozen=True)
class Rewrite:
    stale: re.Pattern[str]
    fresh: str
    source: str


@dataclass(frozen=True)
class Correction:
    code: str
    context: re.Pattern[str]
    note: str
    sources: tuple[str, ...]
    lines: tuple[Rewrite, ...]  # whole command lines, tried first
    replace: tuple[Rewrite, ...]  # words and numbers anywhere else

    def stale_in(self, text: str) -> bool:
        return any(r.stale.search(text) for r in self.lines + self.replace)


def _rewrites(items: list[dict[str, str]], flags: int) -> tuple[Rewrite, ...]:
    return tuple(Rewrite(re.compile(i["stale"], flags), i["fresh"], i["source"]) for i in items)


@cache
def corrections() -> tuple[Correction, ...]:
    data = json.loads(resources.files("advice").joinpath("data/curated_facts.json").read_text(encoding="utf-8"))
    loaded = tuple(
        Correction(
            c["code"], re.compile(c["context"], re.I), c["note"], tuple(c["sources"]),
            _rewrites(c.get("lines", []), re.I | re.M), _rewrites(c.get("replace", []), re.I),
        )
        for c in data["corrections"]
    )
    for fact in loaded:
        if not fact.sources or any(not r.source for r in fact.lines + fact.replace):
            raise ValueError(f"curated_facts.json: {fact.code} states a fact without its source")
    return loaded


def correct(text: str, context: str = "") -> tuple[str, list[Correction]]:
    """``text`` with stale advice replaced, and the corrections that applied. ``context``: the section's
    heading path and the question, read together with ``text`` itself."""
    applied: list[Correction] = []
    for fact in corrections():
        if not fact.stale_in(text) or not (fact.context.search(text) or fact.context.search(context)):
            continue
        replaced: set[int] = set()  # lines already rewritten whole are not touched again
        lines = text.split("\n")
        for number, line in enumerate(lines):
            for rule in fact.lines:
                if rule.stale.fullmatch(line):
                    lines[number] = rule.stale.sub(rule.fresh, line)
                    replaced.add(number)
                    break
        for number, line in enumerate(lines):
            if number not in replaced:
                for rule in fact.replace:
                    line = rule.stale.sub(rule.fresh, line)
                lines[number] = line
        text = "\n".join(lines)
        applied.append(fact)
    return text, applied


def corrected_quote(text: str, context: str = "") -> str:
    """``text`` as it may be shown or handed on (a model's tool result, a source the user expands): stale
    advice replaced, and a line saying what traindoc changed and why, so nobody reads the old advice as the
    document's current word."""
    body, applied = correct(text, context)
    return body + "".join(f"\n(traindoc corrected this section: {fact.note})" for fact in applied)

