"""The diagnosis in plain words, as the markdown that leads an answer (every front end shows it)."""

from __future__ import annotations

import re

from common.language import Lang, say
from jobs.diagnosis import JobDiagnosis

TIMEOUT_FIX = re.compile(r"(?i)NCCL_TIMEOUT|timeout\s*=|TIMEOUT=|--timeout|timedelta\(")

LEAD = {"log": "lead_log", "hang": "lead_hang"}  # phrase keys (common/data/phrases.json)


def _fence(lines: list[str]) -> list[str]:
    """A fenced block no line of the log can close (the fence is longer than any backtick run inside)."""
    ticks = "`" * max(3, _max_backticks(lines) + 1)
    return [ticks + "text", *lines, ticks]


def _max_backticks(lines: list[str]) -> int:
    best = 0
    for line in lines:
        run = 0
        for char in line:
            run = run + 1 if char == "`" else 0
            best = max(best, run)
    return best


def diagnosis_text(diagnosis: JobDiagnosis) -> str:
    """Plain lines for a model's tool result: the diagnosis, never the raw log."""
    root = diagnosis.root_cause
    lines = [f"kind: {diagnosis.kind}; ranks seen: {len(diagnosis.ranks)}"]
    if root is not None:
        lines.append(f"root cause: {root.category}; rank: {root.rank}; host: {root.host}; where: {root.where}; "
                     f"confidence: {root.confidence}")
        lines.append(f"summary: {root.summary}")
        lines.extend(f"evidence: {line[:300]}" for line in root.evidence[:5])
    lines.extend(f"symptom ({s.category}): {s.summary}" for s in diagnosis.symptoms)
    if diagnosis.why_consequences:
        lines.append(f"why the rest are consequences: {diagnosis.why_consequences}")
    if diagnosis.collective:
        lines.append(f"collective: {diagnosis.collective}")
    lines.extend(f"next evidence: {item}" for item in diagnosis.next_evidence)
    return "\n".join(lines)


def diagnosis_markdown(diagnosis: JobDiagnosis, lang: Lang = "en") -> str:
    root = diagnosis.root_cause
    if root is None:
        return ""
    own = diagnosis.wording.get(lang, {})  # the sentences in the answer's language, where triage wrote them
    summary = own.get("root") or root.summary
    parts = [f"### {say(LEAD.get(diagnosis.kind, 'lead_other'), lang)}", ""]
    if root.category == "unknown":
        parts.append(say("cannot_name", lang, summary=summary))
    else:
        who = say("rank", lang, rank=root.rank) if root.rank is not None else say("no_single_rank", lang)
        parts.append(say("root_cause", lang, category=root.category, who=who, confidence=root.confidence, summary=summary))
    if root.evidence:
        parts.extend(["", *_fence([line[:300] for line in root.evidence[:6]])])
    if diagnosis.why_consequences:
        parts.extend(["", own.get("why") or diagnosis.why_consequences])
    elif diagnosis.symptoms:
        items = own.get("symptoms") or "; ".join(s.summary for s in diagnosis.symptoms)
        parts.extend(["", say("also_seen", lang, items=items)])
    if diagnosis.collective and root.category in ("unknown", "straggler", "collective_mismatch", "network"):
        parts.append(say("collective", lang, collective=diagnosis.collective))
    if diagnosis.next_evidence:
        parts.extend(["", say("what_would_tell", lang)])
        parts.extend(f"- {item}" for item in (own["next"].splitlines() if own.get("next") else diagnosis.next_evidence))
    return "\n".join(parts).strip()


def demote_timeout_fixes(body: str, job: JobDiagnosis, lang: Lang = "en") -> str:
    """When the logs name a root cause, a line that only raises a timeout delays the next failure: such
    lines (with the comment that introduces them) leave the fix blocks, a block left with nothing to
    run goes, and a note says why."""
    root = job.root_cause
    heading = f"### {say('fixes', lang)}"
    if root is None or root.category == "unknown" or heading not in body:
        return body
    head, _, rest = body.partition(heading)
    fixes_text, marker, tail = rest.partition("\n### ")
    blocks = [b for b in re.split(r"(?m)^(?=\*\*\d+\.\*\* )", fixes_text.strip("\n")) if b.strip()]
    kept, removed = [], False
    for block in blocks:
        lines = block.splitlines()
        out: list[str] = []
        for line in lines:
            if TIMEOUT_FIX.search(line) and not line.lstrip().startswith("**"):
                removed = True
                if out and out[-1].lstrip().startswith("#"):
                    out.pop()  # the comment that introduced it
                continue
            out.append(line)
        code = [x for x in out if x.strip() and not x.lstrip().startswith(("```", "#", "**", ">"))]
        if code:
            kept.append("\n".join(out))
    if not removed:
        return body
    renumbered = [re.sub(r"^\*\*\d+\.\*\*", f"**{i}.**", b, count=1) for i, b in enumerate(kept, 1)]
    note = say("timeout_left_out", lang) + "\n\n"
    fixes = note + "\n\n".join(b.rstrip("\n") for b in renumbered)
    return head + heading + "\n" + fixes.rstrip("\n") + "\n" + ("\n### " + tail if marker else "")
