"""The asker's facts: what a report states as already true or already tried, read once and used.

A setting the report states (``per_device_train_batch_size: 1``, ``--gpu-memory-utilization 0.95``,
``NCCL_P2P_DISABLE=1``) makes a fix that sets it the same way (or, for a size a fix lowers, no lower) already
tried: it is not the first fix, the next one is, and the answer quotes the stated value. A fact of the setup (one
node, one GPU) makes a fix that contradicts it (a multi-node launch) not first either. The table is
``agent/data/stated.json``; nothing here knows a runbook.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from common.absent_platforms import without_absent_platforms
from common.textsafe import segments
from jobs.diagnosis import HANG_WORDS


@dataclass(frozen=True)
class Stated:
    setting: str  # the setting's name ("micro-batch size", an environment variable's own name)
    value: str


@dataclass(frozen=True)
class Setup:
    """What the report states: settings with their values, and facts of the setup (one node, one GPU)."""

    settings: tuple[Stated, ...] = ()
    facts: tuple[str, ...] = ()
    features: tuple[str, ...] = ()  # what the job already uses (gradient checkpointing, bf16)

    def already(self, code: str) -> Stated | None:
        """The stated setting a fix's ``code`` sets to what the asker already runs with (or, for a size the fix
        lowers, to no less), if any."""
        for setting, value in _sets(code):
            for stated in self.settings:
                if stated.setting == setting and _no_further(setting, stated.value, value):
                    return stated
        return None

    def already_uses(self, code: str) -> tuple[str, ...]:
        """The features a fix's ``code`` turns on, where the asker already uses every one of them; else ()."""
        turned_on = tuple(name for name, _, on in _features() if on.search(code))
        return turned_on if turned_on and set(turned_on) <= set(self.features) else ()

    def contradicted(self, code: str) -> str | None:
        """The stated fact a fix's ``code`` contradicts (a multi-node launch for one node), if any."""
        return next((fact for fact, _, contradicts in _facts() if fact in self.facts and contradicts.search(code)), None)


@cache
def _data() -> dict[str, Any]:
    return dict(json.loads(resources.files("agent").joinpath("data/stated.json").read_text(encoding="utf-8")))


@cache
def _settings() -> tuple[tuple[str, re.Pattern[str], str], ...]:
    return tuple((row["name"], re.compile(row["pattern"], re.IGNORECASE), row["direction"]) for row in _data()["settings"])


@cache
def _env() -> re.Pattern[str]:
    return re.compile(_data()["env"])


@cache
def _facts() -> tuple[tuple[str, re.Pattern[str], re.Pattern[str]], ...]:
    return tuple((row["name"], re.compile(row["stated"]) if "stated" in row else HANG_WORDS, re.compile(row["contradicts"]))
                 for row in _data()["facts"])  # no words of its own: the hang words state that the job hangs


@cache
def _features() -> tuple[tuple[str, re.Pattern[str], re.Pattern[str]], ...]:
    return tuple((row["name"], re.compile(row["stated"]), re.compile(row["turned_on_by"], re.IGNORECASE))
                 for row in _data().get("features", ()))


def stated_features(text: str) -> tuple[str, ...]:
    """The features ``text`` states the job already uses ("I already use gradient checkpointing and bf16",
    ``gradient_checkpointing: true``), never one it asks whether to use or says it does not."""
    head = "\n".join(_read_lines(text))
    return tuple(name for name, stated, _ in _features() if stated.search(head))


@cache
def _contraries() -> dict[str, re.Pattern[str]]:
    """Fact -> the words that state its contrary (a report that says it works on one node and fails on two)."""
    return {row["name"]: re.compile(row["unless"]) for row in _data()["facts"] if row.get("unless")}


@cache
def binding_facts() -> frozenset[str]:
    """The facts the failure's own lines do not outweigh: another accelerator or framework (its messages read like
    CUDA's and PyTorch's, its fixes are not theirs)."""
    return frozenset(row["name"] for row in _data()["facts"] if row.get("binding"))


