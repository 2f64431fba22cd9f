"""The job reader's sentences come from the phrase book: no sentence (and no Chinese punctuation) is written in the
code that says them, every place label a stack can show is a phrase, and where two functions compose the same
sentence (jobs.flight_recorder.describe from the analyzer's output, jobs.hang_wording from the finding), they say
the same."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from common.language import CJK, say
from jobs import hang_wording, stacks, wording
from jobs.diagnosis import ranks_text
from jobs.flight_recorder import describe
from jobs.places import RankStack
from jobs.pyspy import Frame, classify

ROOT = Path(__file__).resolve().parents[2]
SAYERS = ["jobs/wording.py", "jobs/hang_wording.py", "jobs/consequences.py", "jobs/stacks.py", "jobs/hang.py",
          "jobs/stack_hints.py", "jobs/flight_recorder.py", "jobs/timeline.py", "jobs/places.py", "jobs/framework_waits.py",
          *(f"jobs/verdicts/{p.name}" for p in (ROOT / "jobs/verdicts").glob("*.py"))]
SITE = "/venv/lib/python3.11/site-packages/"
C10D = SITE + "torch/distributed/distributed_c10d.py"


@pytest.mark.parametrize("path", SAYERS)
def test_no_sentence_is_written_in_code(path: str) -> None:
    text = (ROOT / path).read_text(encoding="utf-8")
    assert not CJK.search(text), f"{path}: Chinese belongs in common/data/phrases/: {CJK.search(text)}"
    assert not any(mark in text for mark in "；：（），、"), f"{path}: Chinese punctuation belongs in common/data/phrases/"


def test_ranks_are_named_as_the_diagnosis_names_them() -> None:
    for ranks, english in [([], "no rank"), ([3], "rank 3"), ([0, 2], "ranks 0 and 2"), ([1, 2, 3], "ranks 1, 2 and 3"),
                           ([0, 1, 2, 5], "ranks 0, 1, 2 and 5"), ([0, 1, 2, 3], "ranks 0-3"), (list(range(64)), "ranks 0-63"),
                           ([0, 2, 4, 6, 8, 10, 12], "ranks 0,2,4,6,8,10,12"),
                           ([0, 1, 2, 3, 7, 9, 10, 11, 12], "ranks 0-3,7,9-12")]:
        assert ranks_text(ranks) == wording.rank_names(ranks, "en") == english
    assert wording.rank_names([0, 1, 2, 5], "zh") == "rank 0、1、2 和 5"
    assert wording.rank_names([0, 2], "zh", "task") == "Slurm 任务 0 和 2"


def _frames(*spec: tuple[str, str, int]) -> tuple[Frame, ...]:
    return tuple(Frame(name, path, line, "native" if line == 0 else classify(path)) for name, path, line in spec)


def _in(collective: str, line: int) -> tuple[Frame, ...]:
    return _frames((collective, C10D, 100), ("train_step", "/job/train.py", line), ("<module>", "/job/train.py", 90))


SHARD = _frames(("load_shard", "/job/train.py", 29), ("main", "/job/train.py", 70))
SYNC = _frames(("synchronize", SITE + "torch/cuda/__init__.py", 1000), ("main", "/job/train.py", 19))
BACKWARD = _frames(("_engine_run_backward", SITE + "torch/autograd/graph.py", 979),
                   ("backward", SITE + "torch/autograd/__init__.py", 395), ("main", "/job/train.py", 52))
FSDP = _frames(("all_gather_into_tensor", C10D, 3900),
               ("foreach_all_gather", SITE + "torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py", 200),
               ("forward", "/job/model.py", 40))
JOBS = {
    "straggler": [RankStack(0, _in("barrier", 77), pid=10), RankStack(1, SHARD, pid=11), RankStack(2, _in("barrier", 77))],
    "mismatch": [RankStack(0, _in("barrier", 77)), RankStack(1, _in("all_reduce", 80)), RankStack(2, _in("barrier", 77))],
    "gpu": [RankStack(0, SYNC), RankStack(1, SHARD), RankStack(2, SYNC)],
    "init": [RankStack(0, _in("init_process_group", 12)), RankStack(1, SHARD, pid=11), RankStack(2, SHARD)],
    "backward": [RankStack(r, BACKWARD) for r in range(3)],
    "fsdp": [RankStack(0, FSDP), RankStack(1, FSDP)],
    "unreadable": [RankStack(0, _in("barrier", 58)), RankStack(1, error="process 11 exited before its stack could be read")],
    "frameless": [RankStack(0, ()), RankStack(1, _in("barrier", 5))],
    "reducer": [RankStack(0, _frames(("c10d::Reducer::finalize_backward", "libtorch.so", 0)) + BACKWARD), RankStack(1, SHARD)],
    "deepspeed": [RankStack(0, _frames(("_engine_run_backward", SITE + "torch/autograd/graph.py", 979),
                                       ("backward", SITE + "deepspeed/runtime/engine.py", 2000), ("main", "/job/train.py", 52)))],
    "native_wait": [RankStack(0, _frames(("c10d::ProcessGroupNCCL::WorkNCCL::wait", "libtorch.so", 0), ("step", "/job/train.py", 5)))],
}


@pytest.mark.parametrize("name", JOBS)
def test_every_place_label_is_a_phrase_or_a_name(name: str) -> None:
    """A label traindoc words (DDP's all-reduce, a CUDA sync) carries its phrase, so each language says it from the
    book; a label without one is a name from the stack (dist.barrier) or a quoted error, the same in every language."""
    for group in stacks.analyse_stacks(JOBS[name], world_size=4).groups:
        place = group.place
        if place.phrase is None:
            assert " " not in place.label or "exited" in place.label, place.label
            continue
        key, values = place.phrase
        assert place.label == say(key, "en", **dict(values))
        assert hang_wording.label(place, "zh") == say(key, "zh", **dict(values)) != place.label
        assert hang_wording.place(place, "en") == place.text()


def test_a_source_in_english_reads_back_as_itself() -> None:
    for text in ("py-spy on node1", "debug server http://h:25999", "Flight Recorder dumps in fr/", "4 ranks behind http://h:1",
                 "ranks of 10.0.0.1:29500", "torchrun (pid 100)"):
        assert hang_wording.source(text, "en") == text
    assert hang_wording.source("4 ranks behind http://h:1", "zh") == "http://h:1 后面的 4 个 rank"


def _op(rank: int, state: str, name: str = "nccl:all_reduce", seq: int = 4, where: str | None = None) -> dict[str, Any]:
    return {"rank": rank, "name": name, "seq": seq, "state": state, "group": "default_pg", "where": where}


FLIGHT_RECORDS = [
    {"ranks": [0, 1, 2], "last": [_op(0, "scheduled"), _op(1, "scheduled"), _op(2, "completed", seq=3)],
     "first_bad": {"name": "nccl:all_reduce", "seq": 4, "group": "default_pg", "missing_ranks": [2]}},
    {"ranks": [0, 1, 2], "last": [_op(0, "scheduled"), _op(1, "scheduled"), _op(2, "scheduled", name="nccl:broadcast")],
     "first_bad": {"name": "nccl:all_reduce", "seq": 4, "group": "default_pg", "mismatched": {"2": "nccl:broadcast"}}},
    {"ranks": [0], "last": [_op(0, "scheduled", where="train.py:18")]},
    {"ranks": [0, 1], "last": [_op(0, "scheduled"), _op(1, "scheduled")]},
    {"ranks": [0, 1], "last": [_op(0, "started"), _op(1, "scheduled")]},
    {"ranks": [0, 1], "last": [_op(0, "completed"), _op(1, "completed")]},
]


@pytest.mark.parametrize("data", FLIGHT_RECORDS)
def test_a_flight_recorder_finding_is_said_alike_from_its_fields(data: dict[str, Any]) -> None:
    finding = describe(data)
    assert hang_wording.flight_recorder(finding, "en") == finding.summary
