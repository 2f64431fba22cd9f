"""`traindoc check p2p`: the peer-access matrix and what it implies, from a fake of the one narrow interface the
GPUs come in through (names, can_access), seeded from a dict."""

from __future__ import annotations

import argparse
import json

import pytest

from checks.p2p import implication, is_consumer, read_matrix
from traindoc_cli.check import _p2p


class FakePeers:
    """``FakePeers({"names": [...], "without": [(0, 1), ...]})``: every other pair has peer access."""

    def __init__(self, seed: dict) -> None:
        self.seed = seed
        self.asked: list[tuple[int, int]] = []

    def names(self) -> list[str]:
        return list(self.seed["names"])

    def can_access(self, i: int, j: int) -> bool:
        self.asked.append((i, j))
        return (i, j) not in self.seed.get("without", ()) and (j, i) not in self.seed.get("without", ())


RTX = "NVIDIA GeForce RTX 4090"
H100 = "NVIDIA H100 80GB HBM3"


@pytest.mark.parametrize(("seed", "rule", "kind", "advice"), [
    ({"names": [RTX, RTX], "without": [(0, 1)]}, "consumer_without", "consumer_gpu_p2p", "export NCCL_P2P_DISABLE=1"),
    ({"names": [RTX, RTX]}, "consumer_with", "consumer_gpu_p2p", "NCCL_P2P_DISABLE=1 traindoc check nccl"),
    ({"names": [H100] * 4}, "every_pair", None, ""),
    ({"names": [H100] * 4, "without": [(0, 3)]}, "some_without", None, ""),
    ({"names": [H100]}, "one_gpu", None, ""),
    ({"names": []}, "no_gpus", None, ""),
])
def test_what_the_matrix_implies(seed, rule, kind, advice) -> None:
    found = implication(read_matrix(FakePeers(seed)))
    assert (found.rule, found.kind) == (rule, kind)
    assert advice in found.advice


def test_consumer_cards_are_named_by_the_data() -> None:
    assert is_consumer(RTX) and is_consumer("NVIDIA TITAN RTX") and is_consumer("NVIDIA RTX 5090")
    assert not is_consumer(H100) and not is_consumer("NVIDIA RTX A6000") and not is_consumer("Tesla V100-SXM2-16GB")


def test_check_p2p_prints_the_matrix_and_the_advice_for_consumer_cards_without_p2p(capsys) -> None:
    fake = FakePeers({"names": [RTX, RTX, RTX], "without": [(0, 1), (1, 2)]})
    assert _p2p(argparse.Namespace(json=False), "en", source=fake) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("GPU peer access")
    assert out[2].split() == ["GPU0", "-", "no", "yes"] and out[3].split() == ["GPU1", "no", "-", "no"]
    assert any(f"GPU2: {RTX}" in line for line in out)
    text = "\n".join(out)
    assert "consumer cards without peer access between 0-1, 1-2" in text
    assert "do: export NCCL_P2P_DISABLE=1" in text and "kind: consumer_gpu_p2p" in text
    assert sorted(set(fake.asked)) == [(i, j) for i in range(3) for j in range(3) if i != j]  # the diagonal is not asked


def test_check_p2p_json_and_chinese(capsys) -> None:
    fake = FakePeers({"names": [RTX, RTX], "without": [(0, 1)]})
    _p2p(argparse.Namespace(json=True), "en", source=fake)
    data = json.loads(capsys.readouterr().out)
    assert data["peer_access"] == [[None, False], [False, None]] and data["pairs_without"] == [[0, 1], [1, 0]]
    assert data["gpus"][0] == {"index": 0, "name": RTX, "consumer": True}
    assert data["implication"]["advice"] == "export NCCL_P2P_DISABLE=1"
    _p2p(argparse.Namespace(json=False), "zh", source=fake)
    assert "消费级显卡" in capsys.readouterr().out