def stated_facts(text: str) -> tuple[str, ...]:
    """The facts of the setup ``text`` states (one node, one GPU), less those it also states the contrary of."""
    head = without_absent_platforms(text[:20000])  # an environment report's "NPU available: False" states no NPU
    contrary = _contraries()
    return tuple(fact for fact, stated, _ in _facts() if stated.search(head)
                 and not (fact in contrary and contrary[fact].search(head)))


def _read_lines(text: str) -> list[str]:
    """The lines of ``text`` a setting or a feature is read in: at most 200, each cut at 2,048 characters."""
    return [line[:2048] for line in text.splitlines()[:200]]


def _sets(text: str) -> list[tuple[str, str]]:
    """(setting, value) for every setting ``text`` sets or states, in order (at most 200 lines of 2,048 characters)."""
    found: list[tuple[str, str]] = []
    for line in _read_lines(text):
        found += [(name, m.group("value")) for name, pattern, _ in _settings() for m in pattern.finditer(line)]
        found += [(m.group("name"), _value(m.group("value"))) for m in _env().finditer(line)]
    return found


# What prose puts after a value ("I already set NCCL_P2P_DISABLE=1, still stuck", "设置了 NCCL_IB_DISABLE=1，还是"):
# not part of it. Full-width punctuation never is, wherever it stands; ASCII punctuation only at the end.
FULL_WIDTH_PROSE = re.compile(r"[，。；：！？、）】」]")
PROSE_END = ".,;:!?)]}"


def _value(written: str) -> str:
    return FULL_WIDTH_PROSE.split(written, maxsplit=1)[0].rstrip(PROSE_END)


def _no_further(setting: str, stated: str, proposed: str) -> bool:
    direction = next((d for name, _, d in _settings() if name == setting), "same")
    try:
        a, b = float(stated), float(proposed)
    except ValueError:
        return stated == proposed
    return a <= b if direction == "lower" else a == b


def read_setup(texts: Sequence[str]) -> Setup:
    """What the report's own words state (the question, its error lines): the first value stated for a setting wins."""
    text = "\n".join(texts)
    settings: dict[str, str] = {}
    for setting, value in _sets(text):
        settings.setdefault(setting, value)
    return Setup(tuple(Stated(k, v) for k, v in settings.items()), stated_facts(text), stated_features(text))


INSTALL_OR_RUN = re.compile(r"^\s*(?:pip3?|python3?\s+-m\s+pip|conda|uv\s+pip|apt(?:-get)?)\s+install\b")
PINNED = re.compile(r"(?<=[\w\]])(?:==|>=|<=|~=)[\w.*+!-]+")
MIN_TRIED = 16  # shorter commands ("pip install x") say too little to be the same


def _said(command: str) -> str:
    """A command as it is compared: lower case, one space, a package's ``_`` as ``-``, no version pins."""
    return " ".join(PINNED.sub("", command).lower().replace("_", "-").split())


def first_install(section_text: str) -> str:
    """The first install command of a section's code blocks, or ""."""
    for kind, block in segments(section_text):
        if kind == "fence":
            for line in block.splitlines()[1:]:
                if INSTALL_OR_RUN.match(line):
                    return line.split("#", 1)[0].strip()
    return ""


def already_ran(section_text: str, report: str) -> str:
    """The section's first install command where the report shows the asker already ran it (``pip install
    flash_attn==2.7.4.post1 --no-build-isolation`` for ``pip install flash-attn --no-build-isolation``), else "": the
    section's first fix is what failed, not its answer."""
    command = first_install(section_text)
    said = _said(command)
    return command if len(said) >= MIN_TRIED and said in _said(report[:20000]) else ""


__all__ = ["Setup", "Stated", "already_ran", "binding_facts", "first_install", "read_setup", "stated_facts",
           "stated_features"]
