"""The words that say a job hangs live in one place (common.hang_words): the retrieval glossary and the conversation
subjects write its token and read the same words as HANG_WORDS does; the failure family of a hang writes the token of
the words that name a hang outright, every one of them a hang word, and not the phrases that describe one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.conversation import patterns
from common.hang_words import HANG_WORDS, NAMED_TOKEN, TOKEN
from corpus.families import catalogue
from corpus.retrieval import _glossary

ROOT = Path(__file__).resolve().parent.parent
HANGS = ["training hangs at step 3", "the job is stuck", "it Hangs after the first epoch", "NCCL froze", "hang住了",
         "训练卡住了", "卡好久不动", "一直卡在 all_reduce", "进程卡死", "no progress for an hour", "it deadlocked"]
NOT_HANGS = ["只有一张卡在跑", "freeze_vit: true", "hang_timeout=30", "CUDA out of memory", "loss is NaN",
             'File "<frozen importlib._bootstrap>", line 1014, in _gcd_import']


def _family_detect():
    return next(f.detect for f in catalogue() if f.name == "job hangs / stuck")


def _glossary_hang():
    return next(p for p, terms in _glossary() if "hang" in terms.split())


READERS = {"HANG_WORDS": lambda: HANG_WORDS, "glossary": _glossary_hang, "conversation": lambda: patterns().subjects["hang"]}
NAMED = ["training hangs at step 3", "the job is stuck", "训练卡住了", "卡好久不动", "一直卡在 all_reduce", "进程卡死",
         "it deadlocked", "the screen freezes"]
DESCRIBED = ["Rank 549 stops at step", "it never returns", "no progress for an hour"]  # hangs, not named as one


@pytest.mark.parametrize("reader", sorted(READERS))
def test_every_reader_reads_the_same_hang_words(reader):
    pattern = READERS[reader]()
    assert [t for t in HANGS if not pattern.search(t)] == []
    assert [t for t in NOT_HANGS if pattern.search(t)] == []


def test_the_family_reads_the_words_that_name_a_hang_and_each_is_a_hang_word():
    family = _family_detect()
    assert [t for t in NAMED if not family.search(t)] == []
    assert [t for t in NAMED if not HANG_WORDS.search(t)] == []
    assert [t for t in DESCRIBED if family.search(t)] == [] and all(HANG_WORDS.search(t) for t in DESCRIBED)
    assert [t for t in NOT_HANGS if family.search(t) and "freeze_" not in t] == []  # freez\w* as it always read


def test_the_data_tables_name_the_words_only_by_the_token():
    tables = {
        "corpus/data/error_families.json": [f["detect"] for f in json.loads(
            (ROOT / "corpus/data/error_families.json").read_text(encoding="utf-8"))["families"]],
        "corpus/data/glossary.json": [e["pattern"] for e in json.loads(
            (ROOT / "corpus/data/glossary.json").read_text(encoding="utf-8"))["expansions"]],
        "agent/data/conversation.json": json.loads(
            (ROOT / "agent/data/conversation.json").read_text(encoding="utf-8"))["subjects"]["hang"],
    }
    for name, patterns_ in tables.items():
        assert any(TOKEN in p or NAMED_TOKEN in p for p in patterns_), name
        assert not [p for p in patterns_ if "卡住" in p or "卡死" in p], name  # the words themselves are not copied
