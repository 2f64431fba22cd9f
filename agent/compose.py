"""The offline composer: an answer written only from retrieved sections and probe findings.

No model is involved: the diagnosis is the best section's own text, the fixes are the commands of the
same problem write-up (never another section's), and every statement carries the number of the
citation it came from. Curated facts (advice.curated) correct stale advice before it is quoted. A
weak match says so; when nothing answers, the answer leads with what the evidence does say (probes,
error lines; the job's diagnosis is put above it by agent.core), names the nearest sections as not
answers, and says what to collect next. The words traindoc adds live in data/guidance.json and
common/data/phrases.json.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from functools import cache
from importlib import resources
from typing import Any

from advice.review import NOTE_PREFIX
from agent.answer import Citation, FindingView
from common.language import Lang, language_of, say
from common.textsafe import code_span
from corpus.chunking import HEADING, PATH_SEPARATOR
from corpus.kinds import section_kinds
from jobs.codes import CodeMeaning

FENCE = re.compile(r"^\s*```")
COMMAND_LINE = re.compile(
    r"^\s*(?:#|export\b|pip3?\b|python3?\b|conda\b|nvidia-smi\b|torchrun\b|deepspeed\b|accelerate\b|kill\b|"
    r"pkill\b|ps\b|lsof\b|netstat\b|ss\b|nvcc\b|ls\b|cat\b|tail\b|grep\b|watch\b|echo\b|cd\b|sudo\b|apt\b|"
    r"df\b|du\b|free\b|ip\b|ping\b|nc\b|telnet\b|srun\b|sbatch\b|vllm\b|import\b|from\s+\w+\s+import\b|"
    r"[A-Z][A-Z0-9_]*=|[a-z_]\w*\s*=\s*\S|[a-z_][\w.]*\(.*\)\s*$|--[a-z])"
)
LABEL = re.compile(r"^\s*\**[^*:：]{1,16}\**\s*[:：]\s*\**\s*$")  # "**解决方案**：" alone on a line
NUMBERED_LINE = re.compile(r"^\s*(\*\*)?(\d{1,3})(?:[.)]\s+|[、．]\s*)(.*)$")
NUMBERED_ITEM = re.compile(r"^\s*\d{1,3}\. ")
MAX_DIAGNOSIS_LINES = 14
MAX_FIX_BLOCKS = 3


@cache
def _guidance() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(resources.files("agent").joinpath("data/guidance.json").read_text(encoding="utf-8"))
    return data


@cache
def _part_heading() -> re.Pattern[str]:
    return re.compile(_guidance()["part_headings"], re.IGNORECASE)


def what_to_collect(recognised: Sequence[str], lang: Lang) -> list[str]:
    """Next evidence: what the recognised failure families call for first, then what every case needs."""
    collect = _guidance()["collect"]
    items = [item[lang] for name in recognised for item in collect["families"].get(name, [])]
    return list(dict.fromkeys(items + [item[lang] for item in collect["general"]]))


def _split_blocks(text: str) -> tuple[list[str], list[str]]:
    """(prose lines without headings, code blocks). traindoc's notes right after a block (advice.review) stay
    with it: a fix is never shown without what was corrected in it."""
    prose: list[str] = []
    code: list[str] = []
    current: list[str] | None = None
    attach = False  # the previous line closed a block (or was a note attached to it)
    for line in text.splitlines():
        if (line.startswith(NOTE_PREFIX) or line.strip() == ">") and current is None and attach:
            code[-1] += "\n" + line
            continue
        attach = False
        if FENCE.match(line):
            if current is None:
                current = [line.strip()]
            else:
                current.append("```")
                code.append("\n".join(current))
                current, attach = None, True
            continue
        if current is not None:
            current.append(line)
        elif line.strip() and not HEADING.match(line) and line.strip() != "---" and not LABEL.match(line):
            prose.append(line.rstrip())
    return prose, code


def _keep_lists(lines: list[str]) -> list[str]:
    """Prose lines whose numbered items stay a list when rendered: ``**2. Use ZeRO-3**`` or ``2、...`` become list
    items (``2. **Use ZeRO-3**``), and a list that does not start at 1, which CommonMark would read as the
    paragraph above going on, gets the blank line it needs."""
    out: list[str] = []
    for line in lines:
        match = NUMBERED_LINE.match(line)
        if match is None:
            out.append(line)
            continue
        bold, number, text = match.group(1), match.group(2), match.group(3).strip()
        if bold and text.startswith("**"):  # "**1.** text": only the number was bold
            bold, text = None, text.lstrip("* ")
        item = f"{number}. " + (f"**{text.rstrip('*').strip()}**" if bold and text.endswith("**") else text)
        if out and out[-1].strip() and not NUMBERED_LINE.match(out[-1]) and not NUMBERED_ITEM.match(out[-1]):
            out.append("")
        out.append(item)
    return out


def _project_fixes_apply(citation: Citation, report: str) -> bool:
    """A project's own flags are the fix only for a user of that project: one whose question or log names it."""
    from advice.projects import project_of

    project = project_of(citation.source)
    return project is None or project.named_in(report)


