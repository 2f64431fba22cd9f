"""Reading a `traindoc probe --json` bundle made on another machine: bounded, then checked against its schema.

A bundle is read up to ``TRAINDOC_MAX_BUNDLE_MB`` (16 MB by default; a real one is tens of KB) from a file, a
pipe or ``<(ssh node3 traindoc probe --json)``; ``/dev/zero`` or a 2 GB file is refused after the cap, in one
line that names it. Then every field is checked: its type, the probes it may name, and the shape of the raw
evidence traindoc's own rules re-judge (``tools.verdicts``), where a string that could reach a command in a fix
(an interface name, a package requirement, a host, a pid) must look like what it claims to be. An error names
the field: ``results[2].evidence.interfaces[0]: not an interface name``.

A bundle from a newer traindoc (a higher ``traindoc_bundle``) is read where its fields are known: a result this
version cannot read is left out, and so is a probe this version does not have (in a bundle of any version), each
with one note on standard error; the rest is diagnosed.
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

BUNDLE_VERSION = 1
log = logging.getLogger(__name__)
MAX_RESULTS = 64
MAX_FINDINGS = 200
MAX_DEPTH = 12  # of a probe's free-form evidence
MAX_DOCUMENT_DEPTH = MAX_DEPTH + 6  # of the whole bundle: the results, a result, its evidence, then that
MAX_INT_DIGITS = 19  # a whole number in a bundle is a byte count, a pid, a port: 64 bits hold every one
STATUSES = ("ok", "problem", "unavailable", "error", "timed_out")
SEVERITIES = ("problem", "info", "ok")


class BundleError(ValueError):
    """A file that is not a readable traindoc bundle; the message names the file and, when it is the schema,
    the field."""


def read_bundle(path: str | Path, max_bytes: int) -> dict[str, Any]:
    """The bundle at ``path`` (a file, a FIFO, standard input as ``-``), read up to the cap, parsed, validated."""
    name = str(path)
    try:
        if name == "-":
            import sys

            data = sys.stdin.buffer.read(max_bytes + 1)
        else:
            with open(path, "rb") as handle:  # not Path.read_bytes: a FIFO or /dev/zero has no size to trust
                data = handle.read(max_bytes + 1)
    except IsADirectoryError as exc:
        raise BundleError(f"{name}: a folder, not a bundle") from exc
    except OSError as exc:
        raise BundleError(f"{name}: cannot read it ({exc.strerror or exc})") from exc
    if len(data) > max_bytes:
        raise BundleError(f"{name}: larger than the {max_bytes / 2**20:g} MB bundle cap (TRAINDOC_MAX_BUNDLE_MB); "
                          "a traindoc probe --json bundle is a few KB")
    return parse_bundle(data, name)


class _Literal(ValueError):
    """A JSON number no bundle holds: NaN, Infinity, 1e400, a whole number past 64 bits (5,000 digits)."""


def _constant(literal: str) -> Any:
    raise _Literal(f"{literal} is not a number a bundle holds")


def _float(literal: str) -> float:
    number = float(literal)
    if not math.isfinite(number):
        raise _Literal(f"{literal[:20]}{'…' if len(literal) > 20 else ''} is out of range")
    return number


def _int(literal: str) -> int:
    digits = literal.lstrip("-")
    if len(digits) > MAX_INT_DIGITS:  # checked before int(): Python refuses past 4300 digits, with a ValueError
        raise _Literal(f"a whole number of {len(digits)} digits is out of range")
    return int(literal)


def parse_bundle(data: bytes, name: str = "bundle") -> dict[str, Any]:
    try:
        parsed = json.loads(data.decode("utf-8-sig"), parse_constant=_constant, parse_float=_float, parse_int=_int)
    except UnicodeDecodeError as exc:
        raise BundleError(f"{name}: not UTF-8 text (byte {exc.start}); not a traindoc bundle") from exc
    except json.JSONDecodeError as exc:
        raise BundleError(f"{name}: not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from exc
    except _Literal as exc:
        raise BundleError(f"{name}: {exc}; not a traindoc bundle") from exc
    except RecursionError as exc:
        raise BundleError(f"{name}: JSON nested too deeply; not a traindoc bundle") from exc
    except ValueError as exc:  # anything else json refuses in a value: still one line, naming the file
        raise BundleError(f"{name}: not JSON ({str(exc)[:200]})") from exc
    version = parsed.get("traindoc_bundle") if isinstance(parsed, dict) else None
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise BundleError(f'{name}: not a traindoc bundle (expected "traindoc_bundle": {BUNDLE_VERSION})')
    try:
        _plain_tree(parsed)
        for note in _known_results(parsed, newer=version > BUNDLE_VERSION):
            log.warning("traindoc: note: %s: %s", name, note)
        validate(parsed)
    except _Invalid as exc:
        raise BundleError(f"{name}: {exc.where}: {exc.what}") from None
    return parsed


def _known_results(parsed: dict[str, Any], *, newer: bool) -> list[str]:
    """Leave out the results this version cannot read: a probe it does not have; in a newer bundle, also a result
    that breaks this version's schema. One note for what was left out, and one for a newer bundle."""
    from tools.registry import PROBES

    results = parsed.get("results")
    if not isinstance(results, list):
        return []
    kept: list[Any] = []
    unknown: list[str] = []
    for index, result in enumerate(results):
        probe = result.get("probe") if isinstance(result, dict) else None
        if isinstance(probe, str) and probe not in PROBES:
            unknown.append(probe[:40])
            continue
        if newer:
            try:
                _result(result, f"results[{index}]")
            except _Invalid as exc:
                unknown.append(f"{probe if isinstance(probe, str) else 'a result'} ({exc.what})"[:120])
                continue
        kept.append(result)
    parsed["results"] = kept
    notes = [f'made by a newer traindoc (bundle version {parsed["traindoc_bundle"]}; this one reads '
             f"{BUNDLE_VERSION}): the fields this version knows are read, the others are ignored"] if newer else []
    if unknown:
        notes.append(f"left out {len(unknown)} result{'s' if len(unknown) > 1 else ''} this traindoc cannot read: "
                     f"{', '.join(unknown[:8])}{' ...' if len(unknown) > 8 else ''}")
    return notes


