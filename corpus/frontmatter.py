"""YAML front matter at the top of a Markdown document (``---`` lines around it): machine-readable facts about
the document (a runbook's kind and messages, which original a rendering renders), never part of its text."""

from __future__ import annotations

from typing import Any

import yaml

SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml: 7x faster on the runbooks' front matter
MAX_FRONT_MATTER = 16384  # characters: a longer opening block is the document's text, never parsed as YAML


def split_front_matter(text: str) -> tuple[dict[str, Any], str]:
    """(front matter, body). Text without front matter, or whose front matter is not a YAML mapping, is all
    body: a document is never refused for what its first lines look like. Only the first MAX_FRONT_MATTER
    characters can hold it (a document opening with ``---`` and no close is not parsed whole)."""
    if not text.startswith("---\n"):
        return {}, text
    end = text.find("\n---\n", 4, MAX_FRONT_MATTER)
    if end < 0:
        return {}, text
    try:
        data = yaml.load(text[4:end], Loader=SAFE_LOADER)  # noqa: S506 - a safe loader, libyaml's when built
    except yaml.YAMLError:
        return {}, text
    if not isinstance(data, dict):
        return {}, text
    return data, text[end + 5:]
