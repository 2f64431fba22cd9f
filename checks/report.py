"""What a check saw, as records: each rank's events (read from its progress file), each operation and size, and
the outcome in the registry's terms. Built from the progress files alone, so a killed job reads the same."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class RankState:
    rank: int
    pid: int | None = None
    host: str = ""
    joined: bool = False
    finished: bool = False
    position: tuple[str, int] | None = None  # the (op, bytes) it started last
    done: list[tuple[str, int]] = field(default_factory=list)
    error: str = ""  # the exception it raised, with its message
    error_at: tuple[str, int] | None = None
    gone_at: float | None = None  # when the parent saw its process end (monotonic), if it did
    exit_code: int | None = None  # from the launcher's summary: negative = killed by that signal
    last_event_t: float = 0.0

    @property
    def waiting_in(self) -> tuple[str, int] | None:
        """The (op, bytes) it started and has not finished, if any."""
        return self.position if self.position is not None and self.position not in self.done else None


@dataclass
class OpRow:
    op: str
    bytes: int
    status: str  # "done", "wrong", "failed", "hung", "not_run"
    seconds: float | None = None
    algbw: float | None = None  # GB/s
    busbw: float | None = None  # GB/s, nccl-tests' definition (checks.collectives.bus_factor)
    ranks_done: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"op": self.op, "bytes": self.bytes, "status": self.status, "seconds": self.seconds,
                "algbw_gbps": self.algbw, "busbw_gbps": self.busbw, "ranks_done": self.ranks_done}


@dataclass(frozen=True)
class Outcome:
    passed: bool
    rule: str  # the rule of checks.meaning that decided
    kind: str | None  # a failure kind of the registry (runbooks.registry), or None
    title: str  # the kind's title, in English (the runbook's)
    ranks: tuple[int, ...]  # the rank(s) named
    key: str  # the phrase that says what happened (checks.* in the phrase book)
    values: dict[str, Any]  # its fields
    evidence: str = ""  # the line it rests on

    def to_json(self) -> dict[str, Any]:
        return {"passed": self.passed, "rule": self.rule, "kind": self.kind, "title": self.title,
                "ranks": list(self.ranks), "evidence": self.evidence}


@dataclass
class CheckResult:
    run_id: str
    backend: str
    world: int
    command: list[str]
    launcher_pid: int | None
    ranks: dict[int, RankState]
    ops: list[OpRow]
    outcome: Outcome
    stopped: str  # "finished", "exited", "deadline", "interrupted"
    launcher_exit: int | None
    launcher_tail: list[str]
    settings: dict[str, tuple[str, str]]  # name -> (value, source)
    left_behind: list[int] = field(default_factory=list)  # pids still alive after cleanup (should be none)

    def to_json(self, message: str = "") -> dict[str, Any]:
        return {
            "passed": self.outcome.passed, "backend": self.backend, "world": self.world, "run_id": self.run_id,
            "launcher_pid": self.launcher_pid, "stopped": self.stopped, "launcher_exit": self.launcher_exit,
            "outcome": {**self.outcome.to_json(), "message": message},
            "ops": [row.to_json() for row in self.ops],
            "ranks": [{"rank": r.rank, "pid": r.pid, "host": r.host, "joined": r.joined, "finished": r.finished,
                       "waiting_in": list(r.waiting_in) if r.waiting_in else None, "error": r.error,
                       "exit_code": r.exit_code} for r in sorted(self.ranks.values(), key=lambda r: r.rank)],
            "settings": {name: {"value": value, "source": source} for name, (value, source) in self.settings.items()},
            "command": self.command, "left_behind": self.left_behind,
        }


def read_events(path: Path) -> list[dict[str, Any]]:
    """The complete JSON lines of one progress file (a line being written is left for the next read)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    events = []
    for line in text.split("\n")[:-1]:  # the part after the last newline is not written whole yet
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict):
            events.append(event)
    return events


def rank_states(folder: Path, world: int) -> dict[int, RankState]:
    """Each rank's state from its progress file (``rank-<r>.jsonl``); a rank without one is there, unlaunched."""
    states = {rank: RankState(rank) for rank in range(world)}
    for path in sorted(folder.glob("rank-*.jsonl")):
        for event in read_events(path):
            rank = event.get("rank")
            if not isinstance(rank, int):
                continue
            apply(states.setdefault(rank, RankState(rank)), event)
    return states


def apply(state: RankState, event: dict[str, Any]) -> None:
    kind = event.get("event")
    state.last_event_t = float(event.get("t", 0.0) or 0.0)
    at = (str(event.get("op", "")), int(event.get("bytes", 0) or 0))
    if kind == "launched":
        state.pid = int(event["pid"]) if isinstance(event.get("pid"), int) else None
        state.host = str(event.get("host", ""))
    elif kind == "joined":
        state.joined = True
    elif kind == "started":
        state.position = at
    elif kind == "done":
        state.done.append(at)
    elif kind == "error":
        state.error = f"{event.get('error', '')}: {event.get('message', '')}".strip(": ")
        state.error_at = at
    elif kind == "finished":
        state.finished = True


def op_rows(folder: Path, plan_ops: Iterable[tuple[str, int]], world: int) -> list[OpRow]:
    """One row per (op, size) of the plan: rank 0's timing, done when every rank did it."""
    done: dict[tuple[str, int], list[dict[str, Any]]] = {}
    started: set[tuple[str, int]] = set()
    for path in sorted(folder.glob("rank-*.jsonl")):
        for event in read_events(path):
            at = (str(event.get("op", "")), int(event.get("bytes", 0) or 0))
            if event.get("event") == "done":
                done.setdefault(at, []).append(event)
            elif event.get("event") in ("started", "error"):
                started.add(at)
    rows = []
    for at in plan_ops:
        events = done.get(at, [])
        first = next((e for e in events if e.get("rank") == 0), events[0] if events else None)
        if len(events) >= world:
            status = "done" if all(e.get("correct", True) for e in events) else "wrong"
        else:
            status = "failed" if at in started or events else "not_run"
        rows.append(OpRow(at[0], at[1], status, first.get("seconds") if first else None,
                          first.get("algbw") if first else None, first.get("busbw") if first else None, len(events)))
    return rows
