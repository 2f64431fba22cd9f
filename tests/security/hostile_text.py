"""Hostile text for every pattern traindoc applies to what a user gives it: long runs of near-matches.

A pattern that restarts a long match at every position is slow only on text made of its own pieces: a literal it
starts with, repeated, with what it waits for never coming ("oom-killoom-kill..." for ``oom-kill.*Killed process``,
"a.a.a.a..." for a file-name pattern, a megabyte without a space for ``\\S+\\.log``). ``near_misses`` builds those
for any pattern from its own literal fragments (read with the regex parser), plus the generic shapes that break
word, path and number patterns. ``user_text_patterns`` lists every pattern applied to a question, a log line or a
paste, from the modules that apply them, so a new pattern is covered without a new row here.

Used by tests/security/test_hostile_text.py (results stay right) and benchmarks/bench_hostile_input.py (time per
KB stays flat from 10 KB to 1 MB).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

try:  # Python 3.11+
    from re import _parser as sre_parse  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover
    import sre_parse  # type: ignore[no-redef]

# Shapes that break word, path, number and prefix patterns whatever their literals.
GENERIC = ("a", "a.", "a-", "-a", ".a", "1.", "1", "0x", "v1.", "/", "\\", "a/", "A", "Aa", "_", " ", "\t", "?",
           "[", "[a", "::", "a::", "卡", "\r", "\x1b[", "-", "--a", "aError", "ErrorError")


def fragments(pattern: str) -> list[str]:
    """The literal runs ``pattern`` is made of ("oom-kill", "Killed process"), longest first, at most 12."""
    found: set[str] = set()

    def walk(items: object) -> None:
        run: list[str] = []
        for op, arg in items:  # type: ignore[attr-defined]
            name = str(op)
            if name == "LITERAL":
                run.append(chr(arg))
                continue
            if len(run) >= 2:
                found.add("".join(run))
            run = []
            if name == "SUBPATTERN":
                walk(arg[-1])
            elif name == "ATOMIC_GROUP":
                walk(arg)
            elif name == "BRANCH":
                for branch in arg[1]:
                    walk(branch)
            elif name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
                walk(arg[2])
            elif name in ("ASSERT", "ASSERT_NOT"):
                walk(arg[1])
        if len(run) >= 2:
            found.add("".join(run))

    try:
        walk(sre_parse.parse(pattern))
    except (re.error, TypeError, ValueError):  # an exotic construct: the generic shapes still apply
        pass
    return sorted(found, key=lambda f: (-len(f), f))[:12]


def units(pattern: str) -> list[str]:
    """What hostile text for ``pattern`` is repeated from: each fragment, the fragment one character short, the
    fragment followed by a space or a letter, two fragments without what joins them, and the generic shapes."""
    parts = fragments(pattern)
    out: list[str] = []
    for part in parts:
        out += [part, part[:-1], part + " ", part + "a", part + "."]
    out += [a + b for a in parts[:4] for b in parts[:4] if a != b]
    out += list(GENERIC)
    return list(dict.fromkeys(u for u in out if u))


def near_misses(pattern: str, size: int) -> Iterator[str]:
    """Texts of ``size`` characters, each one unit repeated (one line: no newline unless the unit has one)."""
    for unit in units(pattern):
        yield (unit * (size // len(unit) + 1))[:size]


def user_text_patterns() -> dict[str, re.Pattern[str]]:
    """Every pattern applied to a question, a pasted log, a log line or an answerability feature, by where it lives."""
    from corpus import answerability, errorlines
    from jobs import lines, signatures
    from tools import registry

    found: dict[str, re.Pattern[str]] = {}
    for module in (answerability, errorlines, lines, signatures):
        for name, value in vars(module).items():
            if isinstance(value, re.Pattern):
                found[f"{module.__name__}.{name}"] = value
    for index, (_keywords, regexes, _probes) in enumerate(registry._rules()):
        for number, regex in enumerate(regexes):
            found[f"probe_rules[{index}].regex[{number}]"] = regex
    for row in signatures.signatures():
        found[f"signatures.{row.kind}.{row.category}.{row.literal}"] = row.pattern
    for shape in signatures.exit_shapes():
        found[f"signatures.exits.{shape.launcher}.{shape.literal}"] = shape.pattern
    return found


def hostile_question(size: int) -> str:
    """One question of ``size`` characters built from every pattern's near-misses, a block of each in turn, with a
    line break now and then (a paste) and long lines among them."""
    blocks: list[str] = []
    total = 0
    patterns = list(user_text_patterns().values())
    while total < size:
        for pattern in patterns:
            for unit in units(pattern.pattern)[:6]:
                block = (unit * (2048 // len(unit) + 1))[:2048]
                blocks.append(block)
                total += len(block) + 1
                if total >= size:
                    break
            if total >= size:
                break
    return "\n".join(blocks)[:size]
