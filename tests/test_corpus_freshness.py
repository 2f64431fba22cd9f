"""Documents a team adds are used at once: a question checks the corpus against the index (sizes and times, no model,
no hashing of unchanged files) and `ask` indexes what changed before answering; a server indexes it on a thread and
says so in its answers until done; a read-only data folder says in one line that they are not indexed.

A real chromadb index (a private copy of the session's) and a team folder of one or two Markdown files."""

from __future__ import annotations

import json
import os
import pty
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from clikit import BIN, ROOT

from agent.core import Question, Troubleshooter
from agent.events import Notice
from common.settings import Settings
from corpus import discovery
from corpus.manifest import manifest_path

LUSTRE = """# Storage runbook

## Checkpoint save fails with Read-only file system on Lustre

Workers die while saving checkpoints with `OSError: [Errno 30] Read-only file system: '/lustre/ckpt'`.
The Lustre client remounted read-only after an OST failure: ask storage to recover the OST, then remount /lustre.
"""
LUSTRE_QUESTION = "OSError Errno 30 Read-only file system while saving a checkpoint to /lustre"
IB = """# Fabric runbook

## InfiniBand memory registration fails

Workers die at start-up with `ibv_reg_mr failed: Cannot allocate memory`: the container's locked-memory limit is
too small for RDMA buffers. Run the job with `ulimit -l unlimited`.
"""
IB_QUESTION = "ibv_reg_mr failed: Cannot allocate memory when InfiniBand workers start"


def _team(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    team = tmp_path / "team"
    team.mkdir()
    monkeypatch.setenv("TRAINDOC_CORPUS", str(team))
    return team


def _ask(*args: str, stderr: int | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / "ask"), "--json", "--no-probes", *args], cwd=ROOT, env=dict(os.environ),
                          stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE if stderr is None else stderr, text=True, timeout=180, check=False)


def _sources(answer: dict) -> list[str]:  # type: ignore[type-arg]
    return [Path(c["source"]).name for c in answer["citations"]]


def test_a_document_added_is_indexed_before_ask_answers_and_an_unchanged_corpus_is_not(index_copy, tmp_path, monkeypatch):
    team = _team(tmp_path, monkeypatch)
    runbook = team / "lustre.md"
    runbook.write_text(LUSTRE, encoding="utf-8")

    result = _ask(LUSTRE_QUESTION)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""  # not a terminal: indexed in silence
    answer = json.loads(result.stdout)
    assert _sources(answer)[0] == "lustre.md" and "notice" not in answer
    manifest = manifest_path(Settings.from_env())
    recorded = json.loads(manifest.read_text(encoding="utf-8"))
    assert str(runbook.resolve()) in recorded["files"]

    # Unchanged: the sizes and times agree, so no document is read, no model loaded, nothing indexed.
    reads: list[Path] = []
    real_read = discovery.read_document
    monkeypatch.setattr(discovery, "read_document", lambda path, cap: reads.append(path) or real_read(path, cap))
    troubleshooter = Troubleshooter(Settings.from_env())
    troubleshooter.retriever()
    assert troubleshooter.index_keeper().lag is None
    assert reads == []
    assert troubleshooter.embedder()._loaded is None
    assert json.loads(manifest.read_text(encoding="utf-8")) == recorded

    # Touched (a checkout, a copy), not changed: read once to tell, not re-indexed, its new time recorded.
    os.utime(runbook, ns=(runbook.stat().st_atime_ns, runbook.stat().st_mtime_ns + 10**9))
    touched = Troubleshooter(Settings.from_env())
    touched.retriever()
    assert touched.index_keeper().lag is None and touched.index_keeper().generation == 0
    assert reads == [runbook.resolve()]
    assert touched.embedder()._loaded is None
    after = json.loads(manifest.read_text(encoding="utf-8"))
    assert after["version"] == recorded["version"]
    assert after["stats"][str(runbook.resolve())] == [runbook.stat().st_size, runbook.stat().st_mtime_ns]

    # On a terminal, a line says why this question takes longer; the answer itself stays on stdout.
    (team / "fabric.md").write_text(IB, encoding="utf-8")
    main, terminal = pty.openpty()
    try:
        shown = _ask(IB_QUESTION, stderr=terminal)
        os.close(terminal)
        said = os.read(main, 65536).decode("utf-8", errors="replace")
    finally:
        os.close(main)
    assert shown.returncode == 0
    assert "indexing 1 new document before answering" in said
    assert _sources(json.loads(shown.stdout))[0] == "fabric.md"


