"""The corpus is confined: only regular files under the folder they were configured from are indexed; a link
out of it, a device, a FIFO is skipped and named; what the index never read, no tool can hand out."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest
from clikit import chunk_total

from corpus.discovery import Refused, discover, read_document

SECRET_LINE = "root:x:0:0:confined-test-marker:/root:/bin/bash"


def _ok(result):  # type: ignore[no-untyped-def]
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    return result


def _sources(data_dir: Path) -> set[str]:
    from common.settings import Settings
    from corpus.snapshot import read_snapshot

    snapshot = read_snapshot(Settings.from_env({"TRAINDOC_DATA_DIR": str(data_dir)}))
    assert snapshot is not None
    return {c.source for c in snapshot.chunks}


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    (folder / "passwd").write_text(SECRET_LINE + "\n", encoding="utf-8")
    (folder / "notes.md").write_text(f"# Notes\n\n## Shadow\n\n{SECRET_LINE}\n", encoding="utf-8")
    return folder


@pytest.fixture
def runbooks(tmp_path: Path, outside: Path) -> Path:
    """A git checkout of runbooks: internal links (a file, a folder) that must keep working, and hostile ones."""
    docs = tmp_path / "runbooks"
    (docs / "v3").mkdir(parents=True)
    (docs / ".git").mkdir()
    (docs / "v3" / "nccl.md").write_text("# NCCL\n\n## Ring hangs\n\nSet NCCL_P2P_DISABLE=1 on old drivers.\n",
                                         encoding="utf-8")
    (docs / ".git" / "HEAD.md").write_text("# not a document\n", encoding="utf-8")
    (docs / "latest.md").symlink_to("v3/nccl.md")
    (docs / "current").symlink_to("v3", target_is_directory=True)
    (docs / "passwd.md").symlink_to(outside / "passwd")
    (docs / "team").symlink_to(outside, target_is_directory=True)
    (docs / "loop").symlink_to(docs, target_is_directory=True)
    (docs / "broken.md").symlink_to(docs / "missing.md")
    os.mkfifo(docs / "pipe.md")
    return docs


def test_discovery_keeps_internal_links_and_names_every_skip(runbooks: Path) -> None:
    found = discover([runbooks], max_bytes=2**20)
    assert found.files == [(runbooks / "v3" / "nccl.md").resolve()]  # once, through every internal link
    reasons = dict(found.skipped)
    assert "outside" in reasons[str(runbooks / "passwd.md")]
    assert "outside" in reasons[str(runbooks / "team")]
    assert reasons[str(runbooks / "pipe.md")] == "a FIFO, not a document"
    assert reasons[str(runbooks / "broken.md")] == "a broken symlink"
    assert not any(".git" in shown for shown, _ in found.skipped)


def test_index_skips_what_leaves_the_folder_and_ask_never_cites_it(index_copy: Path, runbooks: Path, cli) -> None:  # type: ignore[no-untyped-def]
    result = _ok(cli("traindoc", "index", str(runbooks), timeout=240))
    assert "1 added" in result.stdout and "4 skipped" in result.stdout
    for name in ("passwd.md", "team", "pipe.md", "broken.md"):
        assert f"skipped {runbooks / name}" in result.stderr
    assert not any("elsewhere" in source or "passwd" in source for source in _sources(index_copy))

    answer = _ok(cli("ask", "--json", "--no-probes", f"{SECRET_LINE} confined-test-marker"))
    data = json.loads(answer.stdout)
    assert "confined-test-marker:/root" not in answer.stdout.replace(f"{SECRET_LINE} confined", "")
    assert not any("elsewhere" in c["source"] for c in data["citations"])


def test_a_document_replaced_by_a_link_out_leaves_the_index(index_copy: Path, tmp_path: Path, outside: Path, cli) -> None:  # type: ignore[no-untyped-def]
    docs = tmp_path / "docs"
    docs.mkdir()
    page = docs / "page.md"
    page.write_text("# Page\n\n## Harmless\n\nNothing to see.\n", encoding="utf-8")
    _ok(cli("traindoc", "index", str(docs)))
    before = chunk_total(_ok(cli("traindoc", "index")).stdout)
    page.unlink()
    page.symlink_to(outside / "notes.md")
    result = _ok(cli("traindoc", "index"))
    assert "1 removed" in result.stdout and "1 skipped" in result.stdout
    assert chunk_total(result.stdout) == before - 1
    assert not any("notes" in s or "page" in s for s in _sources(index_copy))


def test_a_fifo_or_a_swapped_link_is_refused_at_read_time(tmp_path: Path, outside: Path) -> None:
    """A file that became a FIFO or a link after discovery is refused, never waited on or followed."""
    pipe = tmp_path / "late.md"
    os.mkfifo(pipe)
    done = threading.Event()

    def read() -> None:
        with pytest.raises(Refused, match="FIFO"):
            read_document(pipe, 2**20)
        done.set()

    threading.Thread(target=read, daemon=True).start()
    assert done.wait(5), "reading a FIFO blocked"
    link = tmp_path / "swapped.md"
    link.symlink_to(outside / "passwd")
    with pytest.raises(Refused, match="symlink"):
        read_document(link, 2**20)


def test_a_document_above_the_cap_is_skipped_with_the_cap_named(index_copy: Path, tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "huge.md").write_text("# Huge\n\n" + "word " * 60_000, encoding="utf-8")
    result = _ok(cli("traindoc", "index", str(docs), env={"TRAINDOC_MAX_DOC_MB": "0.1"}))
    assert "1 skipped" in result.stdout
    assert "above the 0.1 MB cap (TRAINDOC_MAX_DOC_MB)" in result.stderr


def test_the_agent_search_tool_hands_out_only_indexed_text(index_copy: Path, runbooks: Path, cli) -> None:  # type: ignore[no-untyped-def]
    from dataclasses import replace

    from agent.core import Troubleshooter
    from agent.llm.toolbox import Toolbox
    from common.redaction import Redactor
    from common.settings import Settings

    _ok(cli("traindoc", "index", str(runbooks), timeout=240))
    troubleshooter = Troubleshooter(replace(Settings.from_env(), data_dir=index_copy))
    toolbox = Toolbox(retriever=troubleshooter.retriever(), probe_context=None, redactor=Redactor())
    for query in (SECRET_LINE, "confined-test-marker shadow notes", "NCCL ring hangs"):
        output = toolbox.search_docs(query)
        assert "confined-test-marker" not in output
    assert "NCCL_P2P_DISABLE" in toolbox.search_docs("NCCL ring hangs P2P disable")


def test_a_folder_named_through_a_link_lists_its_documents_by_their_real_paths(tmp_path):
    real = tmp_path / "real" / "docs"
    (real / "sub").mkdir(parents=True)
    (real / "a.md").write_text("# A\n", encoding="utf-8")
    (real / "sub" / "b.md").write_text("# B\n", encoding="utf-8")
    (tmp_path / "link").symlink_to(tmp_path / "real")
    found = discover([tmp_path / "link" / "docs"], 2**20)
    assert found.files == sorted([(real / "a.md").resolve(), (real / "sub" / "b.md").resolve()])
    assert set(found.stats) == set(found.files)
