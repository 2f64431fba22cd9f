"""Where a job ran, for ``--redact strict``: host names under a public suffix (``db.example.co.uk``), cloud and
cluster names (``ip-10-0-0-1.ec2.internal``, ``trainer-0.trainer.ml.svc.cluster.local``) and IPv6 addresses.

The suffixes are data: the Public Suffix List's ICANN section (``data/public_suffix_list.dat``, shipped, never
fetched) and the private suffixes of ``data/host_suffixes.json``. A name ending in a suffix that is also a file
extension or a word of code (``train.py``, ``torch.distributed.run``) counts only where it is written as a host:
after ``//`` or ``@`` (``train.py:42`` is a file and a line, not a host and a port).

Linear time: candidates are runs of host characters found by one possessive pattern that only starts where a
run starts; each is then split and looked up in sets.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from functools import cache
from ipaddress import IPv6Address
from pathlib import Path

DATA = Path(__file__).parent / "data"
MAX_NAME = 253  # DNS: characters in a name

# Runs of host characters (in the lowered text), not inside a longer word, path or identifier.
_NAME_RUN = re.compile(r"(?<![a-z0-9_.-])[a-z0-9][a-z0-9-]{0,62}+\.[a-z0-9.-]{1,252}+(?![a-z0-9_])")  # holds a dot
_LABEL = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?")
# IPv6: a run of hex digits, colons and dots (an IPv4 tail) that holds a colon, with an optional zone (%eth0).
_V6_RUN = re.compile(r"(?<![0-9a-z:._%-])(?=[0-9a-f]{0,4}:)[0-9a-f:.]{2,45}+(?:%[0-9a-z._-]{1,16}+)?(?![0-9a-z:_-])")


@cache
def _suffixes() -> tuple[frozenset[str], frozenset[str], frozenset[str], frozenset[str], frozenset[str]]:
    """(rules, wildcard parents, exceptions, private suffixes, code words)."""
    rules, wild, exceptions = set(), set(), set()
    for line in (DATA / "public_suffix_list.dat").read_text(encoding="utf-8").splitlines():
        rule = line.strip()
        if not rule or rule.startswith("//"):
            continue
        if rule.startswith("!"):
            exceptions.add(rule[1:])
        elif rule.startswith("*."):
            wild.add(rule[2:])
        else:
            rules.add(rule)
    table = json.loads((DATA / "host_suffixes.json").read_text(encoding="utf-8"))
    return (frozenset(rules), frozenset(wild), frozenset(exceptions), frozenset(table["private"]),
            frozenset(table["code_words"]))


def public_suffix(labels: list[str]) -> int:
    """How many trailing labels of a name form its public or private suffix (0: none), by the PSL's rules
    (the longest rule wins; ``*.ck`` covers any label under ``ck``, ``!www.ck`` takes one back)."""
    rules, wild, exceptions, private, _ = _suffixes()
    for i in range(len(labels)):
        tail = ".".join(labels[i:])
        if tail in exceptions:
            return len(labels) - i - 1
        if tail in rules or tail in private or (i + 1 < len(labels) and ".".join(labels[i + 1 :]) in wild):
            return len(labels) - i
    return 0


def is_host(name: str, *, as_host: bool = False) -> bool:
    """Is ``name`` (lowered) a host name under a public or private suffix, with at least one label of its own?
    ``as_host``: it is written where a host goes (``//name``, ``user@name``)."""
    labels = name.split(".")
    if len(labels) < 2 or len(name) > MAX_NAME or not all(_LABEL.fullmatch(label) for label in labels):
        return False
    if labels[-1].isdigit():
        return False
    size = public_suffix(labels)
    if size == 0 or size >= len(labels):
        return False
    return as_host or labels[-1] not in _suffixes()[4]


def hosts(lowered: str) -> Iterator[tuple[int, int]]:
    """Spans of the host names in ``lowered`` (text already lower-cased, positions as in the original)."""
    for run in _NAME_RUN.finditer(lowered):
        start, end = run.span()
        while end > start and lowered[end - 1] in ".-":  # the full stop that ends a sentence
            end -= 1
        name = lowered[start:end]
        if end < len(lowered) and lowered[end] == "(":  # a call: torch.save(...)
            continue
        as_host = lowered.endswith(("//", "@"), 0, start)
        if is_host(name, as_host=as_host):
            yield start, end


def ipv6_addresses(lowered: str) -> Iterator[tuple[int, int]]:
    """Spans of IPv6 addresses (not ``::1``, ``::`` or a slice such as ``a[::2]``)."""
    for run in _V6_RUN.finditer(lowered):
        text = run.group(0)
        address, _, _zone = text.partition("%")
        address = address.rstrip(".")
        if address.count(":") < 2 or sum(1 for group in address.split(":") if group) < 2:
            continue
        try:
            parsed = IPv6Address(address)
        except ValueError:
            continue
        if parsed.is_loopback or parsed.is_unspecified:
            continue
        yield run.start(), run.start() + len(text) if _zone else run.start() + len(address)
