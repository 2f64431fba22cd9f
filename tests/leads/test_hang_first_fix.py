"""Issue 36 point 4: a hang leads with the command that finds its cause. A pasted collective timeout whose ranks 0-2
timed out names rank 3 (the one the others waited for) and, since nothing says what rank 3 was doing, its first fix
is the command that takes its stack, said for that rank, not a sentence; no quote is quoted twice. Run as a user
runs it: `ask --json` over the shared index."""

from __future__ import annotations

import json
from typing import Any

import pytest

pytestmark = pytest.mark.usefixtures("use_shared_index")


def _timeout(rank: int) -> str:
    return (f"[rank{rank}]:[E ProcessGroupNCCL.cpp:632] [Rank {rank}] Watchdog caught collective operation timeout: "
            "WorkNCCL(SeqNum=7312, OpType=ALLGATHER, NumelIn=4096, NumelOut=16384, Timeout(ms)=1800000) ran for "
            "1800081 milliseconds before timing out.")


def test_the_rank_the_others_waited_for_is_named_and_its_stack_comes_first(cli: Any) -> None:
    question = "our 4-GPU run (torchrun --nproc-per-node 4) dies after half an hour:\n" + "\n".join(map(_timeout, (0, 1, 2)))
    done = cli("ask", "--json", "--no-probes", question)
    assert done.returncode == 0, done.stderr[-600:]
    answer = json.loads(done.stdout)
    assert "rank 3" in answer["verdict"]["where"]
    assert "traindoc hang" in answer["verdict"]["fix"] or "py-spy dump" in answer["verdict"]["fix"]
    fixes = answer["answer"][answer["answer"].index("### Fixes"):]
    assert "rank 3" in fixes.split("\n1. ")[0]  # the note above the fixes says whose stack to take
    assert "> >" not in answer["answer"]