def _plain_tree(document: dict[str, Any]) -> None:
    """No deeper than a bundle is (so nothing that walks it later recurses out of stack) and text throughout: a
    lone surrogate (JSON's ``"\\ud800"``) cannot be printed or sent, so it is refused here, naming the field."""
    stack: list[tuple[Any, str, int]] = [(document, "", 0)]
    while stack:
        value, where, depth = stack.pop()
        if depth > MAX_DOCUMENT_DEPTH:
            raise _Invalid(where, f"nested deeper than {MAX_DOCUMENT_DEPTH}")
        if isinstance(value, str):
            if _LONE_SURROGATE.search(value):
                raise _Invalid(where, "not text (a lone surrogate, \\udXXX)")
        elif isinstance(value, dict):
            for key, entry in value.items():
                if _LONE_SURROGATE.search(key):
                    raise _Invalid(where or "(top)", "a key that is not text (a lone surrogate)")
                stack.append((entry, _at(where, key), depth + 1))
        elif isinstance(value, list):
            stack.extend((entry, f"{where}[{index}]", depth + 1) for index, entry in enumerate(value))


def looks_like_bundle(data: bytes) -> bool:
    """Is this upload a bundle (not a log)? A cheap look at its start, before anything is parsed."""
    head = data[:200].lstrip(b"\xef\xbb\xbf \t\r\n")
    return head.startswith(b"{") and b'"traindoc_bundle"' in data[:4096]


# -- the schema -------------------------------------------------------------------------------------------------

class _Invalid(Exception):
    def __init__(self, where: str, what: str) -> None:
        super().__init__(f"{where}: {what}")
        self.where, self.what = where, what


Check = Callable[[Any, str], None]

_IFNAME = re.compile(r"[A-Za-z0-9_.:@-]{1,32}")
_PACKAGE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")
_VERSION = re.compile(r"[A-Za-z0-9_.+!*-]{1,64}")
_REQUIREMENT = re.compile(r"[A-Za-z0-9_.\[\], <>=!~*+-]{1,200}")
_HOST = re.compile(r"[A-Za-z0-9_.:%-]{1,253}")
_CODE = re.compile(r"[A-Z][A-Z0-9_]{0,63}")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _string(limit: int = 20_000, pattern: re.Pattern[str] | None = None, what: str = "") -> Check:
    def check(value: Any, where: str) -> None:
        if not isinstance(value, str):
            raise _Invalid(where, f"must be a string, not {type(value).__name__}")
        if len(value) > limit:
            raise _Invalid(where, f"longer than {limit} characters")
        if pattern is not None and not pattern.fullmatch(value):
            raise _Invalid(where, f"not {what} ({value[:40]!r})")

    return check


