"""What a check's run means: each rule of checks.meaning alone, on the ranks' states as the progress files give
them, and every kind a rule names is one of the registry's (none invented)."""

from __future__ import annotations

import re
import signal
from pathlib import Path

import pytest

from checks import meaning
from checks.meaning import Observed, outcome
from checks.report import OpRow, RankState
from checks.variables import Setting
from runbooks.registry import kinds

PLAN = [("barrier", 0), ("all_reduce", 1024), ("all_reduce", 65536), ("all_gather", 1024)]


def _rank(rank: int, done: int, *, waiting: bool = False, error: str = "", exit_code: int | None = None,
          finished: bool = False) -> RankState:
    state = RankState(rank, pid=1000 + rank, joined=True, finished=finished, done=list(PLAN[:done]), error=error,
                      exit_code=exit_code)
    state.position = PLAN[done] if waiting else (PLAN[done - 1] if done else None)
    state.error_at = state.position if error else None
    return state


def _observed(*ranks: RankState, stopped: str = "exited", backend: str = "gloo", rows: list[OpRow] | None = None,
              missing: list[Setting] | None = None, consumer: bool = False, tail: list[str] | None = None) -> Observed:
    return Observed(backend, len(ranks), {r.rank: r for r in ranks}, rows or [], PLAN, stopped, 10.0, tail or [],
                    missing or [], ["eth0", "lo"], consumer)


CASES = [
    ("passed", None, (), _observed(_rank(0, 4, finished=True), _rank(1, 4, finished=True), stopped="finished",
                                   rows=[OpRow(op, b, "done") for op, b in PLAN])),
    ("interface_missing", "nccl_interface", (0,),
     _observed(_rank(0, 0, error="DistBackendError: NCCL error: Bootstrap : no socket interface found"), _rank(1, 0),
               missing=[Setting("NCCL_SOCKET_IFNAME", "ib9", "shell")])),
    ("rank_died", "quiet_rank_exit", (1,),
     _observed(_rank(0, 3, waiting=True, error="RuntimeError: Connection closed by peer"),
               _rank(1, 3, exit_code=-signal.SIGKILL))),
    # NCCL's watchdog aborts the rank that waited (SIGABRT, no Python error): the rank that never came is named
    ("rank_behind", "collective_timeout", (1,),
     _observed(_rank(0, 2, waiting=True, exit_code=-signal.SIGABRT), _rank(1, 2, exit_code=-signal.SIGTERM),
               stopped="exited", backend="nccl")),
    ("all_stuck", "collective_timeout", (0, 1),
     _observed(_rank(0, 1, waiting=True), _rank(1, 1, waiting=True), stopped="deadline")),
    ("all_stuck", "consumer_gpu_p2p", (0, 1),
     _observed(_rank(0, 1, waiting=True), _rank(1, 1, waiting=True), stopped="deadline", backend="nccl", consumer=True)),
    ("wrong_result", "consumer_gpu_p2p", (),
     _observed(_rank(0, 4, finished=True), _rank(1, 4, finished=True), stopped="finished", backend="nccl",
               rows=[OpRow("all_reduce", 1024, "wrong")])),
    ("rank_failed", "nccl_invalid_argument", (0,),
     _observed(_rank(0, 0, error="DistBackendError: NCCL error: Cuda failure 'operation not supported'"),
               _rank(1, 0, error="DistBackendError: NCCL error: Cuda failure 'operation not supported'"))),
    ("never_joined", "rendezvous", (1,), _observed(_rank(0, 0), RankState(1, pid=1001), stopped="deadline")),
    ("launcher_failed", "port_in_use", (),
     _observed(RankState(0), RankState(1), tail=["torch.distributed.DistNetworkError: EADDRINUSE: address already in use"])),
    ("interrupted", None, (), _observed(_rank(0, 1, waiting=True), _rank(1, 1), stopped="interrupted")),
]


@pytest.mark.parametrize(("rule", "kind", "ranks", "observed"), CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_each_rule_names_its_ranks_and_the_registry_kind(rule, kind, ranks, observed) -> None:
    found = outcome(observed)
    assert (found.rule, found.kind, found.ranks) == (rule, kind, ranks)
    assert found.passed == (rule == "passed")
    if kind is not None:
        assert found.title == kinds()[kind].title


def test_every_kind_the_rules_and_the_p2p_table_name_is_the_registrys() -> None:
    # the kinds as the code writes them: _outcome(rule, KIND, ...), kind = KIND if ... else KIND, Implication(.., .., KIND)
    written = re.compile(r'(?:_outcome\("\w+", |kind = |else |Implication\("\w+", "[\w.]+", )"([a-z0-9_]+)"')
    named = {name for module in ("meaning.py", "p2p.py")
             for name in written.findall((Path(meaning.__file__).parent / module).read_text())}
    assert {"collective_timeout", "quiet_rank_exit", "nccl_interface", "rendezvous", "consumer_gpu_p2p"} <= named
    assert named <= set(kinds()), named - set(kinds())


def test_a_kind_the_registry_lacks_is_refused() -> None:
    with pytest.raises(LookupError, match="registry lacks"):
        meaning._outcome("x", "no_such_kind", (), "checks.unknown")
