"""The answer people finish: the whole answer's markdown made short enough to read to the end.

Every front end shows this by default (the CLI, Slack's first message, the web); ``ask --full`` and ``--json``
(its ``answer``) keep everything. It keeps, in order: the verdict, why in two or three sentences, the fixes in order
with their commands (each with advice.review's notes on it, cut to their first sentence: a flagged command is never
shown bare), what not to do, and the sources by title (the renderer adds those); checks, applies-to, the documents'
further fixes, notes and see-also stay behind ``--full``.

What each part of an answer keeps is one ordered table (``PARTS``), found by the part's heading (a phrase key);
then ``TIGHTER`` steps, in order, shorten it until it fits ``MAX_LINES`` rows of ``WIDTH`` columns with the sources
and the summary line. A sentence is cut at a sentence's end, else at a word ("…"), never mid-word or mid-number; a
command is never cut.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from functools import cache

from advice.review import NOTE_PREFIX
from common.language import LANGS, Lang, say
from common.textsafe import cells, clip_words

MAX_LINES = 40  # the whole default answer, sources and summary line included, at WIDTH columns
WIDTH = 80
SENTENCE_CELLS = 150  # one kept sentence, at most (cut at a word beyond): two rows, a Chinese character two cells
MARKER = re.compile(r"\[(\d+)\]")
CODE_LINES = 8  # a longer code block (a config file) shows its first lines in the brief
CODE_INDENT = 4  # the columns the text renderer indents code by
DOUBLE_ELLIPSIS = re.compile(r"…(?:\s*…)+")
TRUNCATED = re.compile(r"^# … .*\n```$", re.M)  # the verdict's last code line saying the rest of the fix is below
CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]")
PAUSES = "，、；：,; "  # where a clipped Chinese sentence may end
SOURCE = re.compile(r"\s*\(source: [^)]*\)")
CITED = re.compile(r"(?:\s*\[\d+\])+\s*$")
ITEM = re.compile(r"^(?:\d+\.|-|\*\*\d+\.\*\*)\s")
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z`(\"'])|(?<=[。！？])")


@dataclass(frozen=True)
class Part:
    """What the brief keeps of one part of an answer (its ``### `` heading is the phrase ``key``)."""

    key: str
    heading: bool = True  # keep the heading line
    items: int = 0  # list items kept (numbered or bulleted), with their commands
    sentences: int = 0  # sentences kept of each paragraph and item
    paragraphs: int = 0  # paragraphs kept (prose, the italic why line, "In your job:")
    code: bool = True  # keep code blocks (of the items kept, or of the paragraphs)
    quote_lines: int = 0  # a code block that quotes a log keeps this many lines, each cut to a row (0: commands, whole)


# Ordered: the first part whose heading matches decides. A heading no row names keeps its heading and one sentence.
PARTS: tuple[Part, ...] = (
    Part("verdict_heading", items=9, sentences=9, paragraphs=9),  # the verdict, whole: cause, where, first fix
    Part("several_jobs", items=12, sentences=9, paragraphs=9),  # which job is the asker's: theirs to pick
    Part("lead_log", sentences=2, paragraphs=2, quote_lines=1),  # the job's root cause, its line, what followed
    Part("lead_hang", sentences=2, paragraphs=2, quote_lines=1),
    Part("lead_other", sentences=2, paragraphs=2, quote_lines=1),
    Part("likely_cause", heading=False, sentences=2, paragraphs=2, code=False),  # why: the verdict names the cause
    Part("documents_add", sentences=2, paragraphs=2, code=False),
    Part("probes_found", items=3, sentences=1),
    Part("log_shows", items=3, sentences=1),
    Part("fixes", items=3, sentences=1),
    Part("runbook_avoid", items=2, sentences=1, code=False),
    Part("nearest_heading", items=3, sentences=1),
    Part("collect_heading", items=3, sentences=1),
    Part("runbook_checks", heading=False),  # behind --full
    Part("more_fixes", heading=False),
    Part("see_also", heading=False),  # the sources list names them
    Part("codes_mean", heading=False),
    Part("error_lines", items=2, sentences=9),  # the lines traindoc read the input by (the asker's own, shown masked)
    Part("confirm_heading", heading=False, paragraphs=1, sentences=1),  # `traindoc check nccl` now and after the fix
)
DEFAULT = Part("", sentences=1, paragraphs=1)
# the quoted notes a brief answer keeps: that a match is weak is no detail, nor is what the asker already does or sets
# (a fix they already applied comes last; a variable they set that nothing reads)
KEPT_QUOTES = ("weak_match", "stated_already", "stated_already_uses", "stated_contradicts", "stated_env_not_read",
               "stated_env_unknown", "stated_env_deprecated")
# ... and advice.review's notes under a command the brief shows ("> ⚠ traindoc: `NAME` is unknown upstream"): a
# flagged command is never shown bare, in the verdict's First fix or in the Fixes
JOB_PARTS = ("lead_log", "lead_hang", "lead_other")  # the parts that tell the job's own story (jobs.render)


@dataclass(frozen=True)
class Tighter:
    """One step that shortens the brief further when it does not fit: the part and what it keeps now."""

    key: str
    items: int | None = None
    sentences: int | None = None
    paragraphs: int | None = None
    with_job: bool = False  # only where the answer tells the job's own story (its root cause and what followed)
    code: bool | None = None


# The job's own story (its root cause and what followed from it: "rank 0 timed out because rank 1 died") is the
# why of a job's answer; a runbook's general explanation goes before it does.
TIGHTER: tuple[Tighter, ...] = (
    Tighter("error_lines", items=1),
    Tighter("runbook_avoid", items=1),
    Tighter("likely_cause", sentences=1),
    Tighter("lead_log", sentences=1),
    Tighter("lead_hang", sentences=1),
    Tighter("likely_cause", paragraphs=1),
    Tighter("fixes", items=2),
    Tighter("runbook_avoid", items=0),
    Tighter("error_lines", items=0),
    Tighter("likely_cause", paragraphs=0, with_job=True),
    Tighter("fixes", items=1, with_job=True),  # the first fix is in the verdict: with the next, two are shown
    Tighter("lead_log", paragraphs=1),
    Tighter("lead_hang", paragraphs=1),
    Tighter("probes_found", items=1),
    Tighter("log_shows", items=1),
    Tighter("fixes", items=1),
    # Last, where commands that are never cut leave no room: the job's quoted line, then the fixes after the first
    # (the verdict shows it), then the why.
    Tighter("lead_log", code=False),
    Tighter("lead_hang", code=False),
    Tighter("fixes", items=0),
    Tighter("likely_cause", paragraphs=0),
)


@dataclass
class Block:
    kind: str  # "heading", "item", "para", "code", "quote"
    lines: list[str]


def brief(markdown: str, lang: Lang, *, sources: Sequence[str] = (), summary: str = "", width: int = WIDTH,
          most: int = MAX_LINES) -> str:
    """The short form of ``markdown`` (an answer's whole text; ``sources``: its sources' titles, [1] first;
    ``summary``: its last line or two), fitting ``most`` rows at ``width`` columns with what the renderer adds below
    it (the sources it cites, the summary). Unchanged when the whole answer, every source listed, already fits."""
    every = range(1, len(sources) + 1)
    last = 1 + (rows(summary, width) if summary else 2)
    if rows(markdown, width) + _below(sources, every, width) + last <= most:
        return markdown
    parts = {part.key: part for part in PARTS}
    text = _shortened(markdown, parts, lang)
    job = any(_part(line, parts, lang).key in JOB_PARTS for line in markdown.split("\n") if line.startswith("### "))
    for step in TIGHTER:
        if rows(_with_more(text, lang), width) + _below(sources, cited(text, every), width) + last <= most:
            break
        part = parts.get(step.key)
        if part is None or (step.with_job and not job):
            continue
        parts[step.key] = replace(part, items=part.items if step.items is None else step.items,
                                  sentences=part.sentences if step.sentences is None else step.sentences,
                                  paragraphs=part.paragraphs if step.paragraphs is None else step.paragraphs,
                                  code=part.code if step.code is None else step.code)
        text = _shortened(markdown, parts, lang)
    return _with_more(text, lang)


def _with_more(text: str, lang: Lang) -> str:
    return f"{text}\n\n_{say('brief_more', lang)}_"


def rows(markdown: str, width: int = WIDTH) -> int:
    """Terminal rows ``markdown`` takes as the renderers print it: each line wrapped at ``width`` cells, code
    fences not printed and code indented four columns (text to paste), blank lines kept."""
    total, code = 0, False
    for line in markdown.split("\n"):
        if line.strip().startswith("```"):
            code = not code
            continue
        total += max(1, -(-(cells(line) + (CODE_INDENT if code else 0)) // width))
    return total


def _shortened(markdown: str, parts: dict[str, Part], lang: Lang) -> str:
    out: list[str] = []
    command_above: str | None = None
    told = False  # the job's own story is told: a runbook's line on why it leads says it again
    for heading, blocks in _sections(markdown):
        part = _part(heading, parts, lang) if heading is not None else Part("", heading=False, items=9, sentences=9,
                                                                             paragraphs=9)
        if heading is not None and part.key == "verdict_heading":
            command_above = next((_dedented(b.lines) for b in blocks if b.kind == "code"), None)
            if command_above is not None and TRUNCATED.search(command_above):  # its head only: the whole fix follows
                blocks, command_above = [b for b in blocks if b.kind != "code"], None
        told = told or part.key in JOB_PARTS
        if told and part.key == "likely_cause":
            blocks = [b for b in blocks if not (b.kind == "para" and _italic(b.lines))]
        kept = list(_kept(part, blocks, command_above if part.key == "fixes" else None, lang))
        if not kept:
            continue
        if heading is not None and part.heading:
            out.extend([heading, ""])
        out.extend(kept)
    return "\n".join(out).strip()


def _kept(part: Part, blocks: Sequence[Block], command_above: str | None, lang: Lang) -> Iterator[str]:
    """The lines ``part`` keeps of ``blocks``: list items stay one list (no blank line between two items). The first
    fix, when the verdict above already shows it (its sentence and ``command_above``), is not said twice: the list
    goes on from the second, numbered as it is."""
    items = paragraphs = 0
    keep_code = False  # the block a code block belongs to (the item or paragraph before it) was kept
    previous = ""
    first = next((i for i, b in enumerate(blocks) if b.kind == "item"), None)
    if (command_above is not None and first is not None and first + 1 < len(blocks) and blocks[first + 1].kind == "code"
            and _same_command(command_above, _dedented(blocks[first + 1].lines))):
        notes = next((j for j in range(first + 2, len(blocks)) if not _note(blocks[j])), len(blocks))
        blocks = [b for i, b in enumerate(blocks) if not first <= i < notes]  # its notes are under the verdict's
    under = False  # the block before this one is a code block shown (or a note kept under one)
    for block in blocks:
        shown: list[str] = []
        if _note(block):  # the review's note on the command above it: with it, else (the command left out) not
            if under:
                yield _short_note(block.lines[0])  # right under the block, as the review put it
                previous = "note"
            continue
        under = False
        if block.kind == "item":
            items += 1
            keep_code = part.code and items <= part.items
            if items <= part.items:
                shown = [_sentences(block.lines, part.sentences)]
        elif block.kind == "para":
            paragraphs += 1
            keep_code = part.code and paragraphs <= part.paragraphs
            if paragraphs <= part.paragraphs:
                shown = [_sentences(block.lines, part.sentences)]
        elif block.kind == "quote" and _kept_quote().match(block.lines[0].strip()):
            shown = list(block.lines)
        elif block.kind == "code" and keep_code:  # other quotes (a document's notes) and code stay behind --full
            shown = _quoted(block.lines, part.quote_lines) if part.quote_lines else _long_code(block.lines, lang)
        if not shown:
            continue
        if previous and not (previous == "item" and block.kind == "item"):
            yield ""
        yield from shown
        previous = block.kind
        under = block.kind == "code"
    if previous:
        yield ""


def _note(block: Block) -> bool:
    """A line of advice.review's notes under a code block (a note, or the bare ``>`` between two)."""
    line = block.lines[0].strip()
    return block.kind == "quote" and (line.startswith(NOTE_PREFIX) or line == ">")


def _short_note(line: str) -> str:
    """A review note cut as a brief cuts a sentence: its first (what was flagged and why, at most SENTENCE_CELLS, cut
    at a word); the whole note, with its source, is in the full answer."""
    quote = line[: line.index(">") + 1]
    text = line[len(quote):].strip()
    return f"{quote} {_sentences([text], 1)}" if text else quote


def _same_command(above: str, block: str) -> bool:
    """The verdict's command is this fix's, whole (inside the fences: the verdict's says bash, the fix's its
    language)."""
    return above.split("\n")[1:-1] == block.split("\n")[1:-1]


def _long_code(lines: Sequence[str], lang: Lang) -> list[str]:
    """A code block whole, or, past CODE_LINES lines (a whole config file, not a command), its first lines and a
    comment saying where the rest is: cut between lines, never inside one."""
    fence, body = lines[0], list(lines[1:-1])
    if len(body) <= CODE_LINES:
        return list(lines)
    indent = fence[: len(fence) - len(fence.lstrip())]
    rest = say("brief_more_lines", lang, count=len(body) - CODE_LINES + 1)
    return [fence, *body[: CODE_LINES - 1], f"{indent}# … {rest}", lines[-1]]


def _quoted(lines: Sequence[str], most: int) -> list[str]:
    """A fenced log quote cut to its first ``most`` lines, each to one row at a word (a log line, not a command)."""
    fence, body = lines[0], list(lines[1:-1])
    indent = fence[: len(fence) - len(fence.lstrip())]
    return [fence, *(indent + _clipped(line.strip(), WIDTH - 4 - len(indent)) for line in body[:most]), lines[-1]]


def _italic(lines: Sequence[str]) -> bool:
    text = " ".join(line.strip() for line in lines)
    return len(text) > 2 and text.startswith("_") and text.endswith("_")


def _dedented(lines: Sequence[str]) -> str:
    return "\n".join(line.strip() for line in lines)


def _sentences(lines: Sequence[str], most: int) -> str:
    """A paragraph or list item cut to its first ``most`` sentences (sources and citation marks dropped), each
    sentence at most SENTENCE_CELLS terminal cells, cut at a word."""
    first = lines[0]
    marker = ITEM.match(first.lstrip())
    indent = first[: len(first) - len(first.lstrip())]
    text = " ".join(line.strip() for line in lines)
    if marker:
        text = text[marker.end():] if text.startswith(marker.group(0)) else text
    text = SOURCE.sub("", text).strip()
    cited = CITED.search(text)  # the [n] markers stay: they open the cited section (the web) and name it
    marks = cited.group(0).strip() if cited else ""
    text = CITED.sub("", text).strip()
    italic = len(text) > 2 and text.startswith("_") and text.endswith("_")  # a whole italic line stays italic
    kept = _split_sentences(text[1:-1] if italic else text)[: max(1, most)]
    shown = " ".join(_clipped(s.strip(), SENTENCE_CELLS) for s in kept)
    shown = DOUBLE_ELLIPSIS.sub("…", shown)  # a clipped sentence before the "…" that said more follows: one mark
    if _unbalanced(shown):
        shown = shown.replace("`", "'").replace("**", "")
    if italic:
        shown = f"_{shown}_"
    return f"{indent}{marker.group(0) if marker else ''}{shown}{' ' + marks if marks else ''}"


def _clipped(sentence: str, most: int) -> str:
    """``sentence`` in at most ``most`` terminal cells, cut at a word ("…"); Chinese, which writes no spaces between
    words, is cut at its last comma or enumeration mark in the second half, where it has one."""
    limit = most
    while limit > 8 and cells(clip_words(sentence, limit)) > most:
        limit -= max(1, (cells(clip_words(sentence, limit)) - most) // 2)
    clipped = clip_words(sentence, limit)
    if not clipped.endswith("…") or not CJK.search(clipped):
        return clipped
    kept = clipped[:-1]
    pause = max(kept.rfind(mark) for mark in PAUSES)
    return (kept[:pause] if pause > len(kept) // 2 else kept).rstrip(PAUSES) + "…"


def _split_sentences(text: str) -> list[str]:
    """Sentences of ``text``, never split inside a code span (a quoted message has its own full stops)."""
    sentences: list[str] = []
    start, inside = 0, False
    for match in re.finditer(r"`|" + SENTENCE_END.pattern, text):
        if match.group(0) == "`":
            inside = not inside
        elif not inside:
            sentences.append(text[start:match.start()])
            start = match.end()
    sentences.append(text[start:])
    return [s for s in sentences if s.strip()]


def _unbalanced(text: str) -> bool:
    return text.count("`") % 2 == 1 or text.count("**") % 2 == 1


def _sections(markdown: str) -> Iterator[tuple[str | None, list[Block]]]:
    heading: str | None = None
    blocks: list[Block] = []
    lines = markdown.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if line.startswith("### "):
            if heading is not None or blocks:
                yield heading, blocks
            heading, blocks = line, []
        elif stripped.startswith("```"):
            fence = stripped[: len(stripped) - len(stripped.lstrip("`"))]
            end = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == fence), len(lines) - 1)
            blocks.append(Block("code", lines[i:end + 1]))
            i = end
        elif not stripped:
            pass
        elif stripped.startswith(">"):
            blocks.append(Block("quote", [line]))
        elif ITEM.match(stripped) and not line.startswith("   "):
            blocks.append(Block("item", [line]))
        elif blocks and blocks[-1].kind in ("item", "para") and lines[i - 1].strip():
            blocks[-1].lines.append(line)  # the paragraph or item goes on
        else:
            blocks.append(Block("para", [line]))
        i += 1
    if heading is not None or blocks:
        yield heading, blocks


def _part(heading: str, parts: dict[str, Part], lang: Lang) -> Part:
    title = heading[4:].strip()
    for part in PARTS:
        if _heading_pattern(part.key).fullmatch(title):
            return parts[part.key]
    return DEFAULT


@cache
def _kept_quote() -> re.Pattern[str]:
    """The first line of a quoted note the brief keeps (``KEPT_QUOTES``), with or without its "> "."""
    return re.compile("(?:> )?(?:" + "|".join(f"(?:{_heading_pattern(key).pattern})" for key in KEPT_QUOTES) + ")")


@cache
def _heading_pattern(key: str) -> re.Pattern[str]:
    """A heading phrase in every language, its ``{fields}`` matching anything (``say`` with no values gives the
    phrase as written)."""
    forms = [re.sub(r"\\\{\w+(?::[^}]*)?\\\}", ".*", re.escape(say(key, lang))) for lang in LANGS]
    return re.compile("|".join(f"(?:{form})" for form in forms))


def cited(text: str, numbers: Iterable[int]) -> list[int]:
    """The sources of ``numbers`` the text cites (its ``[n]`` markers); the first where it cites none."""
    numbers = list(numbers)
    marked = set(map(int, MARKER.findall(text)))
    return [n for n in numbers if n in marked] or numbers[:1]


def _below(sources: Sequence[str], shown: Iterable[int], width: int) -> int:
    """Rows a renderer adds below the answer before its summary: a blank line and the sources' heading, each source
    shown (by its title) and a line for the rest."""
    listed = [rows(f"  [{n}] {sources[n - 1]}", width) for n in shown]
    return 2 + sum(listed) + (1 if len(sources) > len(listed) else 0) if sources else 0


__all__ = ["MAX_LINES", "PARTS", "TIGHTER", "WIDTH", "brief", "cited", "rows"]
