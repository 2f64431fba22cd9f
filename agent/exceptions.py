"""Exceptions whose message names no failure kind: what they mean, where they were raised, the first check.

A generic head (``ZeroDivisionError``, ``FileNotFoundError``, ``No module named X``, NCCL's ``unhandled system
error``) says no more than itself: no runbook leads it (runbooks.registry), and a document section answers it
only when it names the same thing (``names_agree``: a section about ``No module named 'lightrft'`` is no answer
to ``No module named 'flash_attn_3'``). When nothing answers, the verdict is the exception itself: what it means,
its place (the last ``File "...", line N`` above it) and its first check (data/exceptions.json).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import PurePosixPath
from typing import Any

from runbooks.registry import signalled

OWN_MODULE = re.compile(r"No module named ['\"]?([\w.]+)")
FRAME = re.compile(r'File "(?P<file>[^"\n]{1,400})", line (?P<line>\d{1,7})(?:, in (?P<function>[\w<>.]{1,120}))?')


@dataclass(frozen=True)
class Raised:
    name: str  # the row of data/exceptions.json: its phrase is exc_<name>
    line: str  # the error line that shows it
    thing: str  # what it names (a module, a path, a key), "" for none
    place: str  # file:line of the frame that raised it, "" when the paste shows none
    check: str  # the first check, with the thing filled in
    own_kind: str = ""  # the runbook kind when the thing is not a published package (data/exceptions.json own_kind)
    named_kind: str = ""  # the runbook kind the named thing tells (data/exceptions.json named_kinds): a launcher's
    # variable, a submodule or a class of a library whose API moves between releases
    named_fix: str = ""  # the fix of that kind's runbook the named thing calls for (a fragment of it), "" for its order

    @property
    def top(self) -> str:
        """The part of the thing a section must name: a module's top-level package, a path's file name."""
        if self.name in ("module_missing", "import_name"):
            return self.thing.split(".")[0]
        if self.name == "file_missing":
            return PurePosixPath(self.thing.replace("\\", "/")).name or self.thing
        return self.thing


@cache
def _data() -> dict[str, Any]:
    """data/exceptions.json, read once for the three tables below."""
    return dict(json.loads(resources.files("agent").joinpath("data/exceptions.json").read_text(encoding="utf-8")))


@cache
def _third_party() -> frozenset[str]:
    return frozenset(_data()["third_party"])


@cache
def _rows() -> tuple[tuple[str, re.Pattern[str], str], ...]:
    return tuple((row["name"], re.compile(row["pattern"]), row["check"]) for row in _data()["exceptions"])


@cache
def _named_kinds() -> tuple[tuple[str, str, re.Pattern[str], str, bool, str], ...]:
    """(exception row, the group it reads: the thing, the module, the function of the frame that raised it, the
    context (the whole report: what the job was doing when it raised) or renamed (advice.renamed), its pattern, the
    kind, whether the report must show that kind's signal too, the fix it calls for), in order."""
    return tuple((row["exception"], group, re.compile(row[group] if group != "renamed" else ""), row["kind"],
                  bool(row.get("with_signal")), str(row.get("fix", "")))
                 for row in _data()["named_kinds"]
                 for group in ("thing", "module", "function", "context", "renamed") if group in row)


def _read(group: str, pattern: re.Pattern[str], groups: dict[str, str], text: str) -> bool:
    """The row's group shows what it names: its pattern over the thing, the module, the function or the report; for
    ``renamed``, the thing is an argument its library renamed or removed, refused by the class or function that took
    it (advice.renamed)."""
    if group == "renamed":
        from advice.renamed import look_up, refuser

        return look_up(groups.get("thing") or "", refuser(groups.get("module") or "", groups.get("call") or "")) is not None
    return pattern.search(text[:20000] if group == "context" else groups.get(group) or "") is not None


def _named_kind(name: str, groups: dict[str, str], text: str) -> tuple[str, str]:
    """(the kind the named thing tells, the fix it calls for); a row ``with_signal`` only where ``text`` (the report)
    shows that kind's signal: ``No module named 'torch'`` while pip builds flash-attn is the build's isolation,
    elsewhere an install."""
    return next(((kind, fix) for exception, group, pattern, kind, with_signal, fix in _named_kinds()
                 if exception == name and _read(group, pattern, groups, text)
                 and (not with_signal or signalled(kind, text) is not None)), ("", ""))


@cache
def _own_kinds() -> dict[str, str]:
    return {row["name"]: row["own_kind"] for row in _data()["exceptions"] if row.get("own_kind")}


def recognise(lines: Sequence[str]) -> Raised | None:
    """The first line (of at most 400) that shows a generic exception, with what it names and where it was raised."""
    lines = lines[:400]
    for index, line in enumerate(lines):
        for name, pattern, check in _rows():
            if (found := pattern.search(line)) is None:
                continue
            groups = found.groupdict()
            thing = (groups.get("thing") or groups.get("bare") or "").strip()  # quoted, or as the asker typed it
            module = groups.get("module") or ""
            top = (module or thing).split(".")[0] if name in ("module_missing", "import_name") else thing
            # its frames are above it where the paste shows it (callers put the error lines first, then the paste)
            at = max(i for i in range(index, len(lines)) if lines[i].strip() == line.strip())
            frames = [m for earlier in lines[max(0, at - 60):at] for m in FRAME.finditer(earlier)]
            place = f"{frames[-1]['file']}:{frames[-1]['line']}" if frames else ""
            named, fix = _named_kind(name, {"thing": thing, "module": module, "call": groups.get("call") or "",
                                            "function": (frames[-1]["function"] or "") if frames else ""},
                                     "\n".join(lines))
            # what the named thing tells comes first: a compiled extension's module is no project's own package
            own = (_own_kinds().get(name, "") if top and not named
                   and (top not in _third_party() or _runs_from_checkout(top, frames)) else "")
            return Raised(name, line.strip(), thing, place, check.replace("{top}", top).replace("{thing}", thing), own,
                          named, fix)
    return None


INSTALLED = re.compile(r"[/\\](?:site|dist)-packages[/\\]|\.egg[/\\]")


def _runs_from_checkout(top: str, frames: Sequence[re.Match[str]]) -> bool:
    """A frame above the error runs a file inside a folder named ``top`` that no installation holds (a repository's
    checkout, ``.../src/llamafactory/launcher.py``): the package's own code runs, yet ``import top`` fails, so the
    project's own package is not importable where the job runs, even where a published package bears its name."""
    return any(top in PurePosixPath(frame["file"].replace("\\", "/")).parts[:-1] and not INSTALLED.search(frame["file"])
               for frame in frames)


def names_agree(raised: Raised, text: str) -> bool:
    """A section's text is about the same exception: it names the same module as missing or installed (not merely
    the module: a DeepSpeed config section is no answer to ``No module named 'deepspeed'``), the same file, the
    same key; an exception that names nothing, the section shows it."""
    if not raised.top:
        return any(pattern.search(text) for name, pattern, _ in _rows() if name == raised.name)
    top = re.escape(raised.top)
    if raised.name == "module_missing" and raised.top not in _third_party():
        # most often the project's own package: a section about a project's own module not importable answers it
        return any(found.group(1).split(".")[0] not in _third_party() for found in OWN_MODULE.finditer(text))
    if raised.name in ("module_missing", "import_name"):
        return re.search(rf"(?i)(?:No module named ['\"]?|cannot import name ['\"]?|pip install[^\n]{{0,80}}?|import ){top}\b",
                         text) is not None
    return raised.top.lower() in text.lower()


__all__ = ["Raised", "names_agree", "recognise"]
