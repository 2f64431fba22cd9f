"""Reading traindoc's runbooks and checking them against their format (runbooks/TEMPLATE.md).

``python -m runbooks.catalog`` prints every problem found in the shipped runbooks (exit 1 if any).
"""

from __future__ import annotations

import hashlib
import re
import sys
from dataclasses import dataclass, field
from datetime import date
from functools import cache, cached_property
from pathlib import Path
from typing import Any

from common.settings import BUILTIN_DIR
from corpus.compiled import FRONT_MATTER, compiled

RUNBOOK_DIR = BUILTIN_DIR / "runbooks"
LANGS = ("en", "zh")
HEADINGS = {
    "en": ("How to recognise it", "What it means", "Checks", "Fixes in order", "What not to do"),
    "zh": ("如何识别", "含义", "检查", "按顺序修复", "不要这样做"),
}
PARTS = ("recognise", "means", "checks", "fixes", "avoid")
REQUIRED = ("kind", "lang", "title", "description", "triage", "messages", "applies_to", "checked", "sources")
SOURCE = re.compile(r"[(（]\s*(?:source|来源)\s*[:：]\s*([^)）]+)[)）]")
ITEM = re.compile(r"^(?:\d+\.|-)\s+(.*)$")
FENCE = re.compile(r"^\s*```")
CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")


@dataclass(frozen=True)
class Item:
    """One numbered or bulleted item of a part: its text, its code blocks, its sources."""

    text: str
    code: tuple[str, ...]
    sources: tuple[str, ...]


@dataclass(frozen=True)
class Runbook:
    kind: str
    lang: str
    title: str
    description: str
    triage: tuple[str, ...]
    messages: tuple[str, ...]
    applies_to: str
    checked: str
    sources: tuple[str, ...]
    path: Path
    body: str = field(default="", repr=False, hash=False, compare=False)  # the Markdown after the front matter

    @cached_property
    def parts(self) -> dict[str, str]:
        """Part name (recognise, means, checks, fixes, avoid) -> its Markdown; read when first needed."""
        return _parts(self.body, self.lang)

    @cached_property
    def items(self) -> dict[str, tuple[Item, ...]]:
        return {name: _items(text) for name, text in self.parts.items() if name in ("checks", "fixes", "avoid")}

    @property
    def source(self) -> str:
        """The name it is indexed and cited under (corpus/runbooks/<lang>/<kind>.md)."""
        try:
            return str(self.path.relative_to(BUILTIN_DIR.parent))
        except ValueError:  # a runbook read from elsewhere (a draft being checked)
            return str(self.path)

    def heading(self, part: str) -> str:
        return HEADINGS[self.lang][PARTS.index(part)]


def _parts(body: str, lang: str) -> dict[str, str]:
    names = dict(zip(HEADINGS[lang], PARTS, strict=True))
    parts: dict[str, list[str]] = {}
    current: list[str] | None = None
    fenced = False
    for line in body.splitlines():
        if FENCE.match(line):
            fenced = not fenced
        if not fenced and line.startswith("## "):
            name = names.get(line[3:].strip())
            current = parts.setdefault(name, []) if name else None
            continue
        if current is not None:
            current.append(line)
    return {name: "\n".join(lines).strip() for name, lines in parts.items()}


def _items(markdown: str) -> tuple[Item, ...]:
    """Top-level list items, each with the code blocks that follow it (indented under it or not)."""
    items: list[tuple[str, list[str]]] = []
    block: list[str] | None = None
    for line in markdown.splitlines():
        if FENCE.match(line):
            if block is None:
                block = [line.strip()]
            else:
                block.append("```")
                if items:
                    items[-1][1].append("\n".join(block))
                block = None
            continue
        if block is not None:
            block.append(line[3:] if line.startswith("   ") else line)
            continue
        if (match := ITEM.match(line)) is not None:
            items.append((match.group(1).strip(), []))
        elif items and line.startswith("   ") and line.strip():
            items[-1] = (items[-1][0] + " " + line.strip(), items[-1][1])
    return tuple(Item(text, tuple(code), tuple(s.strip() for s in SOURCE.findall(text))) for text, code in items)


def read_runbook(path: Path) -> Runbook:
    meta, body = _front_matter(path.read_text(encoding="utf-8"))
    if not meta:
        raise ValueError(f"{path}: no YAML front matter (or it is not a mapping)")
    missing = [key for key in REQUIRED if key not in meta]
    if missing:
        raise ValueError(f"{path}: front matter lacks {', '.join(missing)}")
    lang = str(meta["lang"])
    if lang not in LANGS:
        raise ValueError(f"{path}: lang {lang!r} is not one of {', '.join(LANGS)}")
    return Runbook(
        kind=str(meta["kind"]), lang=lang, title=str(meta["title"]), description=str(meta["description"]),
        triage=tuple(str(t) for t in meta["triage"] or ()), messages=tuple(str(m) for m in meta["messages"] or ()),
        applies_to=str(meta["applies_to"]), checked=str(meta["checked"]),
        sources=tuple(str(s) for s in meta["sources"] or ()), path=path, body=body,
    )


def _front_matter(text: str) -> tuple[dict[str, Any], str]:
    """(front matter, body): as compiled into the snapshot when this front matter is there (no YAML parser loaded),
    else parsed (corpus.frontmatter)."""
    found = _opening(text)
    if found is not None and (meta := compiled(FRONT_MATTER).get(_key(found[0]))) is not None:
        return dict(meta), found[1]
    from corpus.frontmatter import split_front_matter

    return split_front_matter(text)


