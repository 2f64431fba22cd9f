"""`traindoc eval --cv K`: k-fold cross-validation of everything traindoc fits from labelled cases.

Retrieval runs once per case; the answerability model (its weights and its threshold) is fitted on
k-1 folds and scored on the held-out one, so no figure comes from a case its own decision was fitted
on. Plain BM25 and plain dense are scored on the same folds. ``python -m evaluation.crossval --fit FILE``
fits on every case and writes the weights traindoc ships (corpus/data/answerability.json).

Every fit also learns from traindoc's own training reports (evaluation/data/answerability_cases.jsonl: failures
written for this purpose, about half of them ones the built-in documents do not cover, in the words users
use; no evaluation case is among them). They are never scored, so no figure comes from them; they are
left out when the index does not hold the built-in documents their labels refer to.
"""

from __future__ import annotations

import argparse
import json
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from corpus.answerability import FEATURES, SIGNS, AnswerabilityModel, Evidence
from evaluation.cases import first_hit, load_cases, load_sets

MAX_FALSE_NO_MATCH = 0.02  # of the answerable training cases, when the threshold is chosen
L2 = 3.0  # on the standardised weights; chosen by cross-validation over both case sets
TRAINING_CASES = Path(__file__).resolve().parent / "data" / "answerability_cases.jsonl"
METRICS = ("R@1", "R@3", "R@5", "negatives", "false_no_match")


@dataclass(frozen=True)
class Record:
    """One case as retrieval saw it: where the first gold section ranks, and the evidence about the top one."""

    id: str
    answerable: bool
    rank: int | None  # of the first gold section among the hits as ranked (None: not among them)
    candidates: tuple[Evidence, ...]  # about the first sections, in rank order
    no_hits: bool = False  # retrieval found nothing at all
    lang: str = ""
    thread: str = ""  # the report's source (its GitHub thread): reports of one thread never sit on both sides
    section: str = ""  # the first gold section ("file > heading"), or "none: <thread>" for an unanswerable report
    document: str = ""  # the first gold section's file
    quote_required: bool = False  # only a section quoting the report's error answers it (Question.needs_a_quote)

    @property
    def evidence(self) -> Evidence | None:
        return self.candidates[0] if self.candidates else None

    def decided(self, model: AnswerabilityModel) -> tuple[bool, int | None]:
        """(refused, rank of the first gold section) once ``model`` has checked the first sections."""
        from corpus.retrieval import QUOTED

        for position, found in enumerate(self.candidates):
            if model.decide(found)[0] and (not self.quote_required or found.quoted_message >= QUOTED):
                return False, _promoted(self.rank, position)
        return True, None


def _promoted(rank: int | None, position: int) -> int | None:
    """Where a section ranked ``rank`` ends up once the one at ``position`` moves to the front."""
    if rank is None or position == 0:
        return rank
    return 0 if rank == position else rank + 1 if rank < position else rank


def fit(records: Sequence[Record], features: Sequence[str] = FEATURES, l2: float = L2,
        max_false_no_match: float = MAX_FALSE_NO_MATCH, inner: int = 5) -> AnswerabilityModel:
    """The logistic weights from every case; the threshold from out-of-fold probabilities (an inner
    ``inner``-fold split), so it is set where unseen answerable cases fall, not where the cases the
    weights were fitted on do: the one that refuses the most unanswerable cases while refusing at most
    ``max_false_no_match`` of the answerable ones."""
    rows = [r for r in records if r.candidates]
    model = _logistic(rows, features, l2)
    if len(rows) < 2 * inner or sum(not r.answerable for r in rows) < inner:
        held = [max(model.probability(c) for c in r.candidates) for r in rows]
        return replace(model, threshold=_threshold(np.array(held), np.array([r.answerable for r in rows]),
                                                   max_false_no_match))
    held = [0.0] * len(rows)
    judged_by: list[AnswerabilityModel] = [model] * len(rows)  # the inner model each case was held out from
    for part in folds(rows, inner, seed=1):
        fitted = _logistic([rows[i] for i in range(len(rows)) if i not in set(part)], features, l2)
        for i in part:  # a case is answered when any section checked passes: its best one counts
            held[i] = max(fitted.probability(c) for c in rows[i].candidates)
            judged_by[i] = fitted
    threshold = _threshold(np.array(held), np.array([r.answerable for r in rows]), max_false_no_match)
    judged = [(record, replace(m, threshold=threshold)) for record, m in zip(rows, judged_by, strict=True)]
    stated = [(m.probability(found), right) for m, found, right in _answered(judged)]
    return replace(model, threshold=threshold, calibration=_platt(stated))


