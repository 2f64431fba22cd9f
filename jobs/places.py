"""What a hung job's stacks are made of: each rank's stack, the place it waits in, and the groups of ranks whose stacks
are the same (jobs.stacks reads them, jobs.hang_wording says them in Chinese)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from jobs.pyspy import Frame

PlaceKind = Literal["collective", "rendezvous", "device", "elsewhere", "unreadable"]
C10D_API = "torch/distributed/distributed_c10d.py"  # every public function there on a hung stack is a c10d call


@dataclass(frozen=True)
class RankStack:
    """One rank's main-thread stack (innermost first), or why it could not be read."""

    rank: int
    frames: tuple[Frame, ...] = ()
    pid: int | None = None
    host: str | None = None
    error: str | None = None


@dataclass(frozen=True)
class Place:
    kind: PlaceKind
    label: str  # "dist.barrier", "load_shard", or the error
    user: Frame | None = None  # the deepest frame outside site-packages and the standard library
    inner: Frame | None = None  # the innermost Python frame
    inferred: bool = False  # a wait read from frames that a long computation shows too (backward without native frames)

    def text(self) -> str:
        if self.kind == "unreadable":
            return self.label
        if self.kind in ("collective", "rendezvous", "device"):
            if self.user is None:
                return f"{self.label} in {self.inner.text()}" if self.inner else self.label
            return f"{self.label} ({self.user.where})"
        if self.user is None:
            return self.inner.text() if self.inner else "?"
        text = f"{self.user.function} ({self.user.where})"
        if self.inner is not None and self.inner != self.user:
            text += f", inside {self.inner.text()}"
        return text


@dataclass
class StackGroup:
    place: Place
    ranks: list[int]
    pids: list[int] = field(default_factory=list)
    hosts: list[str] = field(default_factory=list)
    frames: list[str] = field(default_factory=list)  # the shared stack, innermost first

    def to_json(self) -> dict[str, Any]:
        return {"ranks": self.ranks, "pids": self.pids, "hosts": self.hosts, "kind": self.place.kind,
                "where": self.place.text(), "user_frame": self.place.user.where if self.place.user else None,
                "frames": self.frames}


