"""The job reader's sentences come from the phrase book: no Chinese is written in the code that says them, and
where another module still writes its English itself (jobs.consequences, jobs.stacks, jobs.hang,
jobs.flight_recorder, jobs.stack_hints), the phrase's English says the same, so that module can say it from the
book."""

from __future__ import annotations

import itertools
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from common.language import CJK, say
from jobs import consequences, hang, hang_wording, stack_hints, stacks, wording
from jobs.diagnosis import JobDiagnosis, ranks_text
from jobs.events import Event
from jobs.flight_recorder import describe
from jobs.places import RankStack
from jobs.pyspy import Frame, classify

ROOT = Path(__file__).resolve().parents[2]
SAYERS = ["jobs/wording.py", "jobs/hang_wording.py", *(f"jobs/verdicts/{p.name}" for p in (ROOT / "jobs/verdicts").glob("*.py")),
          "ui/hang_cli.py", "ui/slack_replies.py"]
SITE = "/venv/lib/python3.11/site-packages/"
C10D = SITE + "torch/distributed/distributed_c10d.py"


@pytest.mark.parametrize("path", SAYERS)
def test_no_sentence_is_written_in_code(path: str) -> None:
    text = (ROOT / path).read_text(encoding="utf-8")
    assert not CJK.search(text), f"{path}: Chinese belongs in common/data/phrases/: {CJK.search(text)}"


def test_ranks_are_named_as_the_diagnosis_names_them() -> None:
    for ranks in [[], [3], [0, 2], [1, 2, 3], [0, 1, 2, 5], [0, 1, 2, 3], list(range(64)), [0, 2, 4, 6, 8, 10, 12],
                  [0, 1, 2, 3, 7, 9, 10, 11, 12]]:
        assert wording.rank_names(ranks, "en") == ranks_text(ranks)
    assert wording.rank_names([0, 1, 2, 5], "zh") == "rank 0、1、2 和 5"
    assert wording.rank_names([0, 2], "zh", "task") == "Slurm 任务 0 和 2"


def _symptom(order: int, category: str, rank: int | None, call: str | None = "all_reduce") -> Event:
    return Event(order, "symptom", category, "", "", rank, where="train.py:9" if call else None, call=call)


def test_the_consequences_english_is_the_phrase_books() -> None:
    events = [_symptom(0, "collective_timeout", 0), _symptom(1, "collective_timeout", 2), _symptom(2, "peer_closed", 3, None),
              _symptom(3, "killed_by_launcher", 1, None), _symptom(4, "killed_by_launcher", 2, None),
              _symptom(5, "process_abort", 3, None), _symptom(6, "nccl_warning", None, None)]
    for count in range(1, len(events) + 1):
        for chosen in itertools.combinations(events, count):
            said = consequences.consequences_of(list(chosen), None)
            groups = consequences.symptom_groups(list(chosen), None)
            ours = [wording.symptom(category, ranks, where, "en") for category, ranks, where in groups]
            assert ours == [s.summary for s in said]
            for rank in (None, 1):
                assert wording.why(rank, ours, False, "en") == consequences.why(rank, said)


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
}


@pytest.mark.parametrize("name", JOBS)
def test_a_hung_jobs_english_is_the_phrase_books(name: str) -> None:
    snapshot = stacks.analyse_stacks(JOBS[name], world_size=4)
    groups = snapshot.groups
    for group in groups:
        assert hang_wording.place(group.place, "en") == group.place.text()
        assert hang_wording.phrase(group, "en") == stacks._phrase(group)
        if group.ranks and group.place.kind == "elsewhere":
            assert hang_wording.look_at(group, "en") == stacks._look_at(group)
    diagnosis = snapshot.diagnosis
    assert diagnosis.root_cause is not None and diagnosis.root_cause.summary.startswith(hang_wording.summary(groups, "en"))
    by_kind = {kind: sorted(r for g in groups if g.place.kind == kind for r in g.ranks) for kind in ("collective", "elsewhere", "device")}
    if name == "straggler":
        assert diagnosis.why_consequences == hang_wording.straggler(by_kind["collective"], by_kind["elsewhere"], "en")
    if name == "gpu":
        assert diagnosis.why_consequences == hang_wording.gpu_straggler(by_kind["device"], by_kind["elsewhere"], "en")
    if name == "init":
        waiting = sorted(r for g in groups if g.place.kind == "rendezvous" for r in g.ranks)
        assert diagnosis.why_consequences == hang_wording.before_init(waiting, by_kind["elsewhere"], "dist.init_process_group", "en")
    if name == "mismatch":
        majority = max((g for g in groups if g.place.kind == "collective"), key=lambda g: len(g.ranks))
        assert diagnosis.why_consequences == hang_wording.mismatch(majority.ranks, majority.place, "en")


def test_a_label_or_source_in_english_reads_back_as_itself() -> None:
    for text in ("backward, where DDP's gradient all-reduce waits", "DDP's gradient all-reduce in backward", "a collective",
                 "FSDP's dist.all_gather_into_tensor", "torchrun waits for its rendezvous", "no Python frame", "dist.barrier",
                 "a CUDA synchronisation (waiting on the GPU)", "process 11 exited before its stack could be read"):
        assert hang_wording.label(text, "en") == text
    for text in ("py-spy on node1", "debug server http://h:25999", "Flight Recorder dumps in fr/", "4 ranks behind http://h:1",
                 "ranks of 10.0.0.1:29500", "torchrun (pid 100)"):
        assert hang_wording.source(text, "en") == text
    assert hang_wording.source("4 ranks behind http://h:1") == "http://h:1 后面的 4 个 rank"
    assert hang_wording.label("x y waits for its rendezvous") == "x y waits for its rendezvous", "one word names a launcher"


def test_the_hints_english_is_jobs_stack_hints() -> None:
    assert [say(key, "en") for key in hang_wording.HINTS] == [
        stack_hints.FR_HINT, stack_hints.NCCL_HINT, stack_hints.DETAIL_HINT, stack_hints.NATIVE_HINT, stack_hints.NODES_HINT,
        *stack_hints.RENDEZVOUS_EVIDENCE]


def test_the_launchers_english_is_jobs_hangs() -> None:
    diagnosis = JobDiagnosis("hang", None)
    hang._then_stop(diagnosis, "torchrun", 100)
    assert diagnosis.next_evidence == [hang_wording.then_stop("torchrun", 100, "en")]
    for options, inner in (({"--nnodes": "2", "--rdzv-endpoint": "10.0.0.1:29500"}, True), ({}, False)):
        launcher = SimpleNamespace(kind="torchrun", pid=100, cmdline="torchrun train.py", option=options.get)
        job = SimpleNamespace(launcher=launcher, describe=lambda: "torchrun (pid 100)")
        frames = _frames(("_store_based_barrier", SITE + "torch/distributed/elastic/rendezvous/static_tcp_rendezvous.py", 50))
        root = hang._no_workers(job, frames if inner else (), "node1", "py-spy on node1").diagnosis.root_cause
        assert root is not None
        assert root.summary == hang_wording.no_workers("torchrun", 100, options.get("--nnodes"), options.get("--rdzv-endpoint"),
                                                       frames[0].text() if inner else None, "en")


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
def test_a_flight_recorder_findings_english_is_the_phrase_books(data: dict[str, Any]) -> None:
    finding = describe(data)
    assert hang_wording.flight_recorder(finding, "en") == finding.summary
