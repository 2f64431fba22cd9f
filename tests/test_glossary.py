"""The bilingual glossary (corpus/data/glossary.json): a question's words bring the documents' words for the same
failure into the lexical query, whichever language either is in; a question about something else brings none."""

from __future__ import annotations

import pytest

from corpus.retrieval import expansions


@pytest.mark.parametrize(("question", "expected"), [
    ("the training loss is not decreasing after 3 epochs", "不收敛"),
    ("validation loss never goes down, it plateaus at 2.3", "不收敛"),
    ("reward stays stagnant during PPO", "不收敛"),
    ("loss 一直不收敛", "不收敛"),
    ("CUDA out of memory at step 10", "显存不足"),
    ("训练卡住了", "hang"),
])
def test_a_failure_said_either_way_brings_the_documents_words(question: str, expected: str) -> None:
    assert expected in " ".join(expansions(question))


@pytest.mark.parametrize("question", [
    "the loss decreases nicely but the eval accuracy is low",
    "how do I set NCCL_SOCKET_IFNAME",
])
def test_a_question_about_something_else_brings_no_convergence_words(question: str) -> None:
    assert "不收敛" not in " ".join(expansions(question))