def _answered(judged: Sequence[tuple[Record, AnswerabilityModel]]) -> list[tuple[AnswerabilityModel, Evidence, bool]]:
    """(model, the section's evidence, right) of every case the model it was held out from answered: right when the
    section cited first is a gold one (an unanswerable case answered is wrong)."""
    answered = []
    for record, model in judged:
        refused, rank = record.decided(model)
        found = next((c for c in record.candidates if model.decide(c)[0]), None)
        if not refused and found is not None:
            answered.append((model, found, record.answerable and rank == 0))
    return answered


def _platt(stated: Sequence[tuple[float, bool]], l2: float = 1.0) -> tuple[float, float]:
    """(a, b) of sigmoid(a * logit(p) + b) fitted to how often the answers stated at p were right (Platt scaling, the
    penalty pulling a towards 1: the probability as it is); the identity where too few answers, or only right or only
    wrong ones. Where a higher p was no more often right (a < 0), a is 0: every answer states the share that was."""
    if len(stated) < 20 or len({right for _, right in stated}) < 2:
        return 1.0, 0.0
    p = np.clip(np.array([q for q, _ in stated]), 1e-6, 1 - 1e-6)
    logit = np.log(p / (1 - p))
    y = np.array([float(right) for _, right in stated])
    w = _newton(np.column_stack([logit, np.ones(len(p))]), y, l2, offset=logit)  # (a - 1, b)
    if 1.0 + w[0] >= 0:
        return 1.0 + float(w[0]), float(w[1])
    share = min(max(float(y.mean()), 1e-3), 1 - 1e-3)
    return 0.0, float(np.log(share / (1 - share)))


def _logistic(rows: Sequence[Record], features: Sequence[str], l2: float) -> AnswerabilityModel:
    """Logistic regression by Newton steps, L2 on the standardised weights (not on the bias), each weight
    kept to the sign its evidence may have (SIGNS): a feature whose fitted weight turns against its
    meaning is left out and the rest refitted."""
    x = np.array([[getattr(r.evidence, f) for f in features] for r in rows], dtype=np.float64)
    y = np.array([r.answerable for r in rows], dtype=np.float64)
    recognised = [i for i, f in enumerate(features) if f in ("family", "platform")]
    if recognised:
        # Family dropout: every case also appears as if no family or platform had been recognised, which
        # is how an unseen failure or a user's own runbook arrives; the evidence has to decide those alone.
        unseen = x.copy()
        unseen[:, recognised] = 0.0
        x, y = np.vstack([x, unseen]), np.concatenate([y, y])
    mean, scale = x.mean(axis=0), x.std(axis=0)
    scale[scale < 1e-6] = 1.0
    if y.min() == y.max():  # one class only (a tiny fold): nothing to weigh, the prior decides
        bias = 5.0 if y[0] else -5.0
        return AnswerabilityModel((0.0,) * len(features), bias, tuple(mean), tuple(scale), 0.5, tuple(features))
    z = np.hstack([(x - mean) / scale, np.ones((len(x), 1))])
    active = np.ones(z.shape[1], dtype=bool)
    signs = np.array([SIGNS.get(f, 0) for f in features] + [0])
    while True:
        w = np.zeros(z.shape[1])
        w[active] = _newton(z[:, active], y, l2)
        wrong = active & (signs * w < 0)
        if not wrong.any():
            break
        active &= ~wrong
    return AnswerabilityModel(tuple(w[:-1]), float(w[-1]), tuple(mean), tuple(scale), 0.5, tuple(features))


