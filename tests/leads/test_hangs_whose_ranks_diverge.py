"""Issue 36 point 1, what tells a collective mismatch from a plain collective timeout in a hang with no debug flag on
(runbooks/data/hang_stages.json, the collective_mismatch row; its runbook's 'How to recognise it'): the ranks' stacks
in different collectives, generate() under ZeRO-3 or FSDP, a rank that stops early on its own metrics, batches that
can carry no targets. `ask --json` over the real index (tests/conftest.py)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.clikit import ask_json, lead_kind

pytestmark = pytest.mark.usefixtures("use_shared_index")


@pytest.mark.parametrize("question", [
    "py-spy shows rank 0 in all_gather while the other ranks sit in all_reduce; the job is stuck",
    "DDP hangs at a random epoch with shuffle=True; a few images in my dataset have no bounding boxes",
    "多卡训练卡死了，数据里有一些空样本（没有标注）",
    "model.generate() hangs with DeepSpeed ZeRO-3 on 8 GPUs when do_sample=True",
    "training freezes in dist.barrier() at the end; I use an early stopping callback",
])
def test_a_hang_whose_ranks_take_different_paths_is_a_collective_mismatch(cli: Any, question: str) -> None:
    answer = ask_json(cli, question)
    assert lead_kind(answer) == "collective_mismatch", answer["lead"]
    assert answer["lead"]["rule"] == "hang_stage"


@pytest.mark.parametrize(("question", "fix"), [
    ("model.generate() hangs with DeepSpeed ZeRO-3 on 8 GPUs", "synced_gpus=True"),
    ("多卡训练卡死了，数据里有一些图片没有目标", "has_boxes"),
])
def test_the_first_fix_is_the_one_the_hang_calls_for(cli: Any, question: str, fix: str) -> None:
    answer = ask_json(cli, question)
    assert fix in answer["verdict"]["fix"], answer["verdict"]["fix"]


def test_a_mismatch_that_calls_for_no_fix_keeps_the_runbook_s_order(cli: Any) -> None:
    answer = ask_json(cli, "training freezes in dist.barrier() at the end; I use an early stopping callback")
    assert "bincount" in answer["verdict"]["fix"]  # fix 1: every rank issues the same collectives


def test_every_fix_a_hang_stage_calls_for_is_a_fix_of_its_runbook_in_both_languages() -> None:
    import json
    from pathlib import Path

    from runbooks.catalog import runbooks

    rows = json.loads((Path(__file__).parents[2] / "runbooks/data/hang_stages.json").read_text(encoding="utf-8"))
    called = [(row["kind"], row["fix"]) for row in rows["stages"] if row.get("fix")]
    assert called
    for kind, fix in called:
        for lang in ("en", "zh"):
            fixes = runbooks()[(kind, lang)].items["fixes"]
            assert sum(fix in "\n".join([item.text, *item.code]) for item in fixes) == 1, (kind, lang, fix)


@pytest.mark.parametrize(("question", "kind"), [
    ("the 16-GPU training job hangs in all_reduce after two hours", "collective_timeout"),
    ("多卡训练卡住了，卡在 backward", "collective_timeout"),
])
def test_a_hang_that_names_only_where_it_waits_stays_a_collective_timeout(cli: Any, question: str, kind: str) -> None:
    assert lead_kind(ask_json(cli, question)) == kind


def test_batches_without_targets_name_no_mismatch_where_nothing_hangs(cli: Any) -> None:
    answer = ask_json(cli, "loss becomes nan on batches that have no bounding boxes")
    assert lead_kind(answer) != "collective_mismatch"
