"""`traindoc eval --cv K --answers`: every held-out report asked end to end, with its fold's answerability model.

The cross-validation rows of evaluation.crossval score the documents' sections as retrieval and the answerability model
decide them. A user reads more than that: the runbook a diagnosis, a pasted message or a hang stage chooses leads,
and the sections after it are the ones about the same failure (agent.lead). This row runs the whole answer
(`Troubleshooter.ask`, probes off) for each held-out report, the answerability model fitted on the other folds
in place of the shipped one for retrieval among the documents and among the runbooks alike, and scores the
documents' citations as `score.py --files` does: a runbook cited first is passed over, an unanswerable report is
right when the answer is no_match or cites no document section, an answerable one refused only when no_match.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from evaluation.cases import first_hit


def held_out_answers(troubleshooter: Any, cases: Sequence[dict[str, Any]], parts: Sequence[Sequence[int]],
                     models: Sequence[Any]) -> tuple[list[bool], list[int | None]]:
    """(refused, rank of the first gold section among the documents' citations) per case, each answered with the
    model of the fold that holds it out; the shipped model is put back whatever happens."""
    from agent.core import Question
    from runbooks.choose import kind_of_source

    retriever = troubleshooter.retriever()
    shipped = retriever.answerability
    refused: list[bool] = [False] * len(cases)
    ranks: list[int | None] = [None] * len(cases)
    try:
        for held, model in zip(parts, models, strict=True):
            retriever.answerability = model
            for i in held:
                case = cases[i]
                answer = troubleshooter.ask(Question(text=case["query"], id=str(case["id"]), probes=False))
                cited = [(c.source, c.section) for c in answer.citations if kind_of_source(c.source) is None]
                if case["gold"]:
                    ranks[i], refused[i] = first_hit(case, cited), answer.no_match
                else:
                    refused[i] = answer.no_match or not cited
    finally:
        retriever.answerability = shipped
    return refused, ranks


__all__ = ["held_out_answers"]