def _project_flags(block: str, citation: Citation) -> bool:
    return any(flag.verdict == "project" and flag.original in block for flag in citation.advice)


def _is_fix(block: str) -> bool:
    """A code block that tells the user what to run or set, not a quoted error message."""
    lines = [line for line in block.splitlines() if not line.startswith(NOTE_PREFIX)]
    language = lines[0].strip().strip("`").lower() if lines else ""
    if language in ("bash", "sh", "shell", "console", "yaml", "yml", "json", "python", "py", "toml", "ini"):
        return True
    return any(COMMAND_LINE.match(line) for line in lines[1:-1])


def _problem(section: str) -> list[str]:
    """The heading path of the problem a section belongs to: trailing part headings (cause, fix,
    option N) name a part of their parent's write-up, not a problem of their own."""
    path = section.split(PATH_SEPARATOR)
    while len(path) > 1 and _part_heading().match(path[-1].strip()):
        path = path[:-1]
    return path


def _same_problem(top: str, other: str) -> bool:
    """A subsection of the top section, or another part of the same problem write-up. Two problems
    listed under one heading (错误1 / 错误2) are not one problem."""
    if other.startswith(top + PATH_SEPARATOR):
        return True
    problem = _problem(top)
    if len(problem) < 2:  # only the document title is left: the document is not one problem
        return False
    return other.split(PATH_SEPARATOR)[: len(problem)] == problem


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


def _shown_title(citation: Citation) -> str:
    """The heading an asker reads: a rendering's own (translated) heading, else the section's."""
    return citation.title or _title(citation.section)


