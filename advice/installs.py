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


def risky_install(line: str, torch_version: str | None = None) -> RiskyInstall | None:
    """The install on ``line`` that may swap torch, or None."""
    installer = re.match(_data()["installers"], line)
    if installer is None or CONSTRAINED.search(line):
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


__all__ = ["RiskyInstall", "risky_install"]