def _newton(z: np.ndarray, y: np.ndarray, l2: float, offset: np.ndarray | None = None) -> np.ndarray:
    """Logistic weights for ``z`` (its last column the bias, not penalised) with a fixed ``offset`` added to every
    case's score (Platt scaling's logit(p), whose weight the penalty then pulls towards 1)."""
    w = np.zeros(z.shape[1])
    base = np.zeros(len(z)) if offset is None else offset
    penalty = np.full(z.shape[1], l2)
    penalty[-1] = 0.0  # the last column is the bias
    for _ in range(50):
        p = 1 / (1 + np.exp(-np.clip(z @ w + base, -30, 30)))
        gradient = z.T @ (p - y) + penalty * w
        hessian = (z * (p * (1 - p))[:, None]).T @ z + np.diag(penalty) + 1e-9 * np.eye(len(w))
        step = np.linalg.solve(hessian, gradient)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    return w


def _threshold(p: np.ndarray, answerable: np.ndarray, max_false_no_match: float) -> float:
    """Halfway between the last answerable case the budget lets go and the next one up."""
    allowed = int(max_false_no_match * answerable.sum())
    positives = np.sort(p[answerable])
    if not len(positives):
        return 0.5
    cut = positives[allowed]  # cases below ``cut`` are refused: at most ``allowed`` answerable ones
    below = p[p < cut]
    return float((below.max() + cut) / 2) if len(below) else float(cut / 2)


GROUPINGS = ("case", "thread", "section")


def _dealt(records: Sequence[Record], k: int, seed: int) -> list[list[int]]:
    groups: list[list[int]] = [[] for _ in range(k)]
    rng = random.Random(seed)
    for wanted in (True, False):
        members = [i for i, r in enumerate(records) if r.answerable == wanted]
        rng.shuffle(members)
        offset = sum(len(g) for g in groups)
        for j, index in enumerate(members):
            groups[(j + offset) % k].append(index)
    return groups


def group_of(record: Record, grouping: str) -> str:
    if grouping == "thread":
        return record.thread or record.id
    if grouping == "section":
        return record.section or record.id
    return record.id


def folds(records: Sequence[Record], k: int, seed: int = 0, grouping: str = "case") -> list[list[int]]:
    """Stratified and grouped: the cases of one group (a thread, a gold section) always share a fold, the groups
    of answerable and of unanswerable cases are dealt out separately, each to the fold that has fewest cases of
    its kind, so every fold has both and no group is split."""
    if grouping == "case":  # every case its own group: dealt round-robin, as before grouping existed
        return _dealt(records, k, seed)
    members: dict[str, list[int]] = {}
    for i, record in enumerate(records):
        members.setdefault(group_of(record, grouping), []).append(i)
    parts: list[list[int]] = [[] for _ in range(k)]
    rng = random.Random(seed)
    for wanted in (True, False):
        groups = [g for g in members.values() if records[g[0]].answerable == wanted]
        rng.shuffle(groups)
        groups.sort(key=len, reverse=True)  # big groups first, then the small ones even the folds out
        for group in groups:
            target = min(range(k), key=lambda f: (sum(records[i].answerable == wanted for i in parts[f]), len(parts[f]), f))
            parts[target].extend(group)
    return parts


def score(records: Sequence[Record], refused: Sequence[bool], ranks: Sequence[int | None] | None = None,
          ) -> dict[str, float | None]:
    """R@k over the answerable cases (a refused one is a miss), share of unanswerable ones refused,
    share of answerable ones refused. ``ranks``: the gold ranks after the decision (default: as retrieved)."""
    ranks = [r.rank for r in records] if ranks is None else ranks
    positives = [(rank, no) for r, rank, no in zip(records, ranks, refused, strict=True) if r.answerable]
    negatives = [no for r, no in zip(records, refused, strict=True) if not r.answerable]

    def recall(k: int) -> float | None:
        if not positives:
            return None
        return sum(rank is not None and rank < k and not no for rank, no in positives) / len(positives)

    return {
        "R@1": recall(1), "R@3": recall(3), "R@5": recall(5),
        "negatives": sum(negatives) / len(negatives) if negatives else None,
        "false_no_match": sum(no for _, no in positives) / len(positives) if positives else None,
    }