def _opening(text: str) -> tuple[str, str] | None:
    """(the front matter's text, the body) as corpus.frontmatter splits them; without its length limit, which only
    refuses: a front matter it refuses is never compiled, so its text is never found in the table."""
    if not text.startswith("---\n"):
        return None
    end = text.find("\n---\n", 4)
    return None if end < 0 else (text[4:end], text[end + 5:])


def _key(front_matter: str) -> str:
    return hashlib.sha1(front_matter.encode("utf-8", "surrogatepass")).hexdigest()


def compiled_front_matter() -> dict[str, dict[str, Any]]:
    """Every shipped runbook's front matter, parsed, by the hash of its text: the table the snapshot carries
    (corpus.compiled), as JSON holds it (a date as the text ``str()`` makes of it: read_runbook reads every value
    through ``str()``)."""
    from corpus.frontmatter import split_front_matter

    table: dict[str, dict[str, Any]] = {}
    for lang in LANGS:
        for path in sorted((RUNBOOK_DIR / lang).glob("*.md")):
            text = path.read_text(encoding="utf-8")
            meta, _ = split_front_matter(text)
            if meta and (found := _opening(text)) is not None:
                table[_key(found[0])] = {key: _jsonable(value) for key, value in meta.items()}
    return table


def _jsonable(value: Any) -> Any:
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return value if value is None or isinstance(value, str | int | float | bool) else str(value)


@cache
def runbooks() -> dict[tuple[str, str], Runbook]:
    """Every shipped runbook by (kind, lang)."""
    return {(book.kind, book.lang): book for lang in LANGS for book in runbooks_in(lang).values()}


@cache
def runbooks_in(lang: str) -> dict[str, Runbook]:
    """The shipped runbooks of one language by kind: an answer reads the English ones (the registry) and those of the
    asker's language, not every file."""
    found: dict[str, Runbook] = {}
    for path in sorted((RUNBOOK_DIR / lang).glob("*.md")) if lang in LANGS else ():
        book = read_runbook(path)
        found[book.kind] = book
    return found


def _code_lines(book: Runbook) -> list[str]:
    return [block for part in book.items.values() for item in part for block in item.code]


def problems(book: Runbook) -> list[str]:
    """What is wrong with one runbook (its format, its sources), as sentences."""
    where = book.source
    found: list[str] = []
    if book.path.stem != book.kind or book.path.parent.name != book.lang:
        found.append(f"{where}: the file must be corpus/runbooks/{book.lang}/{book.kind}.md")
    try:
        date.fromisoformat(book.checked)
    except ValueError:
        found.append(f"{where}: checked {book.checked!r} is not a date (YYYY-MM-DD)")
    if not book.messages:
        found.append(f"{where}: no messages: a runbook says what the failure prints")
    if not book.sources:
        found.append(f"{where}: no sources")
    for part in PARTS:
        if not book.parts.get(part):
            found.append(f"{where}: no '## {book.heading(part)}' section (or it is empty)")
    for part in ("checks", "fixes", "avoid"):
        items = book.items.get(part, ())
        if not items:
            found.append(f"{where}: '## {book.heading(part)}' has no list items")
        for i, item in enumerate(items, 1):
            if not item.sources:
                found.append(f"{where}: '## {book.heading(part)}' item {i} has no (source: ...)")
            for cited in item.sources:
                if cited not in book.sources:
                    found.append(f"{where}: item source {cited} is not in the front matter's sources")
    if book.lang == "en" and CJK.search(book.path.read_text(encoding="utf-8")):
        found.append(f"{where}: Chinese text in an English runbook")
    return found


def pair_problems(en: Runbook, zh: Runbook) -> list[str]:
    """An English runbook and its Chinese one must be the same runbook: same kind facts, same commands."""
    found: list[str] = []
    for key in ("triage", "messages", "sources", "checked"):
        if getattr(en, key) != getattr(zh, key):
            found.append(f"{zh.source}: front matter '{key}' differs from {en.source}")
    for part in ("checks", "fixes", "avoid"):
        if len(en.items.get(part, ())) != len(zh.items.get(part, ())):
            found.append(f"{zh.source}: '{zh.heading(part)}' has a different number of items than {en.source}")
    if _code_lines(en) != _code_lines(zh):
        found.append(f"{zh.source}: its code blocks differ from {en.source} (commands are shared verbatim)")
    return found


def _yaml_error() -> type[Exception]:
    import yaml

    return yaml.YAMLError  # type: ignore[no-any-return]


def all_problems() -> list[str]:
    found: list[str] = []
    books: dict[tuple[str, str], Runbook] = {}
    for lang in LANGS:
        for path in sorted((RUNBOOK_DIR / lang).glob("*.md")):
            try:
                book = read_runbook(path)
            except (ValueError, _yaml_error()) as exc:
                found.append(f"{path}: {exc}".replace("\n", " "))
                continue
            books[(book.kind, lang)] = book
            found.extend(problems(book))
    kinds = {kind for kind, _ in books}
    for kind in sorted(kinds):
        en, zh = books.get((kind, "en")), books.get((kind, "zh"))
        if en is None or zh is None:
            found.append(f"runbook {kind}: needs both corpus/runbooks/en/{kind}.md and corpus/runbooks/zh/{kind}.md")
        else:
            found.extend(pair_problems(en, zh))
    return found


if __name__ == "__main__":  # pragma: no cover
    issues = all_problems()
    print("\n".join(issues) if issues else "every runbook is well-formed")
    sys.exit(1 if issues else 0)
