"""What a hung job's stacks are made of: each rank's stack, the place it waits in, and the groups of ranks whose stacks
are the same (jobs.stacks reads them, jobs.hang_wording says them in Chinese)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from common.language import say
from jobs import hang_wording
from jobs.pyspy import Frame

PlaceKind = Literal["collective", "rendezvous", "device", "elsewhere", "unreadable"]
C10D_API = "torch/distributed/distributed_c10d.py"  # every public function there on a hung stack is a c10d call
Phrase = tuple[str, tuple[tuple[str, str], ...]]  # a phrase key (common/data/phrases/hang.json) and its values


def phrased(key: str, **values: str) -> tuple[str, Phrase]:
    """A label said from the phrase book: its English, and the phrase to say it in another language."""
    return say(key, "en", **values), (key, tuple(values.items()))


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
    phrase: Phrase | None = None  # the label's phrase; None where the label is a name ("dist.barrier") or an error

    def text(self) -> str:
        return hang_wording.place(self, "en")


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


