"""`traindoc check nccl` on this machine's CPUs: real torchrun jobs of gloo processes on 127.0.0.1.

A healthy run passes with every operation completed; a wrong GLOO_SOCKET_IFNAME, a rank killed mid-check (SIGKILL
from the test, its pid read from the progress files) and a rank that stops answering are each named, with the
registry's kind; after every run no process of it is left (read from /proc by the test itself)."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

import pytest
from checkkit import events, processes_holding, wait_for

from checks import collectives
from checks.run import Plan, Started, run_check
from checks.variables import Setting

SIZES = [1024, 65536]


def _plan(timeout_s: float = 30.0, **settings: str) -> Plan:
    return Plan("gloo", 2, SIZES, timeout_s, iters=2,
                settings={name: Setting(name, value, "test") for name, value in settings.items()})


def _nothing_left(result) -> None:
    assert result.left_behind == []
    assert processes_holding(result.run_id) == []
    assert not Path(f"/proc/{result.launcher_pid}").exists() or \
        Path(f"/proc/{result.launcher_pid}/stat").read_text().split(") ")[1][0] == "Z"


def test_a_healthy_two_process_gloo_run_passes_with_every_operation_completed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(collectives.FAULT_VARIABLE, raising=False)
    started: list[Started] = []
    result = run_check(_plan(), on_start=started.append)
    assert result.outcome.passed, (result.outcome, result.launcher_tail[-10:])
    assert result.outcome.rule == "passed" and result.outcome.kind is None
    assert [(r.op, r.bytes) for r in result.ops] == [("barrier", 0), *[(op, s) for op in ("all_reduce", "all_gather",
                                                                                           "broadcast") for s in SIZES]]
    assert all(r.status == "done" and r.ranks_done == 2 and r.seconds and r.seconds > 0 for r in result.ops)
    reduce = next(r for r in result.ops if r.op == "all_reduce" and r.bytes == 65536)
    assert reduce.busbw == pytest.approx(reduce.algbw * 2 * (2 - 1) / 2)  # nccl-tests: 2(n-1)/n
    assert sorted(result.ranks) == [0, 1] and all(r.finished and r.pid for r in result.ranks.values())
    assert "127.0.0.1" in " ".join(started[0].command) and f"--master-port={started[0].port}" in started[0].command
    _nothing_left(result)


def test_a_wrong_interface_name_is_named_as_such(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(collectives.FAULT_VARIABLE, raising=False)
    result = run_check(_plan(GLOO_SOCKET_IFNAME="nosuch0"))
    outcome = result.outcome
    assert not outcome.passed
    assert (outcome.rule, outcome.kind) == ("interface_missing", "nccl_interface")
    assert outcome.values["name"] == "GLOO_SOCKET_IFNAME" and outcome.values["value"] == "nosuch0"
    # every rank fails the same way, but torchrun stops the others once one has failed: on a loaded machine only the
    # first may have written its error before it is stopped
    assert outcome.ranks and set(outcome.ranks) <= {0, 1} and "nosuch0" in outcome.evidence
    assert outcome.title.startswith("NCCL or gloo finds no usable network interface")
    _nothing_left(result)


def test_a_rank_killed_mid_check_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    # Rank 1 stops before its all_gather (the test hook) so that the kill lands mid-check, not after it.
    monkeypatch.setenv(collectives.FAULT_VARIABLE, "hang:rank=1:op=all_gather")
    killed: list[int] = []

    def kill_rank_1(started: Started) -> None:
        def go() -> None:
            last = ("all_reduce", SIZES[-1])
            wait_for(lambda: any(e["event"] == "done" and (e["op"], e["bytes"]) == last
                                 for e in events(started.progress_dir, 1)), "rank 1 through all_reduce")
            wait_for(lambda: any(e["event"] == "started" and e["op"] == "all_gather"
                                 for e in events(started.progress_dir, 0)), "rank 0 in all_gather")
            pid = events(started.progress_dir, 1)[0]["pid"]
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

        threading.Thread(target=go, daemon=True).start()

    result = run_check(_plan(), on_start=kill_rank_1)
    assert killed and result.ranks[1].pid == killed[0]
    outcome = result.outcome
    assert (outcome.rule, outcome.kind, outcome.ranks) == ("rank_died", "quiet_rank_exit", (1,))
    assert outcome.values["how"] == "SIGKILL" and result.ranks[1].exit_code == -9
    assert result.ranks[0].waiting_in == ("all_gather", SIZES[0])  # the survivor only lost its peer
    _nothing_left(result)


def test_a_hung_rank_is_named_within_the_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(collectives.FAULT_VARIABLE, "hang:rank=1:op=all_reduce")
    result = run_check(_plan(timeout_s=4.0))
    outcome = result.outcome
    assert (outcome.rule, outcome.kind, outcome.ranks) == ("rank_behind", "collective_timeout", (1,))
    assert outcome.values["at"] == "all_reduce 1 KiB" and outcome.values["waiting"] == "0"
    assert "Timed out" in result.ranks[0].error  # rank 0's own 4 s timeout fired: the parent did not wait longer
    assert [r.status for r in result.ops][:2] == ["done", "failed"]
    _nothing_left(result)
