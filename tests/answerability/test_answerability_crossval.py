"""Cross-validation on synthetic records: folds, the fit, the decision over the first sections, honesty."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

import evaluation.crossval as crossval
from corpus.answerability import FEATURES, AnswerabilityModel, Evidence
from evaluation.crossval import Record, cross_validate, fit, folds, score


def _records(n_pos: int = 30, n_neg: int = 10, seed: int = 0) -> list[Record]:
    """Answerable cases: known vocabulary, a quoted error shared, the section stands out; unanswerable:
    unknown vocabulary, nothing shared. Noisy, so the fit has something to do."""
    rng = random.Random(seed)
    records = []
    for i in range(n_pos + n_neg):
        yes = i < n_pos
        e = Evidence(
            ident_oov=min(1.0, max(0.0, rng.gauss(0.2 if yes else 0.9, 0.2))),
            word_oov=min(1.0, max(0.0, rng.gauss(0.4 if yes else 0.7, 0.1))),
            quoted_error=rng.random() if yes else rng.random() * 0.3,
            dense_margin=rng.gauss(0.02 if yes else -0.01, 0.01),
            agreement=rng.choice([2 / 3, 1.0]) if yes else rng.choice([1 / 3, 2 / 3]),
            family=rng.choice([0.0, 1.0]) if yes else rng.choice([0.0, -1.0]),
        )
        e = Evidence(**{**e.as_dict(), "unknown": e.ident_oov * e.word_oov})
        records.append(Record(f"c{i}", yes, 0 if yes else None, (e, Evidence(ident_oov=1.0, word_oov=1.0))))
    return records


def test_folds_are_stratified_and_cover_every_case_once():
    records = _records()
    parts = folds(records, 5)
    assert sorted(i for part in parts for i in part) == list(range(len(records)))
    for part in parts:
        assert sum(not records[i].answerable for i in part) == 2


def test_fit_learns_the_directions_of_the_evidence():
    model = fit(_records())
    weights = dict(zip(model.features, model.weights, strict=True))
    assert weights["ident_oov"] <= 0 and weights["word_oov"] <= 0 and weights["unknown"] <= 0
    assert weights["quoted_error"] >= 0 and weights["dense_margin"] >= 0 and weights["family"] >= 0
    assert 0.0 < model.threshold < 1.0


def test_fit_copes_with_a_fold_of_one_class():
    model = fit(_records(n_pos=8, n_neg=0))
    assert model.decide(_records(n_pos=1, n_neg=0)[0].candidates[0])[0]


def test_a_later_section_that_answers_leads_and_ranks_follow():
    yes, no = Evidence(quoted_error=1.0), Evidence(ident_oov=1.0)
    weights = tuple({"ident_oov": -5.0, "quoted_error": 5.0}.get(f, 0.0) for f in FEATURES)
    model = AnswerabilityModel(weights, 0.0, (0.0,) * len(FEATURES), (1.0,) * len(FEATURES), 0.5)
    assert Record("a", True, 1, (no, yes)).decided(model) == (False, 0)  # gold was second: now first
    assert Record("b", True, 0, (no, yes)).decided(model) == (False, 1)  # the first moves down one
    assert Record("c", True, 0, (no, no)).decided(model) == (True, None)


def test_score_counts_a_refused_answerable_case_as_a_miss():
    records = [Record("a", True, 0, ()), Record("b", True, 1, ()), Record("n", False, None, ())]
    figures = score(records, [True, False, True])
    assert figures["R@1"] == 0.0 and figures["R@3"] == 0.5
    assert figures["negatives"] == 1.0 and figures["false_no_match"] == 0.5


def _record_fits(monkeypatch) -> list[set[str]]:
    """The ids each fit is given, in order."""
    seen: list[set[str]] = []
    real_fit = crossval.fit

    def recording_fit(train, *args, **kwargs):
        seen.append({r.id for r in train})
        return real_fit(train, *args, **kwargs)

    monkeypatch.setattr(crossval, "fit", recording_fit)
    return seen


def test_nothing_held_out_is_ever_fitted_on(monkeypatch):
    records = _records()
    seen = _record_fits(monkeypatch)
    report = cross_validate({"hybrid": records, "bm25": records}, k=4)
    parts = folds(records, 4)
    assert len(seen) == 4
    for trained, held in zip(seen, parts, strict=True):
        assert not trained & {records[i].id for i in held}
    hybrid = report["modes"]["hybrid"]
    assert len(hybrid["folds"]) == 4 and set(report["modes"]) == {"hybrid", "hybrid, unseen", "bm25"}
    assert hybrid["worst"]["R@1"] <= hybrid["mean"]["R@1"]
    assert hybrid["worst"]["false_no_match"] >= hybrid["mean"]["false_no_match"]
    assert report["modes"]["bm25"]["pooled"]["negatives"] == 0.0  # a plain baseline refuses nothing it found


@pytest.mark.parametrize("k", [2, 5])
def test_separable_evidence_is_decided_well_on_held_out_folds(k):
    pooled = cross_validate({"hybrid": _records(60, 20)}, k=k)["modes"]["hybrid"]["pooled"]
    assert pooled["negatives"] >= 0.8 and pooled["false_no_match"] <= 0.1


def test_training_reports_join_every_fit_and_are_never_scored(monkeypatch):
    records, training = _records(), [replace(r, id=f"t{i}") for i, r in enumerate(_records(seed=1))]
    seen = _record_fits(monkeypatch)
    report = cross_validate({"hybrid": records}, k=4, training=training)
    assert report["training_reports"] == len(training) and report["cases"] == len(records)
    assert all({r.id for r in training} <= trained for trained in seen)
    scored = sum(len(folds(records, 4)[i]) for i in range(4))
    assert scored == len(records)


def test_training_reports_are_read_against_a_real_index_and_left_out_without_the_builtin_documents(
        shared_index, monkeypatch, tmp_path):
    from agent.core import build_troubleshooter
    from common.settings import Settings

    monkeypatch.setenv("TRAINDOC_DATA_DIR", str(shared_index))
    records = crossval.training_records(build_troubleshooter(Settings.from_env()))
    cases = crossval.TRAINING_CASES.read_text(encoding="utf-8").splitlines()
    assert len(records) == len(cases)
    assert sum(r.answerable for r in records) > 10 and sum(not r.answerable for r in records) > 10

    class OtherIndex:  # an index of somebody's own runbooks: the reports' labels mean nothing there
        def retriever(self):
            class Snapshot:
                chunks = [type("Chunk", (), {"source": "team/runbook.md"})()]
            return type("R", (), {"snapshot": Snapshot()})()

    assert crossval.training_records(OtherIndex()) == []


def test_grouped_folds_never_split_a_thread_or_a_section() -> None:
    from evaluation.crossval import Record, folds, group_of

    records = [Record(f"c{i}", i % 3 != 0, 0 if i % 3 else None, (), lang="en", thread=f"t{i // 4}",
                      section=f"doc > h{i // 6}" if i % 3 else f"none: t{i // 4}", document="doc")
               for i in range(48)]
    for grouping in ("thread", "section"):
        parts = folds(records, 4, seed=3, grouping=grouping)
        assert sorted(i for part in parts for i in part) == list(range(48))  # every case in exactly one fold
        home = {}
        for f, part in enumerate(parts):
            for i in part:
                assert home.setdefault(group_of(records[i], grouping), f) == f, (grouping, i)
        assert all(any(records[i].answerable for i in part) and any(not records[i].answerable for i in part)
                   for part in parts)  # still both kinds in every fold


def test_calibration_bins_hold_every_answered_held_out_case():
    records = _records(60, 20)
    report = cross_validate({"hybrid": records}, k=4)
    rows = report["calibration"]
    assert rows and all(0.0 <= row["right"] <= 1.0 and 0.0 <= row["stated"] <= 1.0 for row in rows)
    answered = sum(row["answered"] for row in rows)
    pooled = report["modes"]["hybrid"]["pooled"]
    refused_negatives = round(pooled["negatives"] * 20)
    refused_positives = round(pooled["false_no_match"] * 60)
    assert answered == 80 - refused_negatives - refused_positives
    assert rows[-1]["right"] >= rows[0]["right"]  # separable evidence: surer answers are right more often
    assert "calibration" in crossval.render(report)
