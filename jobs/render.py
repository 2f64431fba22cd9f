"""The diagnosis in plain words, as the markdown that leads an answer (every front end shows it)."""

from __future__ import annotations

import re

from common.language import Lang, say
from jobs.diagnosis import JobDiagnosis, clip

TIMEOUT_FIX = re.compile(r"(?i)NCCL_TIMEOUT|(?<!DUMP_ON_)timeout\s*=|--timeout|timedelta\(")  # DUMP_ON_TIMEOUT=1: a flag, no duration
OFFLOAD_FIX = re.compile(r"(?i)offload|卸载")

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
        parts.extend(["", *_fence([clip(line, 300) for line in root.evidence[:6]])])  # cut at a word, never mid-number
    if diagnosis.why_consequences:
        parts.extend(["", own.get("why") or diagnosis.why_consequences])
    elif diagnosis.symptoms:
        items = own.get("symptoms") or "; ".join(s.summary for s in diagnosis.symptoms)
        parts.extend(["", say("also_seen", lang, items=items)])
    if diagnosis.collective and root.category in ("unknown", "straggler", "collective_mismatch", "network"):
        parts.append(say("collective", lang, collective=own.get("collective") or diagnosis.collective))
    if diagnosis.next_evidence:
        parts.extend(["", say("what_would_tell", lang)])
        parts.extend(f"- {item}" for item in (own["next"].splitlines() if own.get("next") else diagnosis.next_evidence))
    return "\n".join(parts).strip()


def worsening(job: JobDiagnosis) -> list[tuple[re.Pattern[str], str]]:
    """(fix lines, note) that would make this root cause worse or only later: a longer timeout once the logs
    name a cause; moving memory to the host (CPU offload) when the host's RAM is what ran out."""
    root = job.root_cause
    if root is None or root.category == "unknown":
        return []
    rules = [(TIMEOUT_FIX, "timeout_left_out")]
    if root.category == "host_oom":
        rules.append((OFFLOAD_FIX, "offload_left_out"))
    return rules


def _postponed(job: JobDiagnosis) -> re.Pattern[str] | None:
    """Fix lines that go last, not away: ranks timed out and nothing yet tells why. A longer timeout is right
    only for a wait that is legitimately long (one rank saving a checkpoint while the others wait), which only
    every rank's log can show."""
    root = job.root_cause
    waited = any(s.category in ("collective_timeout", "collective_wait") for s in job.symptoms)
    return TIMEOUT_FIX if root is not None and root.category == "unknown" and waited else None


def demote_timeout_fixes(body: str, job: JobDiagnosis, lang: Lang = "en") -> str:
    """Fix lines that would make the named root cause worse (``worsening``: a longer timeout delays the next
    failure, CPU offload fills a host whose RAM ran out) leave the fix blocks, with the comment that introduces
    them; a block left with nothing to run goes, and a note says why. When nothing names a cause yet, a longer
    timeout is moved to the end instead (``_postponed``), under what would justify it."""
    heading = f"### {say('fixes', lang)}"
    rules, later = worsening(job), _postponed(job)
    if not (rules or later) or heading not in body:
        return body
    head, _, rest = body.partition(heading)
    fixes_text, marker, tail = rest.partition("\n### ")
    blocks = [b for b in re.split(r"(?m)^(?=\*\*\d+\.\*\* )", fixes_text.strip("\n")) if b.strip()]
    kept, removed = [], set[str]()
    moved: dict[str, list[str]] = {}  # fence language -> the lines moved to the end, with their comments
    for block in blocks:
        out: list[str] = []
        fence = "text"
        for line in block.splitlines():
            if line.lstrip().startswith("```") and line.strip() != "```":
                fence = line.strip()[3:] or "text"
            hit = next((note for pattern, note in rules if pattern.search(line)), None)
            postpone = hit is None and later is not None and bool(later.search(line))
            if (hit is not None or postpone) and not line.lstrip().startswith("**"):
                comment = out.pop() if out and out[-1].lstrip().startswith("#") else None  # the comment that introduced it
                if hit is not None:
                    removed.add(hit)
                else:
                    moved.setdefault(fence, []).extend([c for c in (comment,) if c] + [line])
                continue
            out.append(line)
        code = [x for x in out if x.strip() and not x.lstrip().startswith(("```", "#", "**", ">"))]
        if code:
            kept.append("\n".join(out))
    if not removed and not moved:
        return body
    if moved:
        fences = "\n\n".join(f"```{language}\n" + "\n".join(lines) + "\n```" for language, lines in moved.items())
        kept.append(f"**{len(kept) + 1}.** {say('timeout_last', lang)}\n\n{fences}")
    renumbered = [re.sub(r"^\*\*\d+\.\*\*", f"**{i}.**", b, count=1) for i, b in enumerate(kept, 1)]
    notes = "".join(say(note, lang) + "\n\n" for _, note in rules if note in removed)
    fixes = notes + "\n\n".join(b.rstrip("\n") for b in renumbered)
    return head + heading + "\n" + fixes.rstrip("\n") + "\n" + ("\n### " + tail if marker else "")
