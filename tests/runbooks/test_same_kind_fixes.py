"""After the runbook's fixes come the fixes of the documents' sections about the same failure kind
(corpus/data/section_kinds.json), as advice.review shows them; a section about another kind supplies none, and the
sections keep the order retrieval gave them."""

from __future__ import annotations

import re

from clikit import ROOT

from agent.answer import Citation
from agent.compose import compose
from agent.core import reviewed
from agent.lead import lead_with
from common.settings import Settings
from corpus.indexer import document_chunks
from corpus.kinds import answers_kind, section_kinds
from runbooks.catalog import runbooks

TIMEOUT_004 = "故障排除指南 > 分布式训练问题 > 问题：NCCL 超时"
PORT_002 = "DeepSpeed卡住问题解决方案 > 常见错误及解决方案 > 错误2: 端口被占用"


def _seed_citation(n: int, section: str) -> Citation:
    chunk = next(c for c in document_chunks(sorted((ROOT / "corpus").glob("00*.txt")), Settings()) if c.section == section)
    return reviewed(Citation(n=n, source=chunk.source, section=section, chunk_id=chunk.chunk_id, score=1.0, text=chunk.text),
                    "en", [])


def test_the_same_kinds_fixes_follow_the_runbook_and_another_kinds_do_not() -> None:
    book = runbooks()[("collective_timeout", "en")]
    port, timeout = _seed_citation(2, PORT_002), _seed_citation(3, TIMEOUT_004)
    cited = lead_with(book, [port, timeout], "en", limit=5)
    assert [c.section for c in cited[1:]] == [PORT_002, TIMEOUT_004]  # as retrieval ranked them
    body = compose("NCCL timeout during training", cited, [], False, [], [], lead="LEAD", lead_kind="collective_timeout")
    more = body.split("More fixes from the documents on the same failure", 1)
    assert len(more) == 2, body
    numbers = {int(n) for n in re.findall(r"from \[(\d+)\]", more[1])}
    assert numbers == {3}, more[1]  # the timeout section; the port section ([2]) supplies no fix
    assert "NCCL_TIMEOUT=" not in "".join(re.findall(r"```.*?```", more[1], re.S))  # corrected before shown
    assert "export NCCL_DEBUG=INFO" in more[1]


def test_a_kind_no_section_answers_adds_no_document_fixes() -> None:
    book = runbooks()[("straggler", "en")]
    cited = lead_with(book, [_seed_citation(2, TIMEOUT_004)], "en", limit=5)
    body = compose("rank 1 is a straggler", cited, [], False, [], [], lead="LEAD", lead_kind="straggler")
    assert "More fixes" not in body


def test_every_seed_section_is_placed_and_every_kind_is_a_runbook() -> None:
    kinds = {kind for kind, _ in runbooks()}
    chunks = document_chunks(sorted((ROOT / "corpus").glob("00*.txt")), Settings())
    from pathlib import PurePath

    from corpus.kinds import _table

    for chunk in chunks:
        assert (PurePath(chunk.source).stem, chunk.section) in _table(), f"{chunk.section} has no recorded kinds"
        placed = section_kinds(chunk.source, chunk.section)
        assert placed.role in ("fix", "diagnosis", "overview"), chunk.section
        assert set(placed.kinds) <= kinds, (chunk.section, placed.kinds)
    assert answers_kind("corpus/renderings/en/004_f7d4acab9feaf887.md", TIMEOUT_004, "collective_timeout")
