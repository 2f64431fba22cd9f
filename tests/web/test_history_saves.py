"""Saving a turn of the web chat costs that turn, not the conversation: after N turns the file reads back all N
(in this process and in a new one), and each save writes the new turn's rows alone and masks only its texts, the
40th as the 2nd; a process that does not know the conversation (a restart) still writes only what is new; a save that
failed is made good by the next one; a conversation kept by an older traindoc (one row holding its whole state) reads
as it was and is kept on from there."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

import traindoc_web.history as history
from traindoc_web.history import HistoryStore, masked

OWNER, CONVERSATION = "browser:b1", "c1"


class Writes:
    """What a store's connections wrote: rows changed and characters sent with INSERT and UPDATE, per save."""

    def __init__(self, store: HistoryStore, monkeypatch: pytest.MonkeyPatch) -> None:
        self.rows: list[int] = []
        self.chars: list[int] = []
        self.masked: list[int] = []
        self.fail_next = False
        writes = self

        class Recording(sqlite3.Connection):
            def execute(self, sql: str, parameters: Any = ()) -> sqlite3.Cursor:  # type: ignore[override]
                if sql.lstrip().startswith(("INSERT", "UPDATE")):
                    writes.chars[-1] += sum(len(str(p)) for p in parameters)
                return super().execute(sql, parameters)

            def executemany(self, sql: str, rows: Any) -> sqlite3.Cursor:  # type: ignore[override]
                rows = list(rows)
                if writes.fail_next:
                    writes.fail_next = False
                    raise sqlite3.OperationalError("database or disk is full")
                writes.chars[-1] += sum(len(str(p)) for row in rows for p in row)
                return super().executemany(sql, rows)

            def close(self) -> None:
                writes.rows[-1] += self.total_changes
                super().close()

        path = store.path
        monkeypatch.setattr(store, "_connect", lambda: sqlite3.connect(path, timeout=10, factory=Recording))
        real_mask = history.mask

        def counted(text: str) -> str:
            self.masked[-1] += 1
            return real_mask(text)

        monkeypatch.setattr(history, "mask", counted)

    def save(self, store: HistoryStore, state: dict[str, Any]) -> None:
        self.rows.append(0)
        self.chars.append(0)
        self.masked.append(0)
        store.save(OWNER, CONVERSATION, "NCCL watchdog timeout", state)


def _turn(state: dict[str, list[Any]], n: int) -> None:
    """One turn as the chat adds it: the question and the answer shown, the answer's JSON, the two turns."""
    question = f"turn {n}: NCCL watchdog timeout on rank {n} with HF_TOKEN=hf_{'a1b2c3d4' * 5}"
    answer = f"turn {n}: " + "the collective timed out; check the slow rank first. " * 40
    state["chat"] += [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]
    state["answers"].append({"index": len(state["chat"]) - 1, "answer": {"answer": answer, "citations": [n]},
                             "texts": {f"chunk{n}": "section text " * 50}, "turn": n})
    state["turns"] += [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]


def _empty() -> dict[str, list[Any]]:
    return {"chat": [], "answers": [], "turns": []}


def _as_kept(state: dict[str, Any]) -> dict[str, Any]:
    return json.loads(json.dumps(masked(state), ensure_ascii=False))


def test_a_save_writes_only_the_new_turn_and_the_file_reads_back_every_turn(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    store = HistoryStore(tmp_path / "h.sqlite3", days=30)
    writes = Writes(store, monkeypatch)
    state = _empty()
    for n in range(40):
        _turn(state, n)
        writes.save(store, state)
    assert set(writes.rows[1:]) == {1 + 5}  # the conversation's row and the turn's five items, the 40th as the 2nd
    assert writes.masked[-1] == writes.masked[1] and writes.masked[-1] < 20
    whole = sum(len(json.dumps(masked(v), ensure_ascii=False)) for v in state.values())
    assert writes.chars[-1] < 1.2 * writes.chars[1] and writes.chars[-1] < whole / 20, (writes.chars, whole)
    saved = HistoryStore(tmp_path / "h.sqlite3", days=30).load(OWNER, CONVERSATION)  # as another process reads it
    assert saved is not None and saved.state == _as_kept(state)
    assert [t["content"].split(":")[0] for t in saved.state["turns"][::2]] == [f"turn {n}" for n in range(40)]
    assert "hf_a1b2" not in json.dumps(saved.state)


def test_a_new_process_writes_only_what_is_new_and_a_shorter_list_leaves_nothing_behind(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    state = _empty()
    for n in range(10):
        _turn(state, n)
    HistoryStore(tmp_path / "h.sqlite3", days=30).save(OWNER, CONVERSATION, "t", state)
    restarted = HistoryStore(tmp_path / "h.sqlite3", days=30)
    writes = Writes(restarted, monkeypatch)
    _turn(state, 10)
    writes.save(restarted, state)
    assert writes.rows == [1 + 5]  # everything masked once to compare, only the new turn written
    state["chat"] = state["chat"][:3]
    writes.save(restarted, state)
    saved = restarted.load(OWNER, CONVERSATION)
    assert saved is not None and saved.state == _as_kept(state) and len(saved.state["chat"]) == 3


def test_a_save_that_failed_is_made_good_by_the_next(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = HistoryStore(tmp_path / "h.sqlite3", days=30)
    writes = Writes(store, monkeypatch)
    state = _empty()
    _turn(state, 0)
    writes.save(store, state)
    _turn(state, 1)
    writes.fail_next = True
    with pytest.raises(sqlite3.OperationalError):
        writes.save(store, state)
    _turn(state, 2)
    writes.save(store, state)
    assert writes.rows[-1] == 1 + 10  # turn 1's items, lost with the failed save, and turn 2's
    saved = store.load(OWNER, CONVERSATION)
    assert saved is not None and saved.state == _as_kept(state)


def test_a_conversation_an_older_traindoc_kept_in_one_row_reads_as_it_was_and_goes_on(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite3"
    store = HistoryStore(path, days=30)
    state = _empty()
    _turn(state, 0)
    import time

    with sqlite3.connect(path) as db:
        db.execute("INSERT INTO conversation (id, owner, created, updated, title, state) VALUES (?, ?, ?, ?, ?, ?)",
                   (CONVERSATION, OWNER, time.time(), time.time(), "old", json.dumps(masked(state))))
    saved = store.load(OWNER, CONVERSATION)
    assert saved is not None and saved.state == _as_kept(state)
    _turn(state, 1)
    store.save(OWNER, CONVERSATION, "old", state)
    saved = HistoryStore(path, days=30).load(OWNER, CONVERSATION)
    assert saved is not None and saved.state == _as_kept(state) and saved.title == "old"
