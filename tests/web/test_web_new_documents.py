"""A runbook a team adds while `traindoc web` runs is indexed on a thread of the server: the answers say so until it
is done, and then cite it (the real server over a private copy of the session's index, asked through its API)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from web_server_kit import start_web

pytestmark = pytest.mark.slow

LUSTRE = """# Storage runbook

## Checkpoint save fails with Read-only file system on Lustre

Workers die while saving checkpoints with `OSError: [Errno 30] Read-only file system: '/lustre/ckpt'`.
The Lustre client remounted read-only after an OST failure: ask storage to recover the OST, then remount /lustre.
"""
QUESTION = "OSError Errno 30 Read-only file system while saving a checkpoint to /lustre"


def test_a_document_added_while_the_server_runs_is_announced_then_used(shared_index: Path, tmp_path: Path) -> None:
    from gradio_client import Client

    team = tmp_path / "team"
    team.mkdir()
    server = start_web(tmp_path / "web", shared_index, env={"TRAINDOC_CORPUS": str(team)})
    try:
        client = Client(server.url, verbose=False)
        (team / "lustre.md").write_text(LUSTRE, encoding="utf-8")
        first = client.predict(QUESTION, api_name="/ask")
        assert first["notice"] == "1 new document is being indexed; this answer does not use it yet"
        assert not any(c["source"].endswith("lustre.md") for c in first["citations"])

        deadline = time.monotonic() + 180  # until the server's thread has indexed it
        later = first
        while "notice" in later and time.monotonic() < deadline:
            time.sleep(1)
            later = client.predict(QUESTION, api_name="/ask")
        assert "notice" not in later, later["notice"]
        assert later["citations"][0]["source"].endswith("lustre.md")
    finally:
        server.stop()