def compose(
    question: str,
    citations: list[Citation],
    findings: list[FindingView],
    no_match: bool,
    recognised: list[str],
    error_lines: list[str],
    probe_source: str = "this machine",
    *,
    confidence: float | None = None,
    nearest: Sequence[Citation] = (),
    lead: str | None = None,
    codes: Sequence[CodeMeaning] = (),
    lead_kind: str | None = None,
    lang: Lang | None = None,
    raised_in: Sequence[str] | None = None,
) -> str:
    """The answer's markdown. ``confidence``: that the first citation answers (retrieval's answerability);
    ``nearest``: when nothing answers, the closest sections, named as not answers; ``raised_in``: the lines a
    generic exception is read from when nothing answers (a diagnosed job's cause; else the error lines and the
    question)."""
    parts: list[str] = []
    lang = lang or language_of(question)  # the asker's, decided once (agent.intake); a caller may leave it to the text
    problems = [f for f in findings if f.status == "problem"]
    # Each finding once, under where it was seen: the machine (or the bundle's) apart from the logs it read.
    log_probes = set(_guidance()["log_probes"])
    parts.extend(_findings(say("probes_found", lang, source=probe_source), [f for f in problems if f.probe not in log_probes], lang))
    parts.extend(_findings(say("log_shows", lang), [f for f in problems if f.probe in log_probes], lang))
    led = lead is not None and bool(citations)
    if not led:
        parts.extend(codes_markdown(codes, lang))
    if error_lines:
        parts.append(f"### {say('error_lines', lang)}")
        parts.extend(f"- {code_span(line[:160])}" for line in error_lines[:4])  # a backtick in the log cannot end it
        parts.append("")
    if led:  # a runbook answers the diagnosed kind: its fixes come first (agent.lead)
        parts.extend([lead or "", ""])
        # the codes speak after the runbook and in its terms: what each means and its check, not a generic fix
        parts.extend(codes_markdown(codes, lang, with_fix=False))
        parts.extend(_same_kind_fixes(citations[1:], lead_kind, "\n".join([question, *error_lines]), lang))
        if len(citations) > 1:
            parts.append(f"### {say('see_also', lang)}")
            parts.extend(f"- [{c.n}] {_shown_title(c)}" for c in citations[1:])
        parts.extend(confirm_markdown(lead_kind, lang))  # the answer ends with the check that confirms its kind
        return "\n".join(parts).strip()
    if no_match or not citations:
        return _no_match(parts, recognised, confidence, list(nearest) or citations, lang,
                         [*error_lines, *question.splitlines()] if raised_in is None else raised_in)

    top = citations[0]
    verdict = any(f.explains for f in problems)  # what traindoc measured answers the question: it leads
    heading = "documents_add" if verdict else "likely_cause"
    parts.append(f"### {say(heading, lang, title=_shown_title(top), n=top.n)}")
    if confidence is not None and confidence < float(_guidance()["weak_below"]):
        parts.extend([say("weak_match", lang, confidence=confidence), ""])
    # The top section and the parts of the same problem write-up (its subsections, its other parts):
    # its text is the diagnosis, its commands the fixes. Other sections are only named (See also).
    family = [top] + [c for c in citations[1:] if _same_problem(top.section, c.section)]
    fixes: list[tuple[str, Citation]] = []
    notes: dict[str, str] = {}
    shown = 0
    for citation in family:
        body = citation.text  # already through advice.review: corrected, marked, labelled (agent.core)
        for flag in citation.advice:
            if flag.kind == "curated":
                notes.setdefault(flag.reason, "")
                notes[flag.reason] += f"[{citation.n}]"
        prose, code = _split_blocks(body)
        if shown < MAX_DIAGNOSIS_LINES and prose:
            take = _keep_lists(prose[: MAX_DIAGNOSIS_LINES - shown])
            marker = "" if citation is top else f" [{citation.n}]"
            parts.extend(take[:-1] + [take[-1] + marker, ""])
            shown += len(take)
        if citation is top:
            quoted = [block for block in code if not _is_fix(block)]
            if quoted:
                parts.extend([say("documented_error", lang), "", quoted[0], ""])
        fixes.extend(_fix_blocks(citation, code, "\n".join([question, *error_lines])))
    parts.append("")
    parts.extend(_fix_list(say("fixes", lang), _dedupe(fixes)[: MAX_FIX_BLOCKS + 1], lang))
    for note, where in notes.items():
        parts.append(f"> **{say('stale', lang, where=where)}** {note}")
        parts.append("")
    for citation in family:  # whose advice it is
        parts.extend(f"> [{citation.n}] {note}\n" for note in citation.notes if not note.startswith("traindoc corrected"))
    if len(citations) > 1:
        parts.append(f"### {say('see_also', lang)}")
        parts.extend(f"- [{c.n}] {_shown_title(c)}" for c in citations[1:])
    return "\n".join(parts).strip()


def ending_with_check(text: str, kind: str | None, lang: Lang) -> str:
    """A model's answer ending with the check that confirms ``kind``, as traindoc's own answers end (unchanged when
    the check cannot tell that kind)."""
    confirm = confirm_markdown(kind, lang)
    return text.rstrip() + "\n" + "\n".join(confirm) if confirm else text


def confirm_markdown(kind: str | None, lang: Lang) -> list[str]:
    """The check that confirms ``kind`` on the asker's machine, now and after the fix (``confirm_with`` of the kind in
    runbooks/data/kinds.json: `traindoc check nccl`), or nothing where no check can tell."""
    from checks.confirm import confirm_with

    command = confirm_with(kind)
    return ["", f"### {say('confirm_heading', lang)}", "", say("confirm_check", lang, command=command)] if command else []


def _findings(heading: str, findings: Sequence[FindingView], lang: Lang) -> list[str]:
    """The findings seen in one place, each said once (a log's two identical matches are one line)."""
    lines = list(dict.fromkeys(
        f"- **{f.code}** ({f.probe}): {f.summary} {''.join(f'[{n}]' for n in f.related)}".rstrip()
        + (f"\n  - {say('fix', lang)}: {f.fix}" if f.fix else "") for f in findings))
    return [f"### {heading}", *lines, ""] if lines else []


def _fix_blocks(citation: Citation, code: Sequence[str], report: str) -> list[tuple[str, Citation]]:
    """The section's code blocks that are fixes for this asker: a project's own flags only for a user whose
    ``report`` (question and error lines) names that project."""
    return [(block, citation) for block in code if _is_fix(block)
            and (_project_fixes_apply(citation, report) or not _project_flags(block, citation))]


