"""A document's rendering in another language: the same logical sections, not a second document.

A rendering lives at ``<folder>/renderings/<lang>/<stem>.md`` beside its original ``<folder>/<stem>.<ext>``,
starts with front matter naming it (``rendering_of: <file name>``, ``lang: en``) and has the original's headings,
translated, in the same order and at the same levels. Its chunks carry the original's heading path
(``corpus.chunking``), so retrieval treats a section and its rendering as one section (the better-matching
text speaks for it), and an answer shows the text in the asker's language, cited by the original's file and
heading with a language marker.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from pathlib import Path

RENDERING = re.compile(r"(?:^|/)renderings/(?P<lang>[a-z]{2})/(?P<stem>[^/]+)\.md$")
# A runbook in another language renders the English one: runbooks/zh/<kind>.md -> runbooks/en/<kind>.md.
RUNBOOK = re.compile(r"(?:^|/)runbooks/(?P<lang>[a-z]{2})/(?P<stem>[^/]+)\.md$")
ORIGINAL_SUFFIXES = (".txt", ".md", ".markdown", ".rst")


def rendering_language(source: str) -> str | None:
    """The language of a rendering's (or a runbook's) source name, None for any other document."""
    match = RENDERING.search(source) or RUNBOOK.search(source)
    return match.group("lang") if match else None


def original_source(source: str, known: Collection[str]) -> str | None:
    """The original a rendering (by its source name) renders, among the ``known`` sources: the seed beside a
    ``renderings/<lang>/`` file, the English runbook of a ``runbooks/<lang>/`` one."""
    if (runbook := RUNBOOK.search(source)) is not None:
        english = f"{source[: runbook.start()]}/runbooks/en/{runbook.group('stem')}.md".lstrip("/")
        english = english if source[: runbook.start()] or not source.startswith("/") else "/" + english
        return english if runbook.group("lang") != "en" and english in known else None
    match = RENDERING.search(source)
    if match is None:
        return None
    folder = source[: match.start()]  # "" or "corpus" (the match starts at its "/")
    for suffix in ORIGINAL_SUFFIXES:
        candidate = f"{folder}/{match.group('stem')}{suffix}" if folder else f"{match.group('stem')}{suffix}"
        if candidate in known:
            return candidate
    return None


def original_path(path: Path, rendering_of: str) -> Path:
    """The original file of a rendering file (``<folder>/renderings/<lang>/x.md`` -> ``<folder>/<rendering_of>``)."""
    return path.parent.parent.parent / Path(rendering_of).name


def english_runbook(path: Path) -> Path:
    """The English runbook a runbook in another language renders (``runbooks/zh/x.md`` -> ``runbooks/en/x.md``)."""
    return path.parent.parent / "en" / path.name
