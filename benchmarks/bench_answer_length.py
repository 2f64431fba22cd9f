"""Answers people finish (issue 38 point 3): how long the default answer is, as the CLI prints it at 80 columns.

For every question of the given case files (JSON lines with ``id`` and ``query``; by default the visible eval sets
in ``../shared/eval`` and the real job logs under ``tests/jobs/data/gpu-real``), the offline answer is made in
process (no probes) and rendered as text to paste at 80 columns by the CLI's own renderer: the default answer and
the ``--full`` one. Rows are terminal rows (a line wider than 80 cells, CJK two, counts once per 80). Prints max,
p95 and median rows of each and how many default answers exceed 40 rows; also any word clipped mid-word ("…"
after part of a word the full answer continues). Target: every default answer within 40 rows, none clipped
mid-word.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import REPO, finish, parser, verdict  # noqa: E402

MOST = 40
EVAL = REPO.parent / "shared" / "eval"
LOGS = REPO / "tests" / "jobs" / "data" / "gpu-real"


def _rows(text: str) -> int:
    from rich.cells import cell_len

    return sum(max(1, -(-cell_len(line) // 80)) for line in text.splitlines())


def _cut_words(brief: str, full: str) -> list[str]:
    plain = " ".join(full.split())
    # a Latin word or a number (Chinese writes no spaces: agent.brief cuts it at a comma where it can)
    return [w for w in re.findall(r"(?<![A-Za-z0-9_.])([A-Za-z0-9_.]+)…", brief)
            if re.search(re.escape(w) + r"\w", plain) and not re.search(re.escape(w) + r"(?!\w)", plain)]


def _questions(files: list[Path]) -> list[tuple[str, str, Path | None]]:
    asked = [(str(case["id"]), str(case["query"]), None)
             for path in files for case in map(json.loads, path.read_text(encoding="utf-8").splitlines()) if case]
    asked += [(log.parent.name, "", log) for log in sorted(LOGS.glob("*/console.log"))]
    return asked


def main() -> int:
    p = parser(__doc__.splitlines()[0], runs=None)
    p.add_argument("cases", nargs="*", type=Path, help="JSON-lines case files (default: ../shared/eval/dev*.jsonl)")
    args = p.parse_args()
    from agent.core import build_troubleshooter
    from agent.intake import Received, intake
    from common.settings import Settings
    from traindoc_cli.screen import document

    troubleshooter = build_troubleshooter(Settings.from_env())
    files = args.cases or sorted(EVAL.glob("dev*.jsonl"))
    short, whole, over, cut = [], [], [], []
    for case_id, query, log in _questions(files):
        received = Received(text=query, logs=(log,) if log else (), probes=False)
        answer = troubleshooter.ask(intake(received))
        brief, full = document(answer, "text", 80), document(answer, "text", 80, full=True)
        short.append(_rows(brief))
        whole.append(_rows(full))
        if short[-1] > MOST:
            over.append(f"{case_id} ({short[-1]} rows)")
        cut += [f"{case_id}: {w}…" for w in _cut_words(brief, full)]
    for name, values in (("default", sorted(short)), ("--full", sorted(whole))):
        print(f"{name:8} answers: {len(values)}, rows max {values[-1]}, p95 {values[int(0.95 * (len(values) - 1))]}, "
              f"median {values[len(values) // 2]}")
    results = [verdict("default answer within 40 rows at 80 columns", not over, f"{len(over)} over: {over[:10]}"),
               verdict("nothing clipped mid-word", not cut, f"{len(cut)}: {cut[:10]}")]
    return finish(args.strict, results)


if __name__ == "__main__":
    raise SystemExit(main())