def unrecognised(record: Record) -> Record:
    """The record as it would be if no failure family had been recognised (an unseen failure)."""
    return replace(record, candidates=tuple(replace(c, family=0.0, platform=0.0) for c in record.candidates))


def cross_validate(by_mode: dict[str, list[Record]], k: int, seed: int = 0,
                   features: Sequence[str] = FEATURES, training: Sequence[Record] = (), group: str = "case",
                   answers: Callable[[list[list[int]], list[AnswerabilityModel]], tuple[list[bool], list[int | None]]]
                   | None = None) -> dict[str, Any]:
    """Per mode: every fold's figures, their mean and the worst fold; the pooled held-out figures.

    "hybrid, unseen" scores the same fitted models on held-out unanswerable cases stripped of their
    failure family: every unanswerable case of the set was caught by a family written for its kind,
    a new one will not be, so this row is the honest estimate for failures nobody catalogued.
    ``training``: records added to every fold's fit and never scored (the training reports). ``answers``: given the
    folds and their models, (refused, gold rank) per case from the whole answer (evaluation.crossval_answers): the
    "answers" row."""
    hybrid = by_mode["hybrid"]
    parts = folds(hybrid, k, seed, group)
    report: dict[str, Any] = {"k": k, "seed": seed, "group": group, "cases": len(hybrid),
                              "answerable": sum(r.answerable for r in hybrid), "training_reports": len(training), "modes": {}}
    rows = {"hybrid": hybrid, "hybrid, unseen": [r if r.answerable else unrecognised(r) for r in hybrid]}
    rows.update((mode, records) for mode, records in by_mode.items() if mode != "hybrid")
    models = [fit([hybrid[i] for i in range(len(hybrid)) if i not in set(held)] + list(training), features)
              for held in parts]
    report["calibration"] = calibration(hybrid, parts, models)
    for mode, records in rows.items():
        refused = [r.no_hits for r in records]  # a plain baseline refuses only when it found nothing
        ranks = [r.rank for r in records]
        if mode.startswith("hybrid"):
            for held_out, model in zip(parts, models, strict=True):
                for i in held_out:
                    refused[i], ranks[i] = records[i].decided(model)
        report["modes"][mode] = _figures(records, parts, refused, ranks)
    if answers is not None:
        report["modes"]["answers"] = _figures(hybrid, parts, *answers(parts, models))
    return report


def _figures(records: Sequence[Record], parts: Sequence[Sequence[int]], refused: Sequence[bool],
             ranks: Sequence[int | None]) -> dict[str, Any]:
    """Each fold's figures, their mean and worst, the pooled ones, and the pooled ones per language and document."""
    per_fold = [score([records[i] for i in held], [refused[i] for i in held], [ranks[i] for i in held]) for held in parts]
    return {
        "folds": per_fold,
        "mean": {m: _mean([f[m] for f in per_fold]) for m in METRICS},
        "worst": {m: _worst(m, [f[m] for f in per_fold]) for m in METRICS},
        "pooled": score(records, refused, ranks),
        "by_lang": _pooled_by(records, refused, ranks, lambda r: r.lang),
        "by_document": _pooled_by(records, refused, ranks, lambda r: r.document if r.answerable else ""),
    }


CONFIDENCE_BINS = (0.0, 0.5, 0.75, 0.9, 1.01)  # 0.75: the weak-match line the answer states (guidance.json)