def _number(integer: bool = False, optional: bool = False) -> Check:
    def check(value: Any, where: str) -> None:
        if value is None and optional:
            return
        kinds: tuple[type, ...] = (int,) if integer else (int, float)
        if isinstance(value, bool) or not isinstance(value, kinds):
            raise _Invalid(where, f"must be {'a whole number' if integer else 'a number'}, not {type(value).__name__}")

    return check


def _boolean(value: Any, where: str) -> None:
    if not isinstance(value, bool):
        raise _Invalid(where, f"must be true or false, not {type(value).__name__}")


def _at(where: str, name: str) -> str:
    return f"{where}.{name}" if where else name


def _optional(check: Check) -> Check:
    return lambda value, where: None if value is None else check(value, where)


def _one_of(choices: tuple[str, ...]) -> Check:
    def check(value: Any, where: str) -> None:
        if value not in choices:
            raise _Invalid(where, f"must be one of {', '.join(choices)} (got {str(value)[:40]!r})")

    return check


def _list(item: Check, limit: int = 1000) -> Check:
    def check(value: Any, where: str) -> None:
        if not isinstance(value, list):
            raise _Invalid(where, f"must be a list, not {type(value).__name__}")
        if len(value) > limit:
            raise _Invalid(where, f"more than {limit} entries")
        for index, entry in enumerate(value):
            item(entry, f"{where}[{index}]")

    return check


def _object(fields: Mapping[str, Check], required: tuple[str, ...] = (), others: Check | None = None) -> Check:
    def check(value: Any, where: str) -> None:
        if not isinstance(value, dict):
            raise _Invalid(where, f"must be an object, not {type(value).__name__}")
        for name in required:
            if name not in value:
                raise _Invalid(_at(where, name), "missing")
        for name, entry in value.items():
            rule = fields.get(name, others)
            if rule is not None:
                rule(entry, _at(where, name))

    return check


def _json(value: Any, where: str, depth: int = 0) -> None:
    """Any JSON, within depth and string limits (evidence traindoc only shows, never acts on)."""
    if depth > MAX_DEPTH:
        raise _Invalid(where, f"nested deeper than {MAX_DEPTH}")
    if isinstance(value, dict):
        for name, entry in value.items():
            _json(entry, _at(where, name), depth + 1)
    elif isinstance(value, list):
        for index, entry in enumerate(value[:5000]):
            _json(entry, f"{where}[{index}]", depth + 1)
    elif isinstance(value, str) and len(value) > 100_000:
        raise _Invalid(where, "longer than 100000 characters")


_FINDING = _object({
    "code": _string(64, _CODE, "a finding code"), "severity": _one_of(SEVERITIES), "summary": _string(),
    "evidence": _string(), "fix": _string(), "topics": _list(_string(200), 50),
}, required=("code", "severity", "summary"))

