"""corpus.lexical: CJK bigrams, identifier splitting, BM25 ranking."""

from __future__ import annotations

import pytest

from corpus.lexical import BM25Index, tokenize


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("显存溢出", ["显存", "存溢", "溢出"]),
        ("端口的占用", ["端口", "口占", "占用"]),  # 的 is a stop character
        ("超", ["超"]),
    ],
)
def test_chinese_becomes_bigrams(text, expected):
    assert tokenize(text) == expected


@pytest.mark.parametrize(
    ("text", "must_contain"),
    [
        ("ncclUnhandledCudaError", {"ncclunhandledcudaerror", "nccl", "unhandled", "cuda", "error"}),
        ("sm_120", {"sm_120", "sm", "120"}),
        ("CUDA_VISIBLE_DEVICES", {"cuda_visible_devices", "cuda", "visible", "devices"}),
        ("NCCL报错: ncclSystemError", {"nccl", "报错", "ncclsystemerror", "system", "error"}),
    ],
)
def test_identifiers_are_kept_whole_and_split(text, must_contain):
    assert must_contain <= set(tokenize(text))


def test_stopwords_are_dropped():
    assert tokenize("why is the job hanging") == ["job", "hanging"]


DOCS = [
    "NCCL timeout: the watchdog caught a collective operation timeout, raise NCCL_TIMEOUT",
    "CUDA out of memory: reduce the batch size or enable gradient checkpointing",
    "显存不足 解决方案: 减小批大小, 开启梯度检查点",
    "端口被占用: Address already in use, 更换 MASTER_PORT",
    "ncclUnhandledCudaError: call to CUDA function failed, check the driver",
]


@pytest.mark.parametrize(
    ("query", "best"),
    [
        ("watchdog collective timeout", 0),
        ("out of memory batch size", 1),
        ("训练时显存不足怎么办", 2),
        ("端口被占用", 3),
        ("address already in use", 3),
        ("unhandled cuda error", 4),
        ("NCCL error ncclUnhandledCudaError", 4),
    ],
)
def test_bm25_ranks_the_right_document_first(query, best):
    index = BM25Index([tokenize(d) for d in DOCS])
    scores = index.scores(tokenize(query))
    assert int(scores.argmax()) == best
    assert scores[best] > 0


def test_bm25_unknown_terms_score_zero_and_rare_terms_weigh_more():
    index = BM25Index([tokenize(d) for d in DOCS])
    assert not index.scores(tokenize("kubernetes helm chart")).any()
    assert index.idf("watchdog") > index.idf("cuda")


def test_subset_statistics_equal_an_index_of_the_subset_alone():
    import numpy as np

    from corpus.lexical import BM25Index, SubsetStatistics

    docs = [["nccl", "timeout", "rank"], ["cuda", "oom"], ["nccl", "socket"], ["oom", "host", "ram"], ["rank"]]
    mask = np.array([True, False, True, True, False])
    subset = SubsetStatistics(BM25Index(docs), mask)
    alone = BM25Index([d for d, kept in zip(docs, mask, strict=True) if kept])
    assert subset.size == alone.size == 3
    for term in ("nccl", "cuda", "oom", "rank", "socket", "absent"):
        assert subset.idf(term) == alone.idf(term), term