def calibration(records: Sequence[Record], parts: Sequence[Sequence[int]], models: Sequence[Any]) -> list[dict[str, Any]]:
    """How often the held-out section traindoc answers with is right, by the confidence it stated: per bin, the
    answered cases, the share whose first section is a gold one (unanswerable cases count as wrong), and the mean
    stated confidence. A calibrated model's share is close to its mean confidence."""
    judged = [(records[i], model) for held_out, model in zip(parts, models, strict=True) for i in held_out]
    stated = [(model.decide(found)[1], right) for model, found, right in _answered(judged)]
    rows = []
    for low, high in zip(CONFIDENCE_BINS, CONFIDENCE_BINS[1:], strict=False):
        inside = [(p, right) for p, right in stated if low <= p < high]
        if inside:
            rows.append({"bin": f"{low:.2f}-{min(high, 1.0):.2f}", "answered": len(inside),
                         "right": round(sum(right for _, right in inside) / len(inside), 3),
                         "stated": round(sum(p for p, _ in inside) / len(inside), 3)})
    return rows


def _pooled_by(records: Sequence[Record], refused: Sequence[bool], ranks: Sequence[int | None],
               key: Any) -> dict[str, dict[str, float | None]]:
    """The pooled held-out figures of each part (a language, a seed document), with its case count."""
    parts: dict[str, list[int]] = {}
    for i, record in enumerate(records):
        if key(record):
            parts.setdefault(key(record), []).append(i)
    return {name: score([records[i] for i in members], [refused[i] for i in members], [ranks[i] for i in members])
            | {"n": float(len(members))} for name, members in sorted(parts.items())}


