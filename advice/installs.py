"""Install lines that could replace the user's torch: a package whose wheels pin an exact torch release
(data/installs.json), installed with no torch constraint on the same command. With the user's torch known, the
shown command carries ``torch==<installed>`` (pip then keeps it or says why it cannot); otherwise a warning."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

CONSTRAINED = re.compile(r"\btorch\s*(?:==|~=|<=|<)|(?:^|\s)(?:-c|--constraint)[\s=]")
PACKAGE = re.compile(r"(?<![\w./=-])(?P<name>[A-Za-z][\w.-]*)(?P<spec>\[[^\]]*\])?(?P<version>(?:[=<>!~]=?|@)\S*)?")


@dataclass(frozen=True)
class RiskyInstall:
    line: str
    packages: tuple[str, ...]
    upgrade: bool
    constrained_line: str | None  # the line with ``torch==<installed>`` added, where the version is known
    sources: tuple[str, ...]


@cache
def _data() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(resources.files("advice").joinpath("data/installs.json").read_text(encoding="utf-8"))
    return data


# Commands that make a new, empty environment: an install after one in the same block cannot replace the torch
# the user's jobs run with (https://docs.python.org/3/library/venv.html, conda create, uv venv).
FRESH_ENVIRONMENT = re.compile(r"(?:^|[\s;&|(])(?:python[\d.]*\s+-m\s+venv|virtualenv|(?:conda|mamba|micromamba)\s+create|uv\s+venv)\s")
DRY_RUN = re.compile(r"(?:^|\s)--dry-run\b")  # pip says what it would install, and installs nothing


def creates_environment(line: str) -> bool:
    return FRESH_ENVIRONMENT.search(line.split("#", 1)[0] + " ") is not None


def risky_install(line: str, torch_version: str | None = None) -> RiskyInstall | None:
    """The install on ``line`` that may swap torch, or None."""
    installer = re.match(_data()["installers"], line)
    if installer is None or CONSTRAINED.search(line) or DRY_RUN.search(line.split("#", 1)[0]):
        return None
    pins = _data()["pins_torch"]
    words = line[installer.end():].split("#", 1)[0]
    names = [m.group("name").lower().replace("_", "-") for m in PACKAGE.finditer(words) if not m.group(0).startswith("-")]
    risky = tuple(dict.fromkeys(name for name in names if name in pins))
    if not risky or "torch" in names:  # installing torch itself with them: replacing torch is the point
        return None
    upgrade = bool(re.search(r"(?:^|\s)(?:-U|--upgrade)\b", words))
    public = torch_version.split("+", 1)[0] if torch_version else None
    constrained = f"{line.rstrip()} torch=={public}" if public else None
    return RiskyInstall(line.strip(), risky, upgrade, constrained, tuple(pins[name] for name in risky))


__all__ = ["RiskyInstall", "creates_environment", "risky_install"]
