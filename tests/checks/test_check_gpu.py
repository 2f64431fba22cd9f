"""The NCCL path of `traindoc check nccl` and `check p2p` on a real GPU; skipped where there is none (here: torch
is a CPU build). Run on a lent GPU machine: `pytest -m gpu tests/checks/test_check_gpu.py`."""

from __future__ import annotations

import pytest
from checkkit import processes_holding

from checks.run import Plan, run_check
from checks.variables import Setting
from traindoc_cli.check import visible_gpus


def _cuda() -> int:
    try:
        import torch
    except ImportError:
        return 0
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


pytestmark = [pytest.mark.gpu, pytest.mark.skipif(_cuda() == 0, reason="no CUDA GPU here")]


def _plan(**settings: str) -> Plan:
    nproc = min(2, _cuda())
    return Plan("nccl", nproc, [1024, 1 << 20, 16 << 20], 60.0, iters=3,
                settings={n: Setting(n, v, "test") for n, v in settings.items()})


def test_a_healthy_nccl_run_passes_on_the_visible_gpus() -> None:
    assert visible_gpus()  # NVML (or nvidia-smi) sees what torch sees
    result = run_check(_plan())
    assert result.outcome.passed, (result.outcome, result.launcher_tail[-20:])
    assert all(row.status == "done" for row in result.ops)
    big = next(r for r in result.ops if r.op == "all_reduce" and r.bytes == 16 << 20)
    assert big.algbw and big.algbw > 0.5  # GB/s: a GPU buffer, not a host copy
    assert processes_holding(result.run_id) == []


def test_a_wrong_nccl_interface_is_named() -> None:
    result = run_check(_plan(NCCL_SOCKET_IFNAME="nosuch0"))
    assert (result.outcome.rule, result.outcome.kind) == ("interface_missing", "nccl_interface"), \
        (result.outcome, result.launcher_tail[-20:])
    assert processes_holding(result.run_id) == []


def test_the_real_peer_access_matrix() -> None:
    from checks.p2p import TorchPeerAccess, implication, read_matrix

    matrix = read_matrix(TorchPeerAccess())
    assert len(matrix.names) == _cuda() and all(row[i] is None for i, row in enumerate(matrix.access))
    assert implication(matrix).rule in ("one_gpu", "every_pair", "some_without", "consumer_with", "consumer_without")
