"""Integration tests: the installed `ask` and `traindoc` run as subprocesses, as a user runs them, against the
built-in corpus indexed once per session (the shared_index fixture). Only hardware is faked (a fake torch package
behind a wrapper interpreter, a fake nvidia-smi on PATH); sockets, processes, files and the index are real."""

from __future__ import annotations

from pathlib import Path

import pytest
from integration_kit import PROBE_TIMEOUT_VAR


@pytest.fixture(autouse=True)
def _index(use_shared_index: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test here reads the session's shared index; the developer's probe timeout does not leak in."""
    monkeypatch.delenv(PROBE_TIMEOUT_VAR, raising=False)
    monkeypatch.delenv("NCCL_SOCKET_IFNAME", raising=False)
    monkeypatch.delenv("MASTER_PORT", raising=False)
    return use_shared_index
