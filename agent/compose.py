"""The offline composer: an answer written only from retrieved sections and probe findings.

No model is involved: the diagnosis is the best section's own text, the fixes are the commands it
quotes, and every statement carries the number of the citation it came from. Curated facts
correct stale advice before it is quoted.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources

from agent.answer import Citation, FindingView
from common.language import language_of, say
from common.textsafe import code_span
from corpus.chunking import HEADING, PATH_SEPARATOR

FENCE = re.compile(r"^\s*```")
COMMAND_LINE = re.compile(
    r"^\s*(?:#|export\b|pip3?\b|python3?\b|conda\b|nvidia-smi\b|torchrun\b|deepspeed\b|accelerate\b|kill\b|"
    r"pkill\b|ps\b|lsof\b|netstat\b|ss\b|nvcc\b|ls\b|cat\b|tail\b|grep\b|watch\b|echo\b|cd\b|sudo\b|apt\b|"
    r"df\b|du\b|free\b|ip\b|ping\b|nc\b|telnet\b|srun\b|sbatch\b|vllm\b|import\b|from\s+\w+\s+import\b|"
    r"[A-Z][A-Z0-9_]*=|[a-z_]\w*\s*=\s*\S|[a-z_][\w.]*\(.*\)\s*$|--[a-z])"
)
LABEL = re.compile(r"^\s*\**[^*:：]{1,16}\**\s*[:：]\s*\**\s*$")  # "**解决方案**：" alone on a line
MAX_DIAGNOSIS_LINES = 14
MAX_FIX_BLOCKS = 3


@dataclass(frozen=True)
class Correction:
    code: str
    context: re.Pattern[str]
    stale: re.Pattern[str]
    replace: dict[str, str]
    note: str


@cache
def corrections() -> list[Correction]:
    data = json.loads(resources.files("agent").joinpath("data/curated_facts.json").read_text(encoding="utf-8"))
    return [
        Correction(
            c["code"], re.compile(c["context"], re.I), re.compile(c["stale"], re.I), c["replace"], c["note"]
        )
        for c in data["corrections"]
    ]


def correct(text: str, context: str) -> tuple[str, list[Correction]]:
    """``text`` with stale advice replaced, and the corrections that applied."""
    applied: list[Correction] = []
    for fact in corrections():
        if not fact.context.search(context) or not fact.stale.search(text):
            continue

        def swap(match: re.Match[str], fact: Correction = fact) -> str:
            stale = match.group(0)
            for prefix, fresh in fact.replace.items():
                if stale.lower().startswith(prefix.lower()):
                    return fresh
            return stale

        text = fact.stale.sub(swap, text)
        applied.append(fact)
    return text, applied


def _split_blocks(text: str) -> tuple[list[str], list[str]]:
    """(prose lines without headings, code blocks)."""
    prose: list[str] = []
    code: list[str] = []
    current: list[str] | None = None
    for line in text.splitlines():
        if FENCE.match(line):
            if current is None:
                current = [line.strip()]
            else:
                current.append("```")
                code.append("\n".join(current))
                current = None
            continue
        if current is not None:
            current.append(line)
        elif line.strip() and not HEADING.match(line) and line.strip() != "---" and not LABEL.match(line):
            prose.append(line.rstrip())
    return prose, code


def _is_fix(block: str) -> bool:
    """A code block that tells the user what to run or set, not a quoted error message."""
    lines = block.splitlines()
    language = lines[0].strip().strip("`").lower() if lines else ""
    if language in ("bash", "sh", "shell", "console", "yaml", "yml", "json", "python", "py", "toml", "ini"):
        return True
    return any(COMMAND_LINE.match(line) for line in lines[1:-1])


def _same_problem(top: str, other: str) -> bool:
    """A subsection of the top section, or a sibling under the same problem heading."""
    top_path, other_path = top.split(PATH_SEPARATOR), other.split(PATH_SEPARATOR)
    if other.startswith(top + PATH_SEPARATOR):
        return True
    siblings = other_path[: len(top_path) - 1] == top_path[:-1] and len(other_path) > len(top_path) - 1
    return len(top_path) >= 3 and siblings and top_path[:-1] != top_path[:1]


def _dedupe(fixes: list[tuple[str, Citation]]) -> list[tuple[str, Citation]]:
    seen: set[str] = set()
    unique = []
    for block, citation in fixes:
        key = re.sub(r"\s+", " ", block)
        if key not in seen:
            seen.add(key)
            unique.append((block, citation))
    return unique


def _title(section: str) -> str:
    return section.split(PATH_SEPARATOR)[-1]


def compose(
    question: str,
    citations: list[Citation],
    findings: list[FindingView],
    no_match: bool,
    recognised: list[str],
    error_lines: list[str],
    probe_source: str = "this machine",
) -> str:
    parts: list[str] = []
    lang = language_of(question)
    problems = [f for f in findings if f.status == "problem"]
    if problems:
        parts.append(f"### {say('probes_found', lang, source=probe_source)}")
        for finding in problems:
            refs = "".join(f"[{n}]" for n in finding.related)
            parts.append(f"- **{finding.code}** ({finding.probe}): {finding.summary} {refs}".rstrip())
            if finding.fix:
                parts.append(f"  - {say('fix', lang)}: {finding.fix}")
        parts.append("")
    if error_lines:
        parts.append(f"### {say('error_lines', lang)}")
        parts.extend(f"- {code_span(line[:160])}" for line in error_lines[:4])  # a backtick in the log cannot end it
        parts.append("")
    if no_match:
        what = f" ({', '.join(recognised)})" if recognised else ""
        parts.append(say("no_match", lang, what=what))
        if citations:
            nearest = "; ".join(f"{c.source} › {_title(c.section)}" for c in citations[:2])
            parts.append(say("nearest", lang, items=nearest))
        return "\n".join(parts).strip()

    top = citations[0]
    parts.append(f"### {say('likely_cause', lang, title=_title(top.section), n=top.n)}")
    # The top section and the parts of the same problem write-up (its subsections, its siblings).
    family = [top] + [c for c in citations[1:] if _same_problem(top.section, c.section)]
    fixes: list[tuple[str, Citation]] = []
    notes: dict[str, str] = {}
    shown = 0
    for citation in family + [c for c in citations[1:3] if c not in family]:
        body, applied = correct(citation.text, citation.section + "\n" + question)
        for fact in applied:
            notes.setdefault(fact.note, "")
            notes[fact.note] += f"[{citation.n}]"
        prose, code = _split_blocks(body)
        if citation in family and shown < MAX_DIAGNOSIS_LINES and prose:
            take = prose[: MAX_DIAGNOSIS_LINES - shown]
            marker = "" if citation is top else f" [{citation.n}]"
            parts.extend(take[:-1] + [take[-1] + marker, ""])
            shown += len(take)
        if citation is top:
            quoted = [block for block in code if not _is_fix(block)]
            if quoted:
                parts.extend([say("documented_error", lang), "", quoted[0], ""])
        fixes.extend((block, citation) for block in code if _is_fix(block))
    parts.append("")
    fixes = _dedupe(fixes)[: MAX_FIX_BLOCKS + 1]
    if fixes:
        parts.append(f"### {say('fixes', lang)}")
        for i, (block, citation) in enumerate(fixes, 1):
            parts.append(say("fix_item", lang, i=i, n=citation.n, title=_title(citation.section)))
            parts.append("")
            parts.append(block)
            parts.append("")
    for note, where in notes.items():
        parts.append(f"> **{say('stale', lang, where=where)}** {note}")
        parts.append("")
    if len(citations) > 1:
        parts.append(f"### {say('see_also', lang)}")
        parts.extend(f"- [{c.n}] {_title(c.section)}" for c in citations[1:])
    return "\n".join(parts).strip()
