"""Issue 40 point 4: the history keeps what a conversation needs, not whole pasted logs: a 5 MB paste saved with
its turn is kept as its head and its tail (the failure at its end), and saving turn after turn does not grow the
file by the paste each time."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from traindoc_web.history import KEPT_CHARS, HistoryStore


def test_a_big_paste_is_kept_as_its_head_and_tail_and_the_file_stays_small(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path / "h.sqlite3", days=30)
    paste = "".join(f"step {i} loss 0.{i % 97:02d}\n" for i in range(250_000)) + "RuntimeError: CUDA out of memory\n"
    assert len(paste) > 5_000_000
    turns: list[dict[str, str]] = []
    for n in range(5):  # every turn rewrites the whole conversation
        turns.append({"role": "user", "content": paste if n == 0 else f"follow-up {n}"})
        store.save("owner", "conv", "first", {"chat": turns, "answers": [{"question": paste}], "turns": turns})
    saved = store.load("owner", "conv")
    assert saved is not None
    first = saved.state["turns"][0]["content"]
    assert len(first) < KEPT_CHARS + 200 and "not kept in the history" in first
    assert first.startswith("step 0 loss") and first.rstrip().endswith("RuntimeError: CUDA out of memory")
    assert [t["content"] for t in saved.state["turns"][1:]] == [f"follow-up {n}" for n in range(1, 5)]
    with sqlite3.connect(tmp_path / "h.sqlite3") as db:
        (body,) = db.execute("SELECT state FROM conversation").fetchone()
    assert len(body) < 4 * KEPT_CHARS + 10_000  # three copies of the paste at most, each cut: not 3 x 5 MB
    assert json.loads(body)["answers"][0]["question"] == first
