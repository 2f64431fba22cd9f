"""corpus.chunking: sections with full heading paths, fences respected, stable ids."""

from __future__ import annotations

import pytest

from corpus import BUILTIN_DIR
from corpus.chunking import chunk_document

NCCL_DOC = """# Runbook

## NCCL hangs

Jobs stop making progress after the first all-reduce.

```bash
# Enable NCCL debug output
export NCCL_DEBUG=INFO

# Pick the right interface
export NCCL_SOCKET_IFNAME=eth0
```

## Port in use

Another job holds the rendezvous port.
"""


def sections(chunks):
    return [c.section for c in chunks]


def test_builtin_document_keeps_full_heading_path():
    path = BUILTIN_DIR / "002_8a84ca4f82c44780.txt"
    chunks = chunk_document(path.read_text(encoding="utf-8"), "corpus/002_8a84ca4f82c44780.txt")
    assert "DeepSpeed卡住问题解决方案 > 常见错误及解决方案 > 错误4: 网络超时" in sections(chunks)
    timeout = next(c for c in chunks if c.section.endswith("错误4: 网络超时"))
    assert timeout.headings == ("DeepSpeed卡住问题解决方案", "常见错误及解决方案", "错误4: 网络超时")
    assert timeout.source == "corpus/002_8a84ca4f82c44780.txt"


def test_hash_line_inside_fence_is_not_a_heading():
    chunks = chunk_document(NCCL_DOC, "runbook.md")
    assert sections(chunks) == ["Runbook > NCCL hangs", "Runbook > Port in use"]
    assert not any("Enable NCCL debug output" in s for s in sections(chunks))
    assert "# Enable NCCL debug output" in chunks[0].text


def test_code_block_stays_whole_even_when_longer_than_the_limit():
    code = "```python\n" + "\n\n".join(f"step_{i} = run({i})" for i in range(60)) + "\n```"
    doc = f"# Doc\n\n## Big\n\nIntro paragraph.\n\n{code}\n\nAfter the code.\n"
    chunks = chunk_document(doc, "doc.md", max_chars=200)
    holding = [c for c in chunks if "step_0 = run(0)" in c.text]
    assert len(holding) >= 1
    for chunk in holding:
        assert code in chunk.text  # never a fragment of the fence
    assert all(c.text.count("```") % 2 == 0 for c in chunks)


def test_long_section_is_split_with_overlap_and_every_part_keeps_the_path():
    paragraphs = [f"Paragraph {i}: " + "word " * 30 for i in range(12)]
    doc = "# Guide\n\n## Long topic\n\n" + "\n\n".join(paragraphs) + "\n"
    chunks = chunk_document(doc, "guide.md", max_chars=400, overlap_blocks=1)
    assert len(chunks) >= 3
    assert {c.section for c in chunks} == {"Guide > Long topic"}
    assert all(c.headings == ("Guide", "Long topic") for c in chunks)
    assert [c.part for c in chunks] == list(range(len(chunks)))
    assert len({c.chunk_id for c in chunks}) == len(chunks)
    for before, after in zip(chunks, chunks[1:], strict=False):
        last_block = before.text.split("\n\n")[-1]
        assert after.text.startswith(last_block), "consecutive parts share one block of overlap"
    joined = "\n\n".join(c.text for c in chunks)
    assert all(p.strip() in joined for p in paragraphs), "no text is lost in the split"


def test_chunk_ids_are_stable_and_local_to_their_section():
    first = chunk_document(NCCL_DOC, "runbook.md")
    again = chunk_document(NCCL_DOC, "runbook.md")
    assert [c.chunk_id for c in first] == [c.chunk_id for c in again]

    edited = chunk_document(NCCL_DOC.replace("Another job holds", "A stale process holds"), "runbook.md")
    by_section = {c.section: c for c in edited}
    assert by_section["Runbook > NCCL hangs"].chunk_id == first[0].chunk_id
    assert by_section["Runbook > Port in use"].text != first[1].text

    elsewhere = chunk_document(NCCL_DOC, "other/runbook.md")
    assert {c.chunk_id for c in elsewhere}.isdisjoint({c.chunk_id for c in first}), "ids include the source"


def test_repeated_generic_subheadings_fold_into_their_problem():
    doc = """# 排查手册

## 问题A: 显存不足

### 错误信息

```
RuntimeError: CUDA out of memory
```

### 解决方案

减小 batch size。

## 问题B: 端口被占用

### 错误信息

```
Address already in use
```

### 解决方案

更换 MASTER_PORT。
"""
    chunks = chunk_document(doc, "zh.md")
    assert sections(chunks) == ["排查手册 > 问题A: 显存不足", "排查手册 > 问题B: 端口被占用"]
    oom = chunks[0].text
    assert "CUDA out of memory" in oom and "减小 batch size" in oom
    assert "Address already in use" not in oom
    assert "更换 MASTER_PORT" in chunks[1].text


def test_a_subheading_used_once_stays_its_own_section():
    doc = "# Doc\n\n## Problem\n\nText.\n\n### Root cause\n\nThe cause.\n"
    assert sections(chunk_document(doc, "d.md")) == ["Doc > Problem", "Doc > Problem > Root cause"]


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("runbook.rst", ["Cluster runbook > NCCL timeouts", "Cluster runbook > NCCL timeouts > Fix"]),
        ("runbook.txt", ["runbook"]),  # not .rst: underlines are plain text, the file title names the chunk
    ],
)
def test_rst_underlined_titles_become_headings(source, expected):
    doc = """Cluster runbook
===============

NCCL timeouts
-------------

The watchdog fires after 600 s.

Fix
~~~

Raise the timeout.
"""
    chunks = chunk_document(doc, source, title="runbook")
    assert sections(chunks) == expected


def test_document_without_headings_uses_its_title():
    chunks = chunk_document("just a note about NCCL\n", "notes.txt", title="notes")
    assert [(c.section, c.headings) for c in chunks] == [("notes", ("notes",))]