def _fix_list(heading: str, fixes: Sequence[tuple[str, Citation]], lang: Lang) -> list[str]:
    if not fixes:
        return []
    parts = [f"### {heading}", ""]
    for i, (block, citation) in enumerate(fixes, 1):
        parts.extend([say("fix_item", lang, i=i, n=citation.n, title=_shown_title(citation)), "", block, ""])
    return parts


def _same_kind_fixes(citations: Sequence[Citation], kind: str | None, report: str, lang: Lang) -> list[str]:
    """After the runbook's fixes: those of the documents' sections about the same kind (corpus.kinds), as
    advice.review showed them; a section about another kind supplies none."""
    if kind is None:
        return []
    fixes: list[tuple[str, Citation]] = []
    for citation in citations:
        about = section_kinds(citation.source, citation.section)
        if kind not in about.kinds or about.role != "fix":
            continue
        fixes.extend(_fix_blocks(citation, _split_blocks(citation.text)[1], report))
    fixes = _dedupe(fixes)[:MAX_FIX_BLOCKS]
    if not fixes:
        return []
    parts = _fix_list(say("more_fixes", lang), fixes, lang)
    notes = [f"> [{c.n}] {note}" for c in dict.fromkeys(c for _, c in fixes) for note in c.notes]
    return parts + ([*notes, ""] if notes else [])


def codes_markdown(codes: Sequence[CodeMeaning], lang: Lang, *, with_fix: bool = True) -> list[str]:
    """What each well-known error code the input shows means, and NVIDIA's check and fix for it (jobs.codes); not
    the fix (``with_fix``) after a runbook that gives the fixes for this failure: a code's generic fix (a Blackwell
    build for `no kernel image`) must not contradict the verdict (an extension built without this GPU's arch)."""
    if not codes:
        return []
    parts = [f"### {say('codes_mean', lang)}"]
    for code in codes:
        parts.append(f"- **{code.head}**: {code.meaning_in(lang)} ({code.source.split(' ; ')[0]})")
        if code.check:
            parts.append(f"  - {say('code_check', lang)}: {code_span(code.check)}")
        if code.fix and with_fix:
            parts.append(f"  - {say('code_fix', lang)}: {code.fix.get(lang) or code.fix['en']}")
    return [*parts, ""]


def _no_match(parts: list[str], recognised: list[str], confidence: float | None, nearest: Sequence[Citation],
              lang: Lang, report: Sequence[str] = ()) -> str:
    """After what the evidence says (above): no section answers; the first check of the generic exception the
    report raises (agent.exceptions), as its one fix; the nearest sections, plainly not answers; what to collect
    next."""
    what = f" ({', '.join(recognised)})" if recognised else ""
    lead = say("no_match", lang, what=what)
    if confidence is not None and nearest:
        lead += " " + say("no_match_confidence", lang, confidence=confidence)
    parts.extend([lead, ""])
    from agent.exceptions import recognise

    if (raised := recognise(list(report))) is not None and raised.check:
        parts.extend([f"### {say('fixes', lang)}", "", f"1. {say('exc_fix_item', lang)}", "", "   ```bash",
                      *(f"   {line}" for line in raised.check.split("\n")), "   ```", ""])
    if nearest:
        parts.append(f"### {say('nearest_heading', lang)}")
        parts.extend(say("nearest_item", lang, title=c.named) for c in nearest[:3])
        parts.append("")
    parts.append(f"### {say('collect_heading', lang)}")
    parts.extend(f"- {item}" for item in what_to_collect(recognised, lang))
    return "\n".join(parts).strip()


__all__ = ["codes_markdown", "compose", "what_to_collect"]


def several_jobs_markdown(jobs: Sequence[Any], lang: Lang) -> str:
    """Several training jobs run on this machine and none was picked: each (first PID, owner, command, secrets
    masked) and how to pick one; the rest of the answer reads no job's stacks."""
    from common.redaction import Redactor

    redactor = Redactor()
    lines = [f"### {say('several_jobs', lang, count=len(jobs))}", ""]
    lines.extend(f"- PID {job.pid} ({job.user}): {code_span(redactor.redact(job.command))}" for job in jobs[:12])
    first = jobs[0].pid if jobs else "<PID>"
    lines.extend(["", say("several_jobs_pick", lang), "", "```bash", f'ask --pid {first} "<your question>"',
                  f"traindoc hang --pid {first}", "```"])
    return "\n".join(lines)