def _mean(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None


def _worst(metric: str, values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    if not present:
        return None
    return max(present) if metric == "false_no_match" else min(present)


def render(report: dict[str, Any], folds_too: bool = False) -> str:
    lines = [
        f"{report['k']}-fold cross-validation (seed {report['seed']}, folds grouped by {report.get('group', 'case')}): "
        f"{report['cases']} cases, "
        f"{report['answerable']} answerable; the answerability model and its threshold are fitted on the other "
        f"folds each time (and on {report.get('training_reports', 0)} training reports, never scored)",
        "",
        f"{'':22}{'R@1':>7}{'R@3':>7}{'R@5':>7}{'neg':>7}{'falseNM':>9}",
    ]
    for mode, figures in report["modes"].items():
        labelled = [(label, figures[label]) for label in ("mean", "worst", "pooled")]
        if folds_too:
            labelled += [(f"fold {i}", row) for i, row in enumerate(figures["folds"], 1)]
        for label, row in labelled:
            cells = "".join(f"{'-' if row[m] is None else format(row[m], '.2f'):>{9 if m == 'false_no_match' else 7}}"
                            for m in METRICS)
            lines.append(f"{mode + ' ' + label:22}{cells}")
    for mode in ("hybrid", "answers"):
        for label in ("by_lang", "by_document"):
            for name, row in report["modes"].get(mode, {}).get(label, {}).items():
                cells = "".join(f"{'-' if row[m] is None else format(row[m], '.2f'):>{9 if m == 'false_no_match' else 7}}"
                                for m in METRICS)
                lines.append(f"{(mode + ' ' + name)[:21]:22}{cells}  (n={int(row['n'])}, pooled)")
    if report.get("calibration"):
        lines += ["", "calibration (held out; right = the first section is a gold one):"]
        lines += [f"  confidence {row['bin']}: {row['answered']} answered, right {row['right']:.2f}, stated {row['stated']:.2f}"
                  for row in report["calibration"]]
    lines += ["", "worst: the lowest fold (the highest for falseNM); pooled: every held-out answer scored together.",
              "hybrid, unseen: the same models, the held-out unanswerable cases without their failure family."]
    if "answers" in report["modes"]:
        lines.append("answers: every held-out report asked end to end with its fold's model (runbooks lead, the "
                     "documents' citations are scored, as score.py --files does).")
    return "\n".join(lines)


def records_for(troubleshooter: Any, cases: Sequence[dict[str, Any]], mode: str) -> list[Record]:
    from agent.core import Question
    retriever = troubleshooter.retriever()
    records = []
    for case in cases:
        question = Question(text=case["query"], id=case["id"], probes=False)
        text = question.search_text()
        result = retriever.search(text, k=troubleshooter.settings.top_k, mode=mode, among="documents")
        hits = list(result.hits)
        if result.promoted:  # the order retrieval ranked them in, before the shipped model moved one up
            hits.insert(result.promoted, hits.pop(0))
        cited = [(retriever.original(h.chunk.source), h.chunk.section) for h in hits]
        rank = first_hit(case, cited) if case["gold"] else None
        gold = case["gold"][0] if case["gold"] else None
        thread = str(case.get("source", ""))
        records.append(Record(str(case["id"]), bool(case["gold"]), rank, tuple(result.candidates), not hits,
                              str(case.get("lang", "")), thread,
                              f"{gold['file']} > {gold['heading']}" if gold else f"none: {thread or case['id']}",
                              gold["file"] if gold else "", question.needs_a_quote()))
    return records


def collect(troubleshooter: Any, paths: Path | Sequence[Path],
            modes: Sequence[str] = ("hybrid", "bm25", "dense")) -> dict[str, list[Record]]:
    cases = load_sets([paths] if isinstance(paths, Path) else paths)
    return {mode: records_for(troubleshooter, cases, mode) for mode in modes}


def training_records(troubleshooter: Any) -> list[Record]:
    """The training reports as retrieval sees them, or none when the index lacks the documents they name."""
    cases = load_cases(TRAINING_CASES)
    indexed = {Path(c.source).name for c in troubleshooter.retriever().snapshot.chunks}
    if any(gold["file"] not in indexed for case in cases for gold in case["gold"]):
        return []
    return records_for(troubleshooter, cases, "hybrid")


FITTED_COMMENT = (
    "Answerability weights (corpus/answerability.py): a logistic model per embedding model over evidence that is "
    "relative to the knowledge base, the probability threshold under which the answer is no_match, and the calibration "
    "(a, b) of the confidence stated, sigmoid(a * logit(p) + b), fitted on the fit's inner held-out folds. Written by "
    "`python -m evaluation.crossval --fit CASES.jsonl` from labelled cases (answerable or not); `traindoc eval --cv K` "
    "measures the same fitting on held-out folds; every fit also learns from evaluation/data/answerability_cases.jsonl. "
    "\"any\": no dense evidence, for a model named by the user."
)


def write_fitted(records: Sequence[Record], embed_model: str, target: Path) -> dict[str, Any]:
    """Fit on every case and store the weights, for this embedding model and, without the dense evidence
    (whose scale is the model's own), for any other model ("any")."""
    data = json.loads(target.read_text(encoding="utf-8")) if target.exists() else {"models": {}}
    data["_comment"] = FITTED_COMMENT
    data["models"][embed_model] = fit(records).to_json()
    data["models"]["any"] = fit(records, [f for f in FEATURES if not f.startswith("dense")]).to_json()
    models = ",\n".join(f"  {json.dumps(name)}: {json.dumps(spec)}" for name, spec in sorted(data["models"].items()))
    target.write_text(f'{{\n "_comment": {json.dumps(data["_comment"])},\n "models": {{\n{models}\n }}\n}}\n',
                      encoding="utf-8")
    return data


def main(argv: Sequence[str] | None = None) -> int:  # pragma: no cover - a maintainer's tool
    parser = argparse.ArgumentParser(description="fit the answerability weights on labelled cases")
    parser.add_argument("--fit", type=Path, required=True, metavar="FILE.jsonl")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[1] / "corpus" / "data" / "answerability.json")
    args = parser.parse_args(argv)
    from agent.core import build_troubleshooter

    troubleshooter = build_troubleshooter()
    records = collect(troubleshooter, args.fit, ("hybrid",))["hybrid"] + training_records(troubleshooter)
    write_fitted(records, troubleshooter.embedder().name, args.out)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
