"""Markdown-aware chunking: one chunk per document section, with its full heading path.

Rules, in the order they matter:
- A heading is a `#`..`######` line outside a code fence; inside a fence `#` is a shell comment.
- Each section keeps the path of headings above it (``Doc > Problem > Cause``).
- Sub-headings that repeat inside one document (``错误信息``, ``解决方案``, ``Root cause`` ...) are
  the generic parts of a problem write-up, not topics of their own: they stay inside their parent's
  chunk, so a problem's error message, cause and fix are retrieved and cited together.
- A section longer than ``max_chars`` is split between blocks with ``overlap_blocks`` blocks of overlap,
  every part keeping the section's path. A code block is not split, unless it alone is longer than
  ``HARD_LIMIT`` characters and two chunks (a minified file, a pasted dump): then it, like any such block or
  line, is cut into pieces of at most ``max_chars`` (code pieces re-fenced), so no chunk is unbounded:
  embedding one huge text costs memory far beyond its size.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from dataclasses import dataclass, field

HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
FENCE = re.compile(r"^\s*(```|~~~)")
RST_UNDERLINE = re.compile(r"^([=\-~^\"'`*+#])\1{2,}\s*$")
PATH_SEPARATOR = " > "
HARD_LIMIT = 8192  # characters: a block longer than this (and than two chunks) is cut


@dataclass(frozen=True)
class Chunk:
    """One retrievable unit of a document."""

    chunk_id: str
    source: str
    section: str
    headings: tuple[str, ...]
    text: str
    part: int = 0

    @property
    def leaf_heading(self) -> str:
        return self.headings[-1] if self.headings else ""


@dataclass
class _Section:
    level: int
    title: str
    path: tuple[str, ...]
    lines: list[str] = field(default_factory=list)
    absorbed_into: _Section | None = None


def _rst_to_markdown(text: str) -> str:
    """Turn reStructuredText underlined titles into markdown headings (levels by first use)."""
    lines = text.splitlines()
    levels: dict[str, int] = {}
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        if line.strip() and not RST_UNDERLINE.match(line) and RST_UNDERLINE.match(nxt) \
                and len(nxt.strip()) >= len(line.strip()) // 2:
            mark = nxt.strip()[0]
            level = levels.setdefault(mark, min(len(levels) + 1, 6))
            out.append("#" * level + " " + line.strip())
            i += 2
            continue
        out.append(line)
        i += 1
    return "\n".join(out)


def _parse_sections(text: str) -> list[_Section]:
    root = _Section(level=0, title="", path=())
    sections = [root]
    stack = [root]
    in_fence = False
    for line in text.splitlines():
        if FENCE.match(line):
            in_fence = not in_fence
        match = None if in_fence else HEADING.match(line)
        if match:
            level = len(match.group(1))
            title = match.group(2).strip()
            while stack[-1].level >= level:
                stack.pop()
            section = _Section(level=level, title=title, path=stack[-1].path + (title,))
            section.lines.append(line)
            stack.append(section)
            sections.append(section)
        else:
            stack[-1].lines.append(line)
    return sections


class HeadingsDiffer(ValueError):
    """A rendering whose headings are not its original's (another count or other levels)."""


def _name_after(sections: list[_Section], original: list[_Section]) -> None:
    """Give a rendering's sections the original's titles and paths (the same headings, translated)."""
    levels = [s.level for s in sections]
    if levels != [s.level for s in original]:
        raise HeadingsDiffer(f"{len(levels) - 1} headings at levels {levels[1:12]}... where the original has "
                             f"{len(original) - 1} at {[s.level for s in original][1:12]}...")
    for section, source in zip(sections, original, strict=True):
        section.title, section.path = source.title, source.path


def _fold_into_title(sections: list[_Section]) -> None:
    """Every section after the document's first titled one becomes part of it."""
    titled = next((s for s in sections if s.level > 0), None)
    if titled is None:
        return
    for section in sections:
        if section.level > 0 and section is not titled and section.absorbed_into is None:
            section.absorbed_into = titled
            titled.lines.extend(section.lines)
            section.lines = []


def _absorb_generic_subsections(sections: list[_Section]) -> None:
    """Fold sections whose title repeats in the document into their nearest distinct ancestor."""
    counts = Counter(s.title for s in sections if s.level > 0)
    by_path = {s.path: s for s in sections}
    for section in sections:
        if section.level <= 1 or counts[section.title] < 2:
            continue
        parent = by_path.get(section.path[:-1])
        if parent is None or parent.level == 0:
            continue
        while parent.absorbed_into is not None:
            parent = parent.absorbed_into
        section.absorbed_into = parent
        parent.lines.extend(section.lines)
        section.lines = []


