"""What users typed is kept for their eyes only: the web chat's history and the feedback store are 0600 (and so are
SQLite's files beside them) in a 0700 data folder, created so and narrowed when found wider; a folder the user
named for a file is left as it is."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from agent.answer import Answer
from agent.feedback import FeedbackStore
from common.private import mode_of
from traindoc_web.history import HistoryStore


def _answer() -> Answer:
    return Answer(question="why does NCCL hang?", answer="### Likely cause\nNCCL timeout", citations=[], findings=[],
                  no_match=False)


def _stores(data: Path) -> list[Path]:
    feedback = FeedbackStore(data / "feedback.sqlite3")
    feedback.record(_answer(), 1, "web")
    history = HistoryStore(data / "web-history.sqlite3", days=30)
    history.save("browser:b1", "c1", "why does NCCL hang?", {"turns": []})
    return [feedback.path, history.path]


def test_the_databases_are_created_private_in_a_private_data_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = tmp_path / "data"
    monkeypatch.setenv("TRAINDOC_DATA_DIR", str(data))
    os.umask(0o022)
    for path in _stores(data):
        assert mode_of(path) == 0o600, path
    assert mode_of(data) == 0o700


def test_wider_modes_found_are_narrowed_when_opened(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = tmp_path / "data"
    data.mkdir(mode=0o755)
    data.chmod(0o755)
    monkeypatch.setenv("TRAINDOC_DATA_DIR", str(data))
    for name in ("feedback.sqlite3", "web-history.sqlite3"):
        (data / name).touch()
        (data / name).chmod(0o644)
    sqlite3.connect(data / "feedback.sqlite3").close()
    paths = _stores(data)
    assert [mode_of(p) for p in paths] == [0o600, 0o600]
    assert mode_of(data) == 0o700


def test_a_folder_the_user_named_for_a_file_keeps_its_mode(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o755)
    monkeypatch.setenv("TRAINDOC_DATA_DIR", str(tmp_path / "data"))
    store = FeedbackStore(shared / "feedback.sqlite3")
    assert mode_of(store.path) == 0o600 and mode_of(shared) == 0o755


def test_the_web_page_key_is_private_from_its_creation(tmp_path: Path) -> None:
    import os
    import stat

    from traindoc_web.app import browser_secret

    old = os.umask(0o022)  # a usual umask: a plain write would make it 0644 until a chmod
    try:
        key = browser_secret(tmp_path / "data" / "web-history.key")
    finally:
        os.umask(old)
    path = tmp_path / "data" / "web-history.key"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and path.read_text(encoding="utf-8") == key
    assert browser_secret(path) == key  # made once, read back after
