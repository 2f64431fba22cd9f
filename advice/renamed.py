"""Arguments a Hugging Face library renamed or removed (data/renamed_arguments.json, sourced per row).

``got an unexpected keyword argument 'use_flash_attention_2'`` says no more than itself until the argument and the
class that refused it are looked up: then it is transformers 5 refusing a name 4.36 replaced, and the answer says
which release dropped it and what to pass instead. So is HfArgumentParser's ``are not used by the HfArgumentParser:
['--evaluation_strategy', ...]`` for the arguments of ``TrainingArguments``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources

# `TrainingArguments.__init__() got ...`, `Trainer.train() got ...`, `from_pretrained() got ...`, `__init__() got ...`
UNEXPECTED = re.compile(r"(?:(?P<owner>\w+)\.)?(?P<call>\w+)\(\) got an unexpected keyword argument ['\"](?P<name>\w+)['\"]")
NOT_USED = re.compile(r"not used by the HfArgumentParser: \[(?P<flags>[^\]\n]{1,2000})")
PARSED_BY = "TrainingArguments"  # the dataclass whose fields a training script's command line sets


@dataclass(frozen=True)
class Renamed:
    old: str
    new: str  # "" where nothing replaces it one to one
    instead: str  # what to do, in words, where ``new`` alone does not say it
    instead_zh: str  # the same in Chinese
    use: str  # what to write in its place, where that is more than ``new`` (``attn_implementation="flash_attention_2"``)
    where: re.Pattern[str]  # the classes or functions that took ``old``; one that matches "" matches any
    project: str
    gone_in: str
    since: str
    source: str


@cache
def _table() -> tuple[Renamed, ...]:
    data = json.loads(resources.files("advice").joinpath("data/renamed_arguments.json").read_text(encoding="utf-8"))
    return tuple(Renamed(row["old"], row.get("new", ""), row.get("instead", ""), row.get("instead_zh", ""),
                         row.get("use", ""), re.compile(row.get("where", "")),
                         row["project"], row["gone_in"], row.get("since", ""), row["source"])
                 for row in data["arguments"])


def refuser(owner: str, call: str) -> str:
    """What refused the argument, from the error's ``Owner.call()``: the class (``TrainingArguments.__init__()``),
    else the function (``from_pretrained()``); "" for a bare ``__init__()``, which names nothing."""
    return owner or ("" if call in ("", "__init__") else call)


def look_up(name: str, refused_by: str = "") -> Renamed | None:
    """The row for argument ``name`` refused by ``refused_by`` (a class or function name; "" when the error names
    none, as Python before 3.10 prints ``__init__()``), the first in the table's order."""
    return next((row for row in _table() if row.old == name
                 and (not refused_by or row.where.search(refused_by) is not None)), None)


def refused(lines: Sequence[str]) -> list[tuple[Renamed, bool]]:
    """The renamed or removed arguments the pasted lines show refused, each once, in the order shown: (the row,
    whether the command line passed it: ``--evaluation_strategy`` to HfArgumentParser, not a keyword in code)."""
    found: dict[tuple[str, str], tuple[Renamed, bool]] = {}
    for line in lines[:400]:
        for hit in UNEXPECTED.finditer(line):
            if (row := look_up(hit["name"], refuser(hit["owner"] or "", hit["call"]))) is not None:
                found.setdefault((row.project, row.old), (row, False))
        for hit in NOT_USED.finditer(line):
            for flag in re.findall(r"['\"]--?(\w+)['\"]", hit["flags"]):
                if (row := look_up(flag, PARSED_BY)) is not None:
                    found.setdefault((row.project, row.old), (row, True))
    return list(found.values())


__all__ = ["Renamed", "look_up", "refused", "refuser"]
