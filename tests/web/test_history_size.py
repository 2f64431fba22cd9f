"""Issue 40 points 2 and 4: the history keeps what a conversation needs, not whole pasted logs: a 5 MB paste saved with
its turn is kept as its head and its tail (the failure at its end), and saving turn after turn does not grow the
file by the paste each time."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from traindoc_web.history import KEPT_CHARS, HistoryStore


def test_a_big_paste_is_kept_as_its_head_and_tail_and_the_file_stays_small(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path / "h.sqlite3", days=30)
    paste = "".join(f"step {i} loss 0.{i % 97:02d}\n" for i in range(250_000)) + "RuntimeError: CUDA out of memory\n"
    assert len(paste) > 5_000_000
    turns: list[dict[str, str]] = []
    for n in range(5):  # every turn saves the whole state
        turns.append({"role": "user", "content": paste if n == 0 else f"follow-up {n}"})
        store.save("owner", "conv", "first", {"chat": turns, "answers": [{"question": paste}], "turns": turns})
    saved = store.load("owner", "conv")
    assert saved is not None
    first = saved.state["turns"][0]["content"]
    assert len(first) < KEPT_CHARS + 200 and "not kept in the history" in first
    assert first.startswith("step 0 loss") and first.rstrip().endswith("RuntimeError: CUDA out of memory")
    assert [t["content"] for t in saved.state["turns"][1:]] == [f"follow-up {n}" for n in range(1, 5)]
    with sqlite3.connect(tmp_path / "h.sqlite3") as db:
        stored = [body for (body,) in db.execute("SELECT state FROM conversation UNION ALL SELECT body FROM item")]
    assert sum(map(len, stored)) < 4 * KEPT_CHARS + 10_000  # three copies of the paste at most, each cut: not 3 x 5 MB
    assert saved.state["answers"][0]["question"] == first


def test_the_web_names_a_team_document_by_its_folder_and_file_never_the_servers_path() -> None:
    from agent.answer import Answer, Citation
    from corpus.manifest import shared_source
    from traindoc_web.markup import shared_json, sources_html

    team = "/srv/private/acme-secrets/team-runbooks/nccl.md"
    answer = Answer(question="q", answer="a [1] [2]", citations=[
        Citation(1, team, "NCCL > IB", "c1", 0.9, text="use NCCL_IB_HCA"),
        Citation(2, "corpus/runbooks/en/port_in_use.md", "Port", "c2", 0.8, text="ss -ltnp")], findings=[],
        no_match=False)
    data = shared_json(answer)
    assert [c["source"] for c in data["citations"]] == ["team-runbooks/nccl.md", "corpus/runbooks/en/port_in_use.md"]
    assert "/srv/private" not in str(data) and "/srv/private" not in sources_html(answer)
    assert shared_source("corpus/004_f7d4acab9feaf887.txt") == "corpus/004_f7d4acab9feaf887.txt"
