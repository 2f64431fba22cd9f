"""Stacks a user recorded (py-spy's text dump, faulthandler's) given to `ask --log` are read as `traindoc hang` reads
live ones: where each process waits, not "no document answers this" or a rendezvous wait."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from clikit import CliRunner

from agent.logs import read_log
from jobs.recorded_stacks import looks_like_dump

DATA = Path(__file__).parent / "data"
GPU_WAIT = DATA / "py-spy-dump-native-waiting-on-gpu.txt"  # real: one rank behind its own kernel on an H100

TWO_PROCESSES = """Process 4101: /usr/bin/python3 -u train.py
Python v3.11.7 (/usr/bin/python3.11)

Thread 4101 (idle): "MainThread"
    barrier (torch/distributed/distributed_c10d.py:4811)
    wrapper (torch/distributed/c10d_logger.py:81)
    train (train.py:40)
    <module> (train.py:55)

Process 4102: /usr/bin/python3 -u train.py
Python v3.11.7 (/usr/bin/python3.11)

Thread 4102 (active): "MainThread"
    read (shards.py:17)
    load_shard (train.py:21)
    train (train.py:38)
    <module> (train.py:55)
"""


def test_a_gpu_wait_dump_is_read_as_a_cuda_sync_it_cannot_place() -> None:
    reading = read_log(GPU_WAIT, "why is my job stuck")
    root = reading.diagnosis.root_cause  # type: ignore[union-attr]
    assert reading.diagnosis.kind == "hang" and root.category != "rendezvous", root  # type: ignore[union-attr]
    assert "CUDA synchronisation" in root.summary and "train.py:19" in root.summary


def test_two_processes_one_in_a_barrier_one_loading_data_name_the_straggler(tmp_path: Path) -> None:
    dump = tmp_path / "stacks.txt"
    dump.write_text(TWO_PROCESSES, encoding="utf-8")
    root = read_log(dump, "training hangs").diagnosis.root_cause  # type: ignore[union-attr]
    assert root.category == "straggler" and root.rank == 1, root
    assert root.where == "shards.py:17" and "rank 1 is in read (shards.py:17)" in root.summary  # its own file:line


def test_a_log_that_quotes_one_stack_line_is_no_dump() -> None:
    lines = ["step 10 loss 2.1", "Process 12: exited", "RuntimeError: CUDA error: out of memory"]
    assert not looks_like_dump(lines)


@pytest.mark.usefixtures("use_shared_index")
def test_ask_with_a_recorded_dump_answers_with_the_stacks(cli: CliRunner) -> None:
    result = cli("ask", "--json", "--no-probes", "--log", str(GPU_WAIT), "why is my job stuck")
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    assert answer["diagnosis"]["kind"] == "hang"
    assert "no document answers this" not in answer["answer"]
