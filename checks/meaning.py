"""What a check's run means, in the registry's terms: an ordered table of small rules (``RULES``), the first that
fires decides. Each names the rank(s) it rests on and a failure kind of the registry (``runbooks.registry``: the
kinds the answers use), never a kind of its own.

Order matters: a rank that died or hung leaves the others with errors of their own (a lost connection, a
timeout), so who died and who never arrived are read before any rank's error message is.
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from checks.report import OpRow, Outcome, RankState
from checks.variables import Setting


@dataclass(frozen=True)
class Observed:
    """Everything a rule may read: the ranks' progress, the rows, how the run stopped."""

    backend: str
    world: int
    ranks: dict[int, RankState]
    rows: list[OpRow]
    plan: list[tuple[str, int]]  # (op, bytes) in the order every rank runs them
    stopped: str  # "finished", "exited", "deadline", "interrupted"
    timeout_s: float
    launcher_tail: list[str]
    missing_interfaces: list[Setting]
    interfaces: list[str]
    consumer_gpus: bool = False  # NCCL on one node of consumer cards (checks.p2p)


Rule = Callable[[Observed], "Outcome | None"]


def size_name(size: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if size >= scale and size % scale == 0:
            return f"{size // scale} {unit}"
    return f"{size} B"


def at_name(at: tuple[str, int] | None) -> str:
    if at is None:
        return "start-up"
    op, size = at
    return op if op in ("barrier", "init") else f"{op} {size_name(size)}"


def _title(kind: str | None) -> str:
    if kind is None:
        return ""
    from runbooks.registry import kind as registered

    found = registered(kind)
    if found is None:  # a kind is never invented here: tests/checks ask every rule's kind of the registry
        raise LookupError(f"checks.meaning names kind {kind!r}, which the registry lacks")
    return found.title


def _outcome(rule: str, kind: str | None, named: Sequence[int], key: str, evidence: str = "", *, passed: bool = False,
             **values: Any) -> Outcome:
    return Outcome(passed, rule, kind, _title(kind), tuple(sorted(named)), key, values, evidence)


def _ranks(ranks: Sequence[int]) -> str:
    return ", ".join(str(r) for r in sorted(ranks))


def _index(obs: Observed, at: tuple[str, int] | None) -> float:
    """How far a rank got: the plan's index of what it started (half a step more once done); -1 before any."""
    if at is None or at not in obs.plan:
        return -1.0
    return float(obs.plan.index(at))


def _progress(obs: Observed, state: RankState) -> float:
    if state.position is None:
        return -1.0
    return _index(obs, state.position) + (0.5 if state.position in state.done else 0.0)


def _lines(obs: Observed) -> list[str]:
    return [r.error for r in obs.ranks.values() if r.error] + obs.launcher_tail


def interrupted(obs: Observed) -> Outcome | None:
    """Ctrl-C: nothing to conclude."""
    return _outcome("interrupted", None, (), "checks.interrupted") if obs.stopped == "interrupted" else None


def passed(obs: Observed) -> Outcome | None:
    """Every rank finished and every operation completed with the right result."""
    if obs.stopped != "finished" or not all(r.finished for r in obs.ranks.values()):
        return None
    if any(row.status != "done" for row in obs.rows):
        return None
    return _outcome("passed", None, (), "checks.passed", passed=True, world=obs.world)


def interface_missing(obs: Observed) -> Outcome | None:
    """An interface variable names no interface here, and a rank (or the launcher) says it found no address."""
    from runbooks.registry import kind

    book = kind("nccl_interface")
    messages = book.messages if book is not None else ()
    said = [r for r in obs.ranks.values() if r.error and any(m in r.error for m in messages)]
    line = next((x for x in _lines(obs) if any(m in x for m in messages)), "")
    if not obs.missing_interfaces or not (said or line):
        return None
    setting = obs.missing_interfaces[0]
    return _outcome("interface_missing", "nccl_interface", [r.rank for r in said], "checks.interface_missing", line,
                    name=setting.name, value=setting.value, interfaces=", ".join(obs.interfaces) or "-",
                    ranks=_ranks([r.rank for r in said]) or "-")


def _signal_name(code: int) -> str:
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


def rank_died(obs: Observed) -> Outcome | None:
    """A rank ended without a Python error of its own: killed by a signal other than the launcher's SIGTERM (which
    it sends the survivors), or an exit code without an error line. The others' lost connections follow from it."""
    dead = [r for r in obs.ranks.values() if not r.error and not r.finished and r.exit_code not in (None, 0)
            and r.exit_code != -signal.SIGTERM
            and not (r.exit_code == -signal.SIGABRT and r.waiting_in is not None)]  # NCCL's watchdog, on a timeout
    if not dead:
        return None
    first = min(dead, key=lambda r: (r.gone_at or float("inf"), r.rank))
    code = first.exit_code or 0
    how = _signal_name(code) if code < 0 else f"exit code {code}"
    key = "checks.rank_died_in" if first.waiting_in is not None else "checks.rank_died_after"
    return _outcome("rank_died", "quiet_rank_exit", [first.rank], key, how, rank=first.rank, how=how,
                    at=at_name(first.position))


def rank_behind(obs: Observed) -> Outcome | None:
    """Some ranks waited in an operation the others never started: those never arrived (hung before it)."""
    if obs.stopped == "finished":
        return None
    ahead = max(obs.ranks.values(), key=lambda r: _progress(obs, r))
    waited_at = ahead.waiting_in or ahead.error_at
    if waited_at is None or waited_at not in obs.plan:
        return None
    behind = [r for r in obs.ranks.values() if r.joined and _progress(obs, r) < _index(obs, waited_at) and not r.error]
    waiting = [r.rank for r in obs.ranks.values() if (r.waiting_in or r.error_at) == waited_at]
    if not behind or not waiting:
        return None
    last = max(behind, key=lambda r: _progress(obs, r))
    return _outcome("rank_behind", "collective_timeout", [r.rank for r in behind], "checks.rank_behind",
                    next((r.error for r in obs.ranks.values() if r.error), ""), ranks=_ranks([r.rank for r in behind]),
                    at=at_name(waited_at), after=at_name(last.position), waiting=_ranks(waiting), timeout=obs.timeout_s)


def all_stuck(obs: Observed) -> Outcome | None:
    """Every rank started the same operation and none finished it: the transport between them does not deliver
    (on one node of consumer GPUs over NCCL: peer-to-peer)."""
    places = {r.waiting_in for r in obs.ranks.values()}
    if obs.stopped == "finished" or len(places) != 1 or None in places or len(obs.ranks) < 2:
        return None
    at = next(iter(places))
    kind = "consumer_gpu_p2p" if obs.backend == "nccl" and obs.consumer_gpus else "collective_timeout"
    return _outcome("all_stuck", kind, list(obs.ranks), "checks.all_stuck", at=at_name(at), timeout=obs.timeout_s)


def wrong_result(obs: Observed) -> Outcome | None:
    """An operation completed on every rank with the wrong numbers: on one node over NCCL, writes between GPUs that
    do not arrive intact (peer-to-peer)."""
    row = next((r for r in obs.rows if r.status == "wrong"), None)
    if row is None:
        return None
    kind = "consumer_gpu_p2p" if obs.backend == "nccl" else None
    return _outcome("wrong_result", kind, (), "checks.wrong_result", at=at_name((row.op, row.bytes)))


def rank_failed(obs: Observed) -> Outcome | None:
    """The first rank that raised: its message names the kind where a runbook's message is in it."""
    failed = [r for r in obs.ranks.values() if r.error]
    if not failed:
        return None
    first = min(failed, key=lambda r: (r.last_event_t, r.rank))
    from runbooks.choose import for_lines

    book = for_lines([first.error])
    return _outcome("rank_failed", book.kind if book is not None else None, [first.rank], "checks.rank_failed",
                    first.error, rank=first.rank, at=at_name(first.error_at), error=first.error.splitlines()[0][:300])


def never_joined(obs: Observed) -> Outcome | None:
    """Ranks started but not all joined the process group: the rendezvous did not complete."""
    launched = [r for r in obs.ranks.values() if r.pid is not None]
    missing = [r.rank for r in obs.ranks.values() if not r.joined]
    if not launched or not missing:
        return None
    return _outcome("never_joined", "rendezvous", missing, "checks.never_joined", ranks=_ranks(missing))


def launcher_failed(obs: Observed) -> Outcome | None:
    """No rank started: the launcher's own last error line says why."""
    if any(r.pid is not None for r in obs.ranks.values()):
        return None
    from runbooks.choose import for_lines

    line = next((x for x in reversed(obs.launcher_tail) if "Error" in x or "error" in x), obs.launcher_tail[-1] if
                obs.launcher_tail else "")
    book = for_lines(obs.launcher_tail)
    return _outcome("launcher_failed", book.kind if book is not None else None, (), "checks.launcher_failed", line,
                    line=line.strip()[:300])


def unknown(obs: Observed) -> Outcome | None:
    return _outcome("unknown", None, (), "checks.unknown", stopped=obs.stopped)


# Ordered: the first rule that returns an outcome decides.
RULES: tuple[Rule, ...] = (
    interrupted,  # Ctrl-C: nothing to conclude
    passed,  # every rank, every operation, the right numbers
    interface_missing,  # a named interface that is not here: ranks fail at their first socket
    rank_died,  # a rank killed or gone without an error: the others' errors follow from it
    rank_behind,  # ranks waited in an operation another rank never reached
    all_stuck,  # every rank in one operation, none through it
    wrong_result,  # completed, wrong numbers
    rank_failed,  # the first rank's own error, read against the runbooks' messages
    never_joined,  # the rendezvous did not complete
    launcher_failed,  # nothing started
    unknown,
)


def outcome(obs: Observed) -> Outcome:
    for rule in RULES:
        found = rule(obs)
        if found is not None:
            return found
    raise AssertionError("unknown() always decides")  # pragma: no cover
