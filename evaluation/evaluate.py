"""`traindoc eval`: the score.py metrics for traindoc, plus plain BM25 and plain dense baselines
computed in the same run over the same chunks; with ``cv``, k-fold cross-validation (evaluation.crossval)."""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

from agent.core import Question, Troubleshooter
from common.errors import InputError
from evaluation.cases import first_hit, load_sets

MODES = ("hybrid", "bm25", "dense")


def evaluate(troubleshooter: Troubleshooter, paths: Path | Sequence[Path], cv: int | None = None, seed: int = 0,
             group: str = "case", answers: bool = False) -> dict[str, Any]:
    """The metrics over the cases of ``paths``; with ``cv``, k-fold cross-validation whose folds never split a
    ``group`` (evaluation.crossval.GROUPINGS: the case, its source thread, or its gold section), and with ``answers``
    every held-out case also asked end to end with its fold's model (evaluation.crossval_answers)."""
    paths = [paths] if isinstance(paths, Path) else list(paths)
    if cv is not None:
        from evaluation.crossval import collect, cross_validate, training_records
        from evaluation.crossval_answers import held_out_answers

        if cv < 2:
            raise InputError("--cv needs at least 2 folds")
        # the cases in the order collect() reads them
        asked = partial(held_out_answers, troubleshooter, load_sets(paths)) if answers else None
        return cross_validate(collect(troubleshooter, paths), cv, seed, training=training_records(troubleshooter),
                              group=group, answers=asked)
    if answers:
        raise InputError("--answers goes with --cv")
    cases = load_sets(paths)
    report: dict[str, Any] = {"cases": len(cases), "answerable": sum(1 for c in cases if c["gold"]), "modes": {}}
    for mode in MODES:
        ranks: dict[str, int | None] = {}
        negatives_ok = false_no_match = 0
        misses = []
        started = time.perf_counter()
        from runbooks.choose import kind_of_source

        commands = 0
        verdicts: Counter[str] = Counter()
        for case in cases:
            answer = troubleshooter.ask(Question(text=case["query"], id=case["id"], probes=False), mode=mode)
            commands += code_lines(answer.answer)
            verdicts.update(flag.verdict for c in answer.citations for flag in c.advice)
            # The documents' sections: traindoc's own runbooks are judged by what they fix (benchmarks/bench_job_fixes.py)
            cited = [(c.source, c.section) for c in answer.citations if kind_of_source(c.source) is None]
            if case["gold"]:
                ranks[case["id"]] = rank = first_hit(case, cited)
                false_no_match += answer.no_match
                if rank != 0:
                    misses.append({"id": case["id"], "rank": rank, "cited": [s for _, s in cited[:3]]})
            else:
                negatives_ok += bool(answer.no_match or not cited)
        positives = [c for c in cases if c["gold"]]

        def recall(k: int, subset: list[dict[str, Any]], ranks: dict[str, int | None] = ranks) -> float:
            hits = [ranks[c["id"]] for c in subset]
            return round(sum(r is not None and r < k for r in hits) / max(len(subset), 1), 3)

        negatives = len(cases) - len(positives)
        report["modes"][mode] = {
            "R@1": recall(1, positives), "R@3": recall(3, positives), "R@5": recall(5, positives),
            "negatives": round(negatives_ok / negatives, 3) if negatives else None,
            "false_no_match": false_no_match,
            "by_lang": {
                lang: {"R@1": recall(1, sub), "R@3": recall(3, sub), "n": len(sub)}
                for lang in sorted({str(c.get("lang", "")) for c in positives} - {""})
                if (sub := [c for c in positives if c.get("lang") == lang])
            },
            "ms_per_case": round((time.perf_counter() - started) * 1000 / max(len(cases), 1), 1),
            # What advice.review did to the sections these answers showed (corrected, left out, marked, unchecked)
            "commands": {"shown": commands, "flags": dict(sorted(verdicts.items()))},
            "misses": misses,
        }
    return report


FENCED = re.compile(r"```[^\n]*\n(.*?)```", re.S)


def code_lines(markdown: str) -> int:
    """The commands an answer shows: non-empty, non-comment lines of its code blocks."""
    return sum(1 for block in FENCED.findall(markdown) for line in block.splitlines()
               if line.strip() and not line.lstrip().startswith("#"))


def render_report(report: dict[str, Any], show_misses: bool = False) -> str:
    if "k" in report:
        from evaluation.crossval import render

        return render(report, folds_too=show_misses)
    lines = [f"{report['cases']} cases, {report['answerable']} answerable", ""]
    lines.append(f"{'':10}{'R@1':>7}{'R@3':>7}{'R@5':>7}{'neg':>7}{'falseNM':>9}{'ms/case':>9}")
    for mode, m in report["modes"].items():
        neg = "-" if m["negatives"] is None else f"{m['negatives']:.2f}"
        lines.append(
            f"{mode:10}{m['R@1']:7.2f}{m['R@3']:7.2f}{m['R@5']:7.2f}{neg:>7}{m['false_no_match']:9d}{m['ms_per_case']:9.1f}"
        )
    for mode, m in report["modes"].items():
        for lang, sub in m["by_lang"].items():
            lines.append(f"  {mode} {lang}: R@1 {sub['R@1']:.2f}  R@3 {sub['R@3']:.2f}  (n={sub['n']})")
    for mode, m in report["modes"].items():
        flags = ", ".join(f"{verdict} {n}" for verdict, n in m["commands"]["flags"].items()) or "none"
        lines.append(f"  commands in {mode} answers: {m['commands']['shown']} shown; corrected or marked: {flags}")
    if show_misses:
        for miss in report["modes"]["hybrid"]["misses"]:
            lines.append(f"  miss@1 {miss['id']} rank={miss['rank']}: {'; '.join(miss['cited'])[:150]}")
    return "\n".join(lines)
