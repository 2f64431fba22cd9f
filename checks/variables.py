"""The job's communication settings the check runs with: NCCL_*, GLOO_* and torch distributed variables, from the
shell, a probe bundle (its ``env_vars`` evidence) or the lines the job's log printed (NCCL's ``NCCL_X set by
environment to Y``, an ``export NCCL_X=Y`` or ``NCCL_X=Y`` the launch script echoed).

What a later source says wins over an earlier one: the shell, then the bundle, then the log. A masked value
(``***``) is no value. Each variable keeps where it came from, so the check says what it ran with.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

COMMUNICATION = re.compile(r"^(?:NCCL_|GLOO_|TORCH_NCCL_|TORCH_DISTRIBUTED_|TORCH_GLOO_)[A-Z0-9_]+$")
SET_BY_ENVIRONMENT = re.compile(r"\b((?:NCCL|GLOO|TORCH)_[A-Z0-9_]+) set by environment to ([^\s,]+?)\.?$")
ASSIGNED = re.compile(r"(?:^|[\s;'\"(])(?:export\s+)?((?:NCCL|GLOO|TORCH)_[A-Z0-9_]+)=(\"[^\"]*\"|'[^']*'|[^\s;'\"]+)")
SAFE_VALUE = re.compile(r"^[\w.,:=^/+@%-]{0,256}$")  # what these variables hold: names, numbers, lists, paths
MASKED = "***"
INTERFACE_VARIABLES = ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME")


@dataclass(frozen=True)
class Setting:
    name: str
    value: str
    source: str  # "shell", the bundle's file name, the log's file name


def from_environ(environ: Mapping[str, str]) -> list[Setting]:
    return [Setting(k, v, "shell") for k, v in sorted(environ.items()) if COMMUNICATION.match(k)]


def from_lines(lines: Iterable[str], source: str) -> list[Setting]:
    """The variables a job's log printed, the last value of each."""
    found: dict[str, str] = {}
    for line in lines:
        for match in [SET_BY_ENVIRONMENT.search(line), *ASSIGNED.finditer(line)]:
            if match is None:
                continue
            name, value = match.group(1), match.group(2).strip("'\"")
            if COMMUNICATION.match(name) and SAFE_VALUE.match(value) and value != MASKED:
                found[name] = value
    return [Setting(k, v, source) for k, v in sorted(found.items())]


def from_log(paths: Sequence[Path]) -> list[Setting]:
    """The variables the job's logs printed (read as `ask --log` reads them: files, folders, .gz)."""
    from jobs.reader import read_job

    return from_lines((line.text for line in read_job(list(paths))), ", ".join(str(p) for p in paths))


def from_bundle_data(bundle: Mapping[str, Any], source: str) -> list[Setting]:
    """The ``env_vars`` probe's variables in a `traindoc probe --json` bundle."""
    for result in bundle.get("results", []):
        if isinstance(result, Mapping) and result.get("probe") == "env_vars":
            variables = (result.get("evidence") or {}).get("variables") or {}
            return [Setting(k, str(v), source) for k, v in sorted(variables.items())
                    if COMMUNICATION.match(k) and str(v) != MASKED and SAFE_VALUE.match(str(v))]
    return []


def from_bundle(path: Path, max_bytes: int) -> list[Setting]:
    from tools.bundle import read_bundle

    return from_bundle_data(read_bundle(path, max_bytes), str(path))


def merged(*layers: Sequence[Setting]) -> dict[str, Setting]:
    """Name -> setting, a later layer's value over an earlier one's."""
    table: dict[str, Setting] = {}
    for layer in layers:
        table.update({s.name: s for s in layer})
    return table


def missing_interfaces(settings: Mapping[str, Setting], interfaces: Sequence[str]) -> list[Setting]:
    """The interface variables whose value matches no interface of this machine (NCCL's prefix rules)."""
    from tools.env_vars import ifname_matches

    return [s for name in INTERFACE_VARIABLES if (s := settings.get(name)) is not None and s.value.strip()
            and interfaces and not ifname_matches(s.value.strip(), list(interfaces))]
