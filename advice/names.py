"""Every name an answer shows in a namespace upstream defines, looked up in the shipped registry
(data/upstream_names.json, built by scripts/upstream_build.py from NCCL, PyTorch, CUDA, DeepSpeed and vLLM sources):
environment variables in an assignment, an ``export``, ``$NAME`` or ``os.environ``; the flags of a ``torchrun``,
``deepspeed`` or ``vllm serve`` command; the keys of a DeepSpeed JSON config. A name is known, deprecated (with
its replacement, for the user's version where known), read by nothing upstream (``not_read``), unknown, a
project's own (labelled, not flagged), or not checked (nothing here can check it)."""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any, Literal

Status = Literal["known", "deprecated", "not_read", "unknown", "project", "unchecked"]
FLAGGED: frozenset[Status] = frozenset({"deprecated", "not_read", "unknown"})

ENV_NAME = r"[A-Z][A-Z0-9]*_[A-Z0-9_]*[A-Z0-9]"
ENV_USE = re.compile(  # set, exported, unset, expanded or read by name: the shapes that make a word a variable
    rf"(?:\bexport\s+|\bunset\s+|\$\{{?|environ(?:\.get)?\(?\s*\[?\s*['\"]|getenv\(\s*['\"]|`)(?P<name>{ENV_NAME})\b"
    rf"|(?<![\w$-])(?P<assigned>{ENV_NAME})="
)
# Enum values and macros, not variables: error and status codes, CUDA's data types (cudaDataType_t: CUDA_R_16BF,
# CUDA_C_32F, https://docs.nvidia.com/cuda/cublas/#cudadatatype-t), version macros.
NOT_VARIABLE = re.compile(r"_(?:ERROR|STATUS)_|^CUDA_SUCCESS$|^CUDA_[RC]_\d+[A-Z]*$|^[A-Z0-9]+_VERSION_CODE$")
FLAG = re.compile(r"^--?[A-Za-z][\w-]*")
JSON_KEY = re.compile(r"\"(?P<key>[A-Za-z_][\w]*)\"\s*:")
SCRIPT = re.compile(r"\.(?:py|sh)$")
MODULE_FLAGS = ("-m", "--module")  # torchrun's and the DeepSpeed launcher's: run the next word as a module
SHELL_BREAK = re.compile(r"\s(?:\||\|\||&&|;|\d?>>?|&>)\s?|;")


@dataclass(frozen=True)
class Namespace:
    id: str
    kind: str
    project: str
    pattern: re.Pattern[str] | None
    command: re.Pattern[str] | None
    version: str
    sources: tuple[str, ...]
    known: frozenset[str]
    deprecated: dict[str, dict[str, Any]]
    not_read: dict[str, dict[str, Any]]
    complete: bool  # every accepted name is listed: a name not in it is unknown (else: not checked)

    def look_up(self, name: str) -> tuple[Status, dict[str, Any]]:
        if name in self.not_read:
            return "not_read", self.not_read[name]
        if name in self.deprecated:
            return "deprecated", self.deprecated[name]
        if name in self.known or name.replace("_", "-") in self.known or name.replace("-", "_") in self.known:
            return "known", {}
        return ("unknown" if self.complete else "unchecked"), {}


@dataclass(frozen=True)
class NameFinding:
    name: str
    status: Status
    namespace: str
    project: str
    version: str
    line: str
    replacement: str | None = None
    since: str | None = None
    note: str = ""
    note_zh: str = ""
    source: str = ""

    @property
    def flagged(self) -> bool:
        return self.status in FLAGGED


def _namespace(row: dict[str, Any]) -> Namespace:
    return Namespace(
        row["id"], row["kind"], row["project"], re.compile(row["pattern"]) if row.get("pattern") else None,
        re.compile(row["command"]) if row.get("command") else None, row.get("version", ""),
        tuple(row.get("sources", ())), frozenset(row.get("known", ())), dict(row.get("deprecated", {})),
        dict(row.get("not_read", {})), bool(row.get("complete", True)),
    )


@cache
def namespaces() -> tuple[Namespace, ...]:
    data = json.loads(resources.files("advice").joinpath("data/upstream_names.json").read_text(encoding="utf-8"))
    return tuple(_namespace(row) for row in data["namespaces"])


def _env_namespaces() -> list[Namespace]:
    return [ns for ns in namespaces() if ns.kind == "env" and ns.pattern is not None]


def _finding(name: str, ns: Namespace, line: str, status: Status | None = None) -> NameFinding:
    found, info = ns.look_up(name)
    status = status or found
    return NameFinding(name, status, ns.id, ns.project, ns.version, line.strip(), info.get("replacement"),
                       info.get("since"), info.get("note", ""), info.get("note_zh", ""), info.get("source", ""))


def env_findings(line: str) -> Iterator[NameFinding]:
    """Environment variables set or read on this line, in a namespace upstream defines. A name another
    namespace knows (NCCL_BLOCKING_WAIT is PyTorch's, not NCCL's) is judged by that one."""
    for match in ENV_USE.finditer(line):
        name = match.group("name") or match.group("assigned")
        if NOT_VARIABLE.search(name):
            continue
        owners = [ns for ns in _env_namespaces() if ns.pattern and ns.pattern.match(name)]
        if not owners:
            continue
        for ns in owners + [ns for ns in _env_namespaces() if ns not in owners]:
            status, _ = ns.look_up(name)
            if status in ("known", "deprecated", "not_read"):
                yield _finding(name, ns, line)
                break
        else:
            yield _finding(name, owners[0], line)


def _words(line: str) -> list[str]:
    try:
        return shlex.split(line, comments=True)
    except ValueError:
        return line.split()


def flag_findings(line: str, project: str | None = None) -> Iterator[NameFinding]:
    """The flags of a launcher command on this line (those before the script: after it, they are the script's
    own), or, on a command no namespace owns, the flags of a project's own CLI (labelled, not checked)."""
    for ns in namespaces():
        if ns.kind not in ("flag", "arg") or ns.command is None:
            continue
        match = ns.command.search(line)
        if match is None:
            continue
        own = SHELL_BREAK.split(line[match.end():], 1)[0]  # a pipe or a next command is another program's
        for word in _words(own):
            if SCRIPT.search(word):
                break
            flag = FLAG.match(word)
            if flag:
                yield _finding(flag.group(0), ns, line)
            if word in MODULE_FLAGS:  # the next word is the script (a module), and what follows it is the script's
                break
        return
    if project:
        for word in _words(line):
            flag = FLAG.match(word)
            if flag and flag.group(0).startswith("--"):
                yield NameFinding(flag.group(0), "project", "", project, "", line.strip())


def key_findings(block: str) -> Iterator[NameFinding]:
    """The keys of a DeepSpeed (or other) JSON config shown in one code block."""
    for ns in namespaces():
        if ns.kind != "key" or ns.command is None or not ns.command.search(block):
            continue
        for line in block.splitlines():
            for match in JSON_KEY.finditer(line):
                yield _finding(match.group("key"), ns, line)


__all__ = ["FLAGGED", "NameFinding", "Namespace", "env_findings", "flag_findings", "key_findings", "namespaces"]