# The raw evidence that traindoc's own rules re-judge (tools/verdicts.py), field by field.
_EVIDENCE: dict[str, Check] = {
    "env_vars": _object({
        "variables": _object({}, others=_string(20_000)), "interfaces": _list(_string(32, _IFNAME, "an interface name"), 256),
        "gpu_count": _number(integer=True, optional=True)}),
    "gpu_inventory": _object({
        "source": _string(40), "driver_version": _string(40), "cuda_driver_version": _optional(_string(40)),
        "gpus": _list(_object({
            "index": _number(integer=True), "name": _string(200), "capability": _string(8, re.compile(r"\d{1,2}\.\d{1,2}"), "a capability"),
            "memory_total_mib": _number(integer=True), "memory_used_mib": _number(integer=True),
            "utilization_pct": _number(integer=True, optional=True), "uuid": _string(200),
            "utilization_samples": _list(_number(integer=True), 64),
            "ecc_uncorrected_volatile": _number(integer=True, optional=True),
            "remapped_rows": _optional(_object({}, others=_number(integer=True))),
            "processes": _list(_object({"pid": _number(integer=True), "name": _string(300), "used_mib": _number(integer=True)},
                                       required=("pid", "name", "used_mib")), 256)},
            required=("name",)), 64)},  # a GPU missing a number is not re-judged (tools.verdicts)
        required=("gpus",)),
    "torch_cuda_compat": _object({
        "report": _object({
            "torch": _optional(_string(64, _VERSION, "a version")), "torch_cuda": _optional(_string(16, _VERSION, "a version")),
            "arch_list": _optional(_list(_string(16, re.compile(r"(?:sm|compute)_\d{2,3}[a-z]?"), "an arch"), 64)),
            "devices": _list(_object({"name": _string(200), "capability": _list(_number(integer=True), 2)},
                                     required=("name", "capability")), 64),
            "driver_cuda": _number(integer=True, optional=True), "torch_error": _string(), "executable": _string(4096)}),
        "gpus": _optional(_list(_object({"name": _string(200), "capability": _string(8)}), 64)),
        "driver_version": _optional(_string(40))}),
    "versions": _object({
        "packages": _object({}, others=_optional(_string(64, _VERSION, "a version"))),
        "torch_pins": _list(_object({"package": _string(100, _PACKAGE, "a package name"), "version": _string(64, _VERSION, "a version"),
                                     "requires": _string(200, _REQUIREMENT, "a requirement")},
                                    required=("package", "version", "requires")), 100),
        "nccl": _optional(_string(32, _VERSION, "a version"))}),
    "disk_and_memory": _object({
        "disks": _object({}, others=_object({"checked": _string(4096), "total_bytes": _number(integer=True),
                                             "free_bytes": _number(integer=True), "error": _string()})),
        "shm_bytes": _number(integer=True),
        "memory": _object({"total_bytes": _number(integer=True), "available_bytes": _number(integer=True),
                           "swap_free_bytes": _number(integer=True, optional=True)})}),
    "port_check": _object({
        "ports": _object({}, others=_object({
            "free": _boolean,
            "bind_errors": _object({}, others=_string(500)),
            "owners": _list(_object({"pid": _number(integer=True), "cmdline": _string(1000)}, required=("pid",)), 100)})),
        "master_addr": _object({"host": _string(253, _HOST, "a host name or address"), "error": _string(500),
                                "addresses": _list(_string(64, _HOST, "an address"), 32), "port": _number(integer=True),
                                "connect_error": _string(500)}, required=("host",))}),
    "processes": _object({
        "processes": _list(_object({"pid": _number(integer=True), "ppid": _number(integer=True), "cmdline": _string(1000),
                                    "age_s": _number(optional=True)}, required=("pid", "ppid", "cmdline")), 200),
        "matched": _number(integer=True), "scanned": _number(integer=True)}),
    "log_grep": _object({
        "files": _list(_object({"path": _string(4096), "engine": _string(40), "groups": _list(_object({
            "signature": _string(100), "code": _string(64, _CODE, "a finding code"), "count": _number(integer=True),
            "first_line": _number(integer=True), "last_line": _number(integer=True),
            "ranks": _list(_number(integer=True), 4096), "example": _string(4000)},
            required=("signature", "count", "first_line", "last_line", "example")), 200)}, required=("path",)), 64)}),
}


def _result(value: Any, where: str) -> None:
    from tools.registry import PROBES

    _object({"probe": _one_of(tuple(PROBES)), "status": _one_of(STATUSES), "summary": _string(),
             "findings": _list(_FINDING, MAX_FINDINGS), "evidence": _json, "duration_ms": _number()},
            required=("probe", "status", "summary"))(value, where)
    evidence = value.get("evidence") or {}
    rule = _EVIDENCE.get(value["probe"])
    if rule is not None and value["status"] in ("ok", "problem"):
        rule(evidence, f"{where}.evidence")


def validate(data: dict[str, Any]) -> None:
    """Raise ``_Invalid`` naming the first field that breaks the schema."""
    _object({"traindoc_bundle": _number(integer=True), "host": _string(253), "created": _optional(_string(64)),
             "timeout_s": _number(optional=True), "results": _list(_result, MAX_RESULTS)},
            required=("traindoc_bundle", "results"))(data, "")