def test_a_server_indexes_in_the_background_and_says_so_until_done(index_copy, tmp_path, monkeypatch):
    team = _team(tmp_path, monkeypatch)
    troubleshooter = Troubleshooter(Settings.from_env(), index_in_background=True)
    troubleshooter.retriever()  # the server has loaded its index before the team adds a runbook
    (team / "lustre.md").write_text(LUSTRE, encoding="utf-8")

    events: list[object] = []
    first = troubleshooter.ask(Question(text=LUSTRE_QUESTION, probes=False), on_event=events.append)
    assert first.notice == "1 new document is being indexed; this answer does not use it yet"
    assert [e.text for e in events if isinstance(e, Notice)] == [first.notice]  # the web chat shows Notice events
    assert "lustre.md" not in [Path(c.source).name for c in first.citations]

    assert troubleshooter.index_keeper().wait(120)
    later = troubleshooter.ask(Question(text=LUSTRE_QUESTION, probes=False))
    assert later.notice is None
    assert Path(later.citations[0].source).name == "lustre.md"

    chinese = troubleshooter.index_keeper()  # the notice follows the question's language
    (team / "fabric.md").write_text(IB, encoding="utf-8")
    zh = troubleshooter.ask(Question(text="InfiniBand 启动时注册内存失败怎么办", probes=False))
    assert zh.notice == "1 个新文档正在建立索引，本回答尚未使用"
    assert chinese.wait(120)


def test_a_configured_folder_that_does_not_exist_is_named_in_the_answer(index_copy, tmp_path, monkeypatch):
    monkeypatch.setenv("TRAINDOC_CORPUS", str(tmp_path / "runbooks-typo"))
    answer = Troubleshooter(Settings.from_env()).ask(Question(text="NCCL timeout in all_reduce", probes=False))
    assert answer.notice == f"TRAINDOC_CORPUS names {tmp_path / 'runbooks-typo'}, which does not exist: nothing from it is indexed"
    assert answer.citations


def test_a_read_only_data_folder_says_in_one_line_that_new_documents_are_not_indexed(index_copy, tmp_path, monkeypatch):
    if not shutil.which("unshare") or os.geteuid() != 0:
        pytest.skip("needs root and a mount namespace (unshare) to make the data folder read-only")
    team = _team(tmp_path, monkeypatch)
    (team / "lustre.md").write_text(LUSTRE, encoding="utf-8")
    quoted = " ".join(shlex.quote(a) for a in [str(BIN / "ask"), "--json", "--no-probes", LUSTRE_QUESTION])
    script = (f"mount --bind {index_copy} {index_copy} && mount -o remount,bind,ro {index_copy} && "
              f"exec {quoted} < /dev/null")
    result = subprocess.run(["unshare", "-Urm", "sh", "-c", script], capture_output=True, text=True, cwd=ROOT,
                            env=dict(os.environ), timeout=180, check=False)
    if result.returncode != 0 and "mount" in result.stderr:
        pytest.skip(f"no read-only bind mount here: {result.stderr.strip()[:200]}")
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    answer = json.loads(result.stdout)
    assert answer["notice"] == (f"1 new document is not indexed; this answer does not use it; {index_copy} is read-only "
                                "here: ask its owner to run `traindoc index`, or set TRAINDOC_DATA_DIR to a writable folder")
    assert "lustre.md" not in _sources(answer) and answer["citations"]
    assert "lustre.md" not in manifest_path(Settings.from_env()).read_text(encoding="utf-8")