def _blocks(lines: list[str]) -> list[str]:
    """Paragraphs and whole code blocks, in order."""
    blocks: list[str] = []
    current: list[str] = []
    in_fence = False
    for line in lines:
        if FENCE.match(line):
            if not in_fence and current:
                blocks.append("\n".join(current))
                current = []
            current.append(line)
            in_fence = not in_fence
            if not in_fence:
                blocks.append("\n".join(current))
                current = []
            continue
        if not in_fence and not line.strip():
            if current:
                blocks.append("\n".join(current))
                current = []
            continue
        current.append(line)
    if current:
        blocks.append("\n".join(current))
    return blocks


def _bounded(blocks: list[str], max_chars: int) -> list[str]:
    """Blocks of bounded size: a longer one is cut at lines (a line at spaces, else anywhere) into pieces of
    ``max_chars``; a cut code block is re-fenced piece by piece."""
    limit = max(HARD_LIMIT, 2 * max_chars)
    out: list[str] = []
    for block in blocks:
        if len(block) <= limit:
            out.append(block)
            continue
        lines = block.split("\n")
        fenced = bool(FENCE.match(lines[0])) and len(lines) > 1
        opening = lines[0].strip() if fenced else ""
        if fenced:
            lines = lines[1:-1] if FENCE.match(lines[-1]) else lines[1:]
        room = max_chars - (2 * len(opening) + 2 if fenced else 0)
        for piece in _pieces(lines, max(room, 64)):
            out.append(f"{opening}\n{piece}\n{opening[:3]}" if fenced else piece)
    return out


def _pieces(lines: list[str], room: int) -> list[str]:
    pieces: list[str] = []
    current: list[str] = []
    size = 0
    for whole in lines:
        start = 0
        while len(whole) - start > room:  # one enormous line: cut at the last space before the room runs out
            cut = whole.rfind(" ", start + room // 2, start + room)
            cut = cut if cut > start else start + room
            if current:
                pieces.append("\n".join(current))
                current, size = [], 0
            pieces.append(whole[start:cut])
            start = cut + 1 if whole.startswith(" ", cut) else cut
        line = whole[start:] if start else whole
        if current and size + len(line) + 1 > room:
            pieces.append("\n".join(current))
            current, size = [], 0
        current.append(line)
        size += len(line) + 1
    if current:
        pieces.append("\n".join(current))
    return pieces


def _split(blocks: list[str], max_chars: int, overlap_blocks: int) -> list[list[str]]:
    blocks = _bounded(blocks, max_chars)
    parts: list[list[str]] = []
    current: list[str] = []
    size = 0
    for block in blocks:
        if current and size + len(block) > max_chars:
            parts.append(current)
            current = current[-overlap_blocks:] if overlap_blocks else []
            size = sum(len(b) for b in current)
        current.append(block)
        size += len(block)
    if current:
        parts.append(current)
    return parts


def chunk_id_for(source: str, section: str, part: int) -> str:
    digest = hashlib.sha1(f"{source}\x00{section}\x00{part}".encode()).hexdigest()
    return digest[:16]


def chunk_document(
    text: str,
    source: str,
    *,
    title: str | None = None,
    max_chars: int = 1800,
    overlap_blocks: int = 1,
    headings_from: str | None = None,
    whole: bool = False,
) -> list[Chunk]:
    """Split one document into section chunks. ``source`` is the id used in chunk ids. ``headings_from``: the
    original of a rendering (corpus.renderings): its heading path names the rendering's sections, position by
    position, so a section and its rendering are one section. ``whole``: the document is one problem write-up
    (a runbook): every section below its title is a part of it, and the whole is retrieved and cited as one."""
    if source.endswith(".rst"):
        text = _rst_to_markdown(text)
    sections = _parse_sections(text)
    if headings_from is not None:
        _name_after(sections, _parse_sections(headings_from))
    if whole:
        _fold_into_title(sections)
    _absorb_generic_subsections(sections)
    chunks: list[Chunk] = []
    for section in sections:
        path = section.path or ((title,) if title else ())
        blocks = _blocks(section.lines)
        body = [b for b in blocks if not HEADING.match(b.strip()) or "\n" in b.strip()]
        if not body:
            continue
        section_name = PATH_SEPARATOR.join(path)
        for part, part_blocks in enumerate(_split(blocks, max_chars, overlap_blocks)):
            chunks.append(
                Chunk(
                    chunk_id=chunk_id_for(source, section_name, part),
                    source=source,
                    section=section_name,
                    headings=path,
                    text="\n\n".join(part_blocks),
                    part=part,
                )
            )
    return chunks
