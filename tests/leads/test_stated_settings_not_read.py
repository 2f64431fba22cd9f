"""A variable the asker says they set, that upstream does not read or does not define (advice/data/upstream_names.json),
is said above the fixes in the asker's language: "You set NCCL_TIMEOUT: nothing reads it ..." (issue 36 point 3)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agent.lead import settings_not_read


def test_a_variable_nothing_reads_and_one_nccl_does_not_define_are_said():
    notes = settings_not_read(["I already set NCCL_TIMEOUT=7200 and export NCCL_GHOST_RING=1 but it still times out"], "en")
    assert len(notes) == 2
    assert notes[0].startswith("> You set **NCCL_TIMEOUT**:") and "init_process_group(timeout=" in notes[0]
    assert notes[1].startswith("> You set **NCCL_GHOST_RING**, which NCCL does not define")


def test_a_known_variable_or_one_only_named_is_not_said():
    assert settings_not_read(["export NCCL_P2P_DISABLE=1 already set, still hangs"], "en") == []
    assert settings_not_read(["does NCCL_TIMEOUT change the watchdog timeout?"], "en") == []  # named, not set


def test_the_note_is_in_chinese_for_a_chinese_asker():
    (note,) = settings_not_read(["但是我已经设置了 NCCL_TIMEOUT=3600，还是报超时"], "zh")
    assert note.startswith("> 你设置了 **NCCL_TIMEOUT**：") and "init_process_group" in note


@pytest.mark.usefixtures("use_shared_index")
def test_the_answer_says_it_above_the_fixes(cli: Any):
    done = cli("ask", "--json", "--no-probes", "I already set NCCL_TIMEOUT=7200 but still: Watchdog caught collective "
               "operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE) ran for 600034 milliseconds before timing out.")
    assert done.returncode == 0, done.stderr[-600:]
    answer = json.loads(done.stdout)
    assert answer["lead"]["kind"] == "collective_timeout"
    text = answer["answer"]
    assert "> You set **NCCL_TIMEOUT**:" in text
    assert text.index("> You set **NCCL_TIMEOUT**") > text.index("### Fixes")


@pytest.mark.usefixtures("use_shared_index")
def test_the_brief_answer_keeps_what_the_asker_set_or_already_runs_with(cli: Any):
    done = cli("ask", "--no-probes", "我已经设置了 NCCL_TIMEOUT=3600，还是报 Watchdog caught collective operation timeout")
    assert done.returncode == 0, done.stderr[-600:]
    assert "你设置了 NCCL_TIMEOUT" in done.stdout and len(done.stdout.splitlines()) <= 40
    kv = ("vllm serve with --gpu-memory-utilization 0.95 still fails: ValueError: No available memory for the cache "
          "blocks. Try increasing gpu_memory_utilization when initializing the engine.")
    done = cli("ask", "--no-probes", kv)
    assert done.returncode == 0, done.stderr[-600:]
    assert "You already run with `gpu_memory_utilization` = `0.95`" in done.stdout
