"""`traindoc eval --cv K --answers`: held-out reports asked through the whole answer with their fold's model."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from evaluation.crossval_answers import held_out_answers

CASES = [
    {"id": "port", "query": "torchrun: RuntimeError: The server socket has failed to listen on any local network "
     "address. port: 29500. Address already in use", "lang": "en", "gold": [{"file": "002_8a84ca4f82c44780.txt", "heading": "端口"}]},
    {"id": "oom", "query": "CUDA out of memory when the batch size is large", "lang": "en",
     "gold": [{"file": "004_f7d4acab9feaf887.txt", "heading": "显存溢出"},
              {"file": "001_8c5ded5e8229fdf4.txt", "heading": "CUDA out of memory"}]},
    {"id": "slow", "query": "训练极其缓慢，GPU 利用率很低", "lang": "zh",
     "gold": [{"file": "004_f7d4acab9feaf887.txt", "heading": "训练极其缓慢"},
              {"file": "001_8c5ded5e8229fdf4.txt", "heading": "GPU 利用率低"}]},
    {"id": "tpu", "query": "Cloud TPU v5e: torch_xla cannot see any XLA device", "gold": []},
]


@pytest.fixture(scope="module")
def troubleshooter(shared_index):
    from agent.core import build_troubleshooter
    from common.settings import Settings

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TRAINDOC_DATA_DIR", str(shared_index))
        yield build_troubleshooter(Settings.from_env())


def test_each_fold_is_answered_with_its_own_model_and_the_shipped_one_is_put_back(troubleshooter):
    retriever = troubleshooter.retriever()
    shipped = retriever.answerability
    refuses_all, answers_all = replace(shipped, threshold=1.01), replace(shipped, threshold=0.0)
    refused, ranks = held_out_answers(troubleshooter, CASES, [[0, 1], [2, 3]], [refuses_all, refuses_all])
    assert retriever.answerability is shipped
    # No section passes a model that refuses everything: a question no runbook message names is refused; the port
    # clash is still answered (its message names the runbook) but cites no document section: a miss, not a no_match
    assert refused == [False, True, True, True] and ranks == [None, None, None, None]
    refused, ranks = held_out_answers(troubleshooter, CASES, [[0, 1], [2, 3]], [answers_all, answers_all])
    assert refused[:3] == [False, False, False]
    assert all(rank is not None and rank < 3 for rank in ranks[:3]), ranks
    assert ranks[3] is None


def test_the_cli_prints_the_answers_row_beside_the_documents_rows(cli, tmp_path, use_shared_index):
    path = tmp_path / "cv.jsonl"
    path.write_text("".join(json.dumps(c, ensure_ascii=False) + "\n" for c in CASES * 2), encoding="utf-8")
    result = cli("traindoc", "eval", "--cv", "2", "--answers", str(path), "--json")
    assert result.returncode == 0, result.stderr
    figures = json.loads(result.stdout)["modes"]["answers"]
    assert len(figures["folds"]) == 2 and set(figures["by_lang"]) == {"en", "zh"}
    assert figures["worst"]["R@3"] <= figures["mean"]["R@3"] <= 1.0
    text = cli("traindoc", "eval", "--cv", "2", "--answers", str(path))
    assert text.returncode == 0 and "answers mean" in text.stdout and "answers en" in text.stdout
    refused = cli("traindoc", "eval", "--answers", str(path))
    assert refused.returncode == 1 and "--answers goes with --cv" in refused.stderr
