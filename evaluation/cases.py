"""The evaluation cases (JSON lines with a query and the gold sections that answer it), read for `traindoc eval`
and its cross-validation alike, and how a case's first right citation is found."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from common.errors import InputError


def load_cases(path: Path) -> list[dict[str, Any]]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read eval cases {path}: {exc}") from exc
    cases = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            case = json.loads(line)
            if "query" not in case:
                raise ValueError('no "query"')
        except ValueError as exc:
            raise InputError(f"{path}:{number}: not an eval case: {exc}") from exc
        case.setdefault("id", str(number))
        case.setdefault("gold", [])
        cases.append(case)
    return cases


def load_sets(paths: Sequence[Path]) -> list[dict[str, Any]]:
    """The cases of several files, in order; an id two files share is told apart by its file's name."""
    cases = []
    seen: set[str] = set()
    for path in paths:
        for case in load_cases(path):
            case = dict(case, id=str(case["id"]))
            if case["id"] in seen:
                case["id"] = f"{path.stem}:{case['id']}"
            seen.add(case["id"])
            cases.append(case)
    return cases


def first_hit(case: dict[str, Any], citations: list[tuple[str, str]]) -> int | None:
    for rank, (source, section) in enumerate(citations):
        for gold in case["gold"]:
            if Path(source).name == gold["file"] and gold["heading"] in section:
                return rank
    return None


__all__ = ["first_hit", "load_cases", "load_sets"]
