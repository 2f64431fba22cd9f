"""How a Slack answer names its sources: a link where the corpus records where a document came from, a
readable title otherwise, never a hash-named file.

Where the upstream of a document is recorded:
- a shipped seed: ``advice/data/projects.json`` (``source: owner/repo@commit:path``, the commit the shipped
  copy was taken at) and ``advice/data/claims.json`` (``upstream``: the commit upstream was last checked at).
  The link is the permalink of the snapshot; when upstream has moved on since, the line says so.
- any document (a team's runbook): front matter ``upstream:`` (or ``url:`` / ``source_url:``), an http(s) URL.
- a traindoc runbook: its own title and date checked, with links to the first upstream sources it cites.
Whatever traindoc corrected in the text shown (advice.review) is said too: the copy shown is not upstream's.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path, PurePath
from typing import Any

from agent.answer import Citation
from common.language import Lang, say
from common.settings import REPO_ROOT
from common.textsafe import escape_mrkdwn
from corpus.frontmatter import split_front_matter

URL = re.compile(r"https?://[A-Za-z0-9.-]{1,253}(?::\d{1,5})?(?:/[A-Za-z0-9._~:/?#\[\]@!$'()*+,;=%-]{0,500})?")
PINNED = re.compile(r"^(?P<repo>[\w.-]+/[\w.-]+)@(?P<commit>[0-9a-f]{7,40}):(?P<path>\S+)$")
UPSTREAM_KEYS = ("upstream", "url", "source_url")
HEAD_BYTES = 16384
MAX_REFS = 2


@dataclass(frozen=True)
class Origin:
    url: str = ""  # where the document came from (a permalink where it is pinned)
    label: str = ""  # the document as a reader knows it ("LightRFT troubleshooting_zh.md")
    snapshot: str = ""  # the commit the shipped copy was taken at
    moved_on: str = ""  # upstream's commit when last checked, where it is not the snapshot's
    checked: str = ""  # a traindoc runbook: when its facts were checked
    refs: tuple[str, ...] = ()  # a runbook's upstream sources

    def notes(self, lang: Lang) -> list[str]:
        """What the corpus says about the copy shown, in the asker's language."""
        said = []
        if self.snapshot:
            said.append(say("source_snapshot", lang, commit=self.snapshot)
                        + (say("source_moved_on", lang, now=self.moved_on) if self.moved_on else ""))
        if self.checked:
            said.append(say("source_runbook", lang, date=self.checked))
        return said


def _advice_data(name: str) -> dict[str, Any]:
    import advice.projects  # the package's own folder (a tests/advice folder must not stand in for it)

    return json.loads((Path(advice.projects.__file__).parent / "data" / name).read_text(encoding="utf-8"))


@cache
def _seed_origins() -> dict[str, Origin]:
    projects, claims = _advice_data("projects.json"), _advice_data("claims.json")
    checked = claims.get("upstream", {})
    origins: dict[str, Origin] = {}
    for name, row in projects.get("documents", {}).items():
        pinned = PINNED.match(str(row.get("source", "")))
        if pinned is None or not str(row.get("home", "")).startswith("https://github.com/"):
            continue
        repo, commit, path = pinned.group("repo", "commit", "path")
        now = str(checked.get(repo, "")).split(" ", 1)[0]
        moved_on = now if now and not now.startswith(commit) and not commit.startswith(now) else ""
        origins[PurePath(name).stem] = Origin(f"https://github.com/{repo}/blob/{commit}/{path}",
                                              f"{row.get('project', repo)} {PurePath(path).name}", commit, moved_on)
    return origins


@cache
def _front_matter(source: str) -> dict[str, Any]:
    path = Path(source)
    path = path if path.is_absolute() else REPO_ROOT / path
    try:
        with path.open("r", encoding="utf-8", errors="replace") as handle:
            head = handle.read(HEAD_BYTES)
    except OSError:
        return {}
    return split_front_matter(head)[0]


def origin(source: str) -> Origin:
    """Where the document cited as ``source`` came from, as far as the corpus records it."""
    seed = _seed_origins().get(PurePath(source).stem)
    if seed is not None:
        return seed
    meta = _front_matter(source)
    for key in UPSTREAM_KEYS:
        value = str(meta.get(key) or "")
        if URL.fullmatch(value):
            return Origin(value, str(meta.get("title") or ""))
    if meta.get("kind") and meta.get("checked"):  # a runbook: traindoc's own, built from upstream sources
        refs = tuple(s for s in (str(x) for x in meta.get("sources") or ()) if URL.fullmatch(s))[:MAX_REFS]
        return Origin("", str(meta.get("title") or ""), checked=str(meta["checked"]), refs=refs)
    return Origin(label=str(meta.get("title") or ""))


def readable_title(citation: Citation) -> str:
    """The section as a reader names it: its heading in the text shown, then the document's title."""
    path = [part for part in citation.section.split(" > ") if part.strip()]
    heading = citation.title or (path[-1] if path else "")
    document = path[0] if len(path) > 1 else ""
    if not heading:
        return PurePath(citation.source).stem.replace("_", " ")
    return f"{heading} — {document}" if document and document != heading else heading


def source_line(citation: Citation, redact: Any, lang: Lang = "en") -> str:
    """``[n] <url|title>`` (mrkdwn), with what the corpus says about the copy shown, in ``lang``."""
    found = origin(citation.source)
    title = escape_mrkdwn(redact(readable_title(citation)))[:300]
    if found.url:
        line = f"[{citation.n}] <{found.url}|{_label(title)}>"
    else:
        line = f"[{citation.n}] *{title}*"
    notes = []
    if found.label and found.url:
        notes.append(escape_mrkdwn(redact(found.label)))
    if citation.lang:
        notes.append(say("source_rendering", lang, language=citation.lang))
    notes += [escape_mrkdwn(note) for note in found.notes(lang)]
    if citation.advice:
        notes.append(say("source_corrected", lang, n=len(citation.advice)))
    if found.refs:
        notes.append(say("source_refs", lang, links=", ".join(f"<{ref}|{_label(_host(ref))}>" for ref in found.refs)))
    return line + (f"\n      {' · '.join(notes)}" if notes else "")


def _label(text: str) -> str:
    """Text for a link's label: no ``|`` to end it, no formatting characters inside it."""
    return text.replace("|", "¦").replace("*", "∗").replace("`", "")


def _host(url: str) -> str:
    rest = url.split("://", 1)[-1]
    host, _, path = rest.partition("/")
    first = path.split("/", 2)[:2] if host == "github.com" else []
    return "/".join([host, *first]) if first else host
