"""The web chat's history store without a server: per owner, masked, expired after its retention, off at 0 days;
and the handlers that restore, reopen and start a chat."""

from __future__ import annotations

import json
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from common.secrets import SHAPES
from common.settings import Settings
from traindoc_web.history import DAY_S, HistoryStore, owner_of


def _state(text: str) -> dict:
    return {"chat": [{"role": "user", "content": text}], "answers": [], "turns": [{"role": "user", "content": text}]}


def test_each_owner_sees_only_their_conversations(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path / "h.sqlite3", 30)
    alice, browser = owner_of("alice", "b1"), owner_of(None, "b1")
    assert (alice, browser) == ("user:alice", "browser:b1")
    store.save(alice, "c1", "NCCL hangs", _state("NCCL hangs"))
    store.save(browser, "c2", "OOM", _state("OOM"))
    assert [s.id for s in store.recent(alice)] == ["c1"]
    assert store.load(browser, "c1") is None  # another owner's id reads as none
    store.save(browser, "c1", "hijack", _state("hijack"))  # and cannot be overwritten by them
    saved = store.load(alice, "c1")
    assert saved is not None and saved.state["chat"][0]["content"] == "NCCL hangs"
    assert owner_of(None, "") == ""
    store.save("", "c3", "nobody", _state("x"))
    assert len(store.rows()) == 2


@pytest.mark.parametrize("shape", SHAPES, ids=[s.kind for s in SHAPES])
def test_what_is_kept_is_masked(tmp_path: Path, shape) -> None:
    store = HistoryStore(tmp_path / "h.sqlite3", 30)
    text = f"NCCL timeout with {shape.example}"
    store.save("browser:b", "c", text, {**_state(text), "turns": [{"role": "user", "content": text,
                                                                   "log_errors": [shape.example]}]})
    assert shape.planted not in json.dumps(store.rows(), ensure_ascii=False)


def test_retention_deletes_old_conversations_and_zero_keeps_none(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path / "h.sqlite3", 2)
    store.save("browser:b", "old", "old", _state("old"))
    store.save("browser:b", "new", "new", _state("new"))
    assert store.expire(now=time.time() + 1.5 * DAY_S) == 0
    assert store.expire(now=time.time() + 3 * DAY_S) == 2
    assert store.recent("browser:b") == []
    off = HistoryStore(tmp_path / "off" / "h.sqlite3", 0)
    off.save("browser:b", "c", "t", _state("t"))
    assert off.load("browser:b", "c") is None and not (tmp_path / "off").exists()


def test_the_retention_setting(tmp_path: Path) -> None:
    from common.errors import ConfigError

    assert Settings.from_env({}).web_history_days == 30
    assert Settings.from_env({"TRAINDOC_WEB_HISTORY_DAYS": "0"}).web_history_days == 0
    assert Settings.from_env({"TRAINDOC_WEB_HISTORY_DAYS": "7.5"}).web_history_days == 7.5
    for bad in ("-1", "week"):
        with pytest.raises(ConfigError, match="TRAINDOC_WEB_HISTORY_DAYS"):
            Settings.from_env({"TRAINDOC_WEB_HISTORY_DAYS": bad})


def test_restore_reopen_and_new_chat(tmp_path: Path) -> None:
    from traindoc_web.chat import WebChat, WebOptions

    settings = SimpleNamespace(data_dir=tmp_path, web_history_days=30)
    chat = WebChat(SimpleNamespace(settings=settings), WebOptions(feedback_db=tmp_path / "fb.sqlite3"))  # type: ignore[arg-type]
    messages, _, answers, turns, ids, earlier = chat.restore(None)
    assert messages == [] and len(ids["browser"]) == 32 and ids["conversation"] and earlier == []
    chat._save(None, ids, [{"role": "user", "content": "why NCCL"}], [], [{"role": "user", "content": "why NCCL"}])
    again = chat.restore(ids)
    assert again[0] == [{"role": "user", "content": "why NCCL"}] and again[4] == ids
    messages, sources, answers, turns, fresh, earlier = chat.new_chat(ids)
    assert (messages, sources, answers, turns) == ([], "", [], [])
    assert fresh["browser"] == ids["browser"] and fresh["conversation"] != ids["conversation"]
    assert earlier == [("why NCCL", ids["conversation"])]
    assert chat.open_conversation(ids["conversation"], fresh)[0] == [{"role": "user", "content": "why NCCL"}]
    assert chat.restore(ids, "alice")[0] == []  # signed in, the browser's chats are not alice's
