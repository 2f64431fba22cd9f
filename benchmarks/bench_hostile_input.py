"""Hostile input on the question path and the log path: time per KB at 10 KB, 100 KB and 1 MB, as ratios.

The input is each pattern's own near-misses (tests/security/hostile_text.py: a literal it starts with repeated, what
it waits for never coming; "a.a.a...", a megabyte without a space). The units that cost each pattern the most are
picked first (each pattern on 2,000 and 8,000 characters of every unit), then the paths run on those:

- question patterns: every pattern ask() applies to a question's whole text before retrieval (the probe rules, the
  answerability features' noise and identifiers, error-line extraction and the pasted-output test), uncapped;
- question as asked: what ask() does with it (a question past corpus.errorlines.QUESTION_CAP is read as a pasted
  log through the job reader, agent.logs.long_question);
- log: `ask --log` on a file of the same text (agent.logs.read_logs: the reader, the events, the triage), as one
  line and as lines of 2,000 characters.

A ratio is (per-KB time at 1 MB) / (per-KB time at 10 KB): about 1 is linear; a pattern that rescans from every
position gives about 100. Target: every ratio under 3.

    .venv/bin/python benchmarks/bench_hostile_input.py [--quick]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "security"))

from hostile_text import units, user_text_patterns  # noqa: E402

from agent.core import Question  # noqa: E402
from agent.logs import long_question, pasted_job, read_logs  # noqa: E402
from corpus.answerability import _content_tokens, identifiers  # noqa: E402
from corpus.errorlines import error_lines, looks_like_log, pasted_first  # noqa: E402
from tools.registry import select_probes  # noqa: E402

SIZES = (10_000, 100_000, 1_000_000)
TARGET = 3.0
PER_LINE = ("jobs.signatures.", "jobs.lines.", "signatures.")  # applied to one log line (cut at 2,000 characters)


def question_patterns(text: str) -> None:
    lines = text.splitlines()
    select_probes(text)
    identifiers(text)
    _content_tokens(text)
    looks_like_log(text)
    pasted_first(error_lines(lines))
    pasted_first(lines)


def question_as_asked(text: str) -> None:
    """What ask() reads of a question before retrieval: past the cap, a pasted log (agent.logs.long_question)."""
    errors: list[str] = []
    if (pasted := long_question(text)) is not None:
        text, reading = pasted
        errors = reading.errors
    else:
        pasted_job(text)
        errors = error_lines(text.splitlines()) if looks_like_log(text) else []
    question = Question(text=text, log_errors=errors, probes=False)
    search = question.search_text()
    question.needs_a_quote()
    select_probes(search)
    identifiers(search)
    _content_tokens(search)
    pasted_first(errors)


def log_path(text: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "rank0.log"
        path.write_text(text, encoding="utf-8")
        read_logs([path], question="why did it crash")


def _best(run: Callable[[], object], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - started)
    return best


def worst_units(per_line: bool, count: int) -> list[str]:
    """The units whose runs cost their pattern the most as they grow (2,000 -> 8,000 characters)."""
    scored: dict[str, float] = {}
    for name, pattern in user_text_patterns().items():
        if name.startswith(PER_LINE) != per_line:
            continue
        for unit in units(pattern.pattern):
            short, long = ((unit * (n // len(unit) + 1))[:n] for n in (2_000, 8_000))
            ratio = _best(partial(pattern.search, long), 3) / max(_best(partial(pattern.search, short), 3), 1e-7)
            scored[unit] = max(scored.get(unit, 0.0), ratio)
    return sorted(scored, key=lambda u: -scored[u])[:count]


def shaped(unit: str, size: int, line: int | None) -> str:
    text = (unit * (size // len(unit) + 1))[:size]
    if line is None:
        return text
    return "\n".join(text[i:i + line] for i in range(0, len(text), line))


def measure(label: str, run: Callable[[str], None], inputs: list[str], line: int | None, sizes: tuple[int, ...]) -> float:
    worst = 0.0
    for unit in inputs:
        per_kb = []
        for size in sizes:
            text = shaped(unit, size, line)
            seconds = _best(partial(run, text), 2 if size <= 100_000 else 1)
            per_kb.append(seconds / (size / 1000))
        ratio = per_kb[-1] / max(per_kb[0], 1e-9)
        worst = max(worst, ratio)
        cells = "  ".join(f"{s // 1000:>5} KB {t * 1e6:8.1f} us/KB" for s, t in zip(sizes, per_kb, strict=True))
        print(f"{label:22s} {unit[:18]!r:22s} {cells}  ratio {ratio:5.2f}")
    return worst


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 units a path, up to 100 KB")
    args = parser.parse_args()
    count, sizes = (3, SIZES[:2]) if args.quick else (6, SIZES)
    question_units = worst_units(False, count) + ["a." * 4, "x"]
    log_units = worst_units(True, count) + ["RuntimeError: x", "oom-kill"]
    results = {
        "question patterns": measure("question patterns", question_patterns, question_units, None, sizes),
        "question as asked": measure("question as asked", question_as_asked, question_units, 2000, sizes),
        "log (one line)": measure("log (one line)", log_path, log_units, None, sizes),
        "log (2,000-char lines)": measure("log (2,000-char lines)", log_path, log_units, 2000, sizes),
    }
    for name, ratio in results.items():
        print(f"{name:24s} worst ratio {ratio:5.2f}x ({sizes[-1] // 1000} KB vs {sizes[0] // 1000} KB per KB)")
    worst = max(results.values())
    print(f"{'PASS' if worst < TARGET else 'FAIL'}: worst ratio {worst:.2f}x (target under {TARGET:.0f}x: linear)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
