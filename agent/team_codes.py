"""A team's own error codes: ``ERRX-5151``, ``E-90211``. traindoc knows CUDA's, NCCL's and the driver's codes in their
own shapes (jobs.codes); a code in the shape of a team's ticket or service error (an upper-case prefix, a dash or an
underscore, three to six digits) is known only to the documents that name it. A section that only reads alike (the
same service, another code) does not answer it: the answer says no document names the code."""

from __future__ import annotations

import re
from collections.abc import Iterable

CODE = re.compile(r"(?<![\w.-])(?P<prefix>[A-Z][A-Z0-9]{0,7})[-_](?P<number>\d{3,6})(?![\w.-])")
# Prefixes of names that are not error codes: a GPU's arch or model (SM_120, RTX-4090), an encoding (UTF-16, ISO-8859)
NOT_CODES = frozenset({"SM", "CC", "RTX", "GTX", "TITAN", "UTF", "ISO", "CP", "PCI", "CU", "CUDA", "NCCL", "CVE"})
MAX_CHARS = 4000  # only a question's opening names its code; a pasted log's ticket numbers are not the question


def _codes(text: str) -> list[re.Match[str]]:
    """The team error codes ``text`` names (its first MAX_CHARS characters), in order, each once."""
    found = {m.group(0): m for m in CODE.finditer(text[:MAX_CHARS]) if m["prefix"] not in NOT_CODES}
    return list(found.values())


def codes_in(text: str) -> list[str]:
    """The team error codes ``text`` names, as written."""
    return [m.group(0) for m in _codes(text)]


def unnamed_code(text: str, documents: Iterable[str]) -> str | None:
    """The first team error code of ``text`` that none of ``documents`` names (by its number: "ERRX 5151" and
    "ERRX-5151" are one code), or None."""
    codes = _codes(text)
    if not codes:
        return None
    shown = list(documents)
    return next((m.group(0) for m in codes if not any(m["number"] in doc for doc in shown)), None)


__all__ = ["codes_in", "unnamed_code"]
