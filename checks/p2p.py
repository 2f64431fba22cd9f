"""`traindoc check p2p`: which GPU pairs of this node can reach each other's memory (CUDA peer access), and what
that implies for NCCL.

The GPUs come in through one narrow interface (``PeerAccess``: the devices' names and whether device i can
access device j), so tests pass a fake built from a dict; the real one asks torch.cuda. What the matrix implies
is an ordered table of small rules (``RULES``); consumer cards are named by ``data/p2p.json``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any, Protocol


class PeerAccess(Protocol):
    def names(self) -> list[str]: ...

    def can_access(self, i: int, j: int) -> bool: ...


class TorchPeerAccess:
    """torch.cuda's view, as NCCL's: ``can_device_access_peer`` (cudaDeviceCanAccessPeer)."""

    def __init__(self) -> None:
        import torch

        self.torch = torch

    def names(self) -> list[str]:
        if not self.torch.cuda.is_available():
            return []
        return [self.torch.cuda.get_device_name(i) for i in range(self.torch.cuda.device_count())]

    def can_access(self, i: int, j: int) -> bool:
        return bool(self.torch.cuda.can_device_access_peer(i, j))


@cache
def _data() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(resources.files("checks").joinpath("data/p2p.json").read_text(encoding="utf-8"))
    return data


def is_consumer(name: str) -> bool:
    return any(re.search(p, name, re.IGNORECASE) for p in _data()["consumer"])


@dataclass(frozen=True)
class PeerMatrix:
    names: list[str]
    access: list[list[bool | None]]  # [i][j]; None on the diagonal

    @property
    def pairs_without(self) -> list[tuple[int, int]]:
        n = len(self.names)
        return [(i, j) for i in range(n) for j in range(n) if i != j and not self.access[i][j]]

    @property
    def consumer(self) -> bool:
        return bool(self.names) and any(is_consumer(n) for n in self.names)

    def to_json(self) -> dict[str, Any]:
        return {"gpus": [{"index": i, "name": n, "consumer": is_consumer(n)} for i, n in enumerate(self.names)],
                "peer_access": self.access, "pairs_without": [list(p) for p in self.pairs_without]}


def read_matrix(source: PeerAccess) -> PeerMatrix:
    names = source.names()
    n = len(names)
    return PeerMatrix(names, [[None if i == j else source.can_access(i, j) for j in range(n)] for i in range(n)])


@dataclass(frozen=True)
class Implication:
    rule: str
    key: str  # the phrase (checks.p2p.*) that says it
    kind: str | None  # a kind of the registry, where one applies
    advice: str  # a command to run, or ""


def no_gpus(m: PeerMatrix) -> Implication | None:
    return Implication("no_gpus", "checks.p2p.no_gpus", None, "") if not m.names else None


def one_gpu(m: PeerMatrix) -> Implication | None:
    return Implication("one_gpu", "checks.p2p.one_gpu", None, "") if len(m.names) == 1 else None


def consumer_without(m: PeerMatrix) -> Implication | None:
    """Consumer cards that cannot reach each other: NCCL must go through host memory; say so to every rank."""
    if m.consumer and m.pairs_without:
        return Implication("consumer_without", "checks.p2p.consumer_without", "consumer_gpu_p2p",
                           "export NCCL_P2P_DISABLE=1")
    return None


def consumer_with(m: PeerMatrix) -> Implication | None:
    """Consumer cards that report peer access: it may not deliver over their PCIe path; the check tells."""
    if m.consumer:
        return Implication("consumer_with", "checks.p2p.consumer_with", "consumer_gpu_p2p",
                           "traindoc check nccl && NCCL_P2P_DISABLE=1 traindoc check nccl")
    return None


def some_without(m: PeerMatrix) -> Implication | None:
    """Data-centre cards with pairs that have no peer access: NCCL stages those through host memory on its own."""
    return Implication("some_without", "checks.p2p.some_without", None, "") if m.pairs_without else None


def every_pair(m: PeerMatrix) -> Implication | None:
    return Implication("every_pair", "checks.p2p.every_pair", None, "")


# Ordered: the first rule that returns an implication decides.
RULES: tuple[Callable[[PeerMatrix], Implication | None], ...] = (
    no_gpus,
    one_gpu,
    consumer_without,  # consumer cards, no P2P: NCCL_P2P_DISABLE=1 (the and the runbook's first fix)
    consumer_with,  # consumer cards that claim P2P: confirm with the check, with and without it
    some_without,
    every_pair,
)


def implication(m: PeerMatrix) -> Implication:
    for rule in RULES:
        found = rule(m)
        if found is not None:
            return found
    raise AssertionError("every_pair always decides")  # pragma: no cover
