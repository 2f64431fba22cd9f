"""A question whose pasted error is an exception no catalogue knows: a ``KeyError: 'instruction'``, a library's
own ``AssertionError``, a ``ValueError`` about an API key. Its words ("error", "training", "dataset") are every
section's words, so, as for a job that failed with such an exception (``Question.needs_a_quote``), only a
section that quotes the error answers it; otherwise the answer says no section covers it.

Known kinds stay answerable by their words: a line a log signature reads (``jobs/data/signatures.json``) or an
error family names (``corpus/data/error_families.json``: CUDA, NCCL, OOM, ...). Measured on the 183 dev and
dev2 reports: unanswerable reports refused 0.69 -> 0.82, with R@1, R@3 and false no_match unchanged.
"""

from __future__ import annotations

import re

from corpus import families
from corpus.errorlines import error_lines
from jobs.signatures import meaning

# Identifiers, read token by token (linear: no pattern rescans a long word): ``torch.OutOfMemoryError``,
# ``KeyError``; the exception is the first whose name ends in Error/Exception and is followed by a colon.
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_.]{0,200}")
EXCEPTION_ENDINGS = ("Error", "Exception")


def _raised(line: str) -> bool:
    for token in IDENTIFIER.finditer(line):
        name = token.group().rsplit(".", 1)[-1]
        if name[:1].isupper() and name.endswith(EXCEPTION_ENDINGS) and line[token.end():token.end() + 3].lstrip().startswith(":"):
            return True
    return False


def uncatalogued_exception(text: str) -> bool:
    """The first exception line among ``text``'s error lines is of no kind a signature or a family names."""
    raised = next((line for line in error_lines(text.splitlines()) if _raised(line)), None)
    return raised is not None and meaning(raised) is None and not families.detect(raised)
