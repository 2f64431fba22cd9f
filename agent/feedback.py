"""Answer feedback (thumbs up / down from the web UI and Slack) in a local SQLite file, exportable as
eval cases so questions users marked become test cases."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

from agent.answer import Answer
from common.errors import ConfigError
from common.private import private_file
from common.secrets import mask

SCHEMA = """
CREATE TABLE IF NOT EXISTS feedback (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    created REAL NOT NULL,
    channel TEXT NOT NULL,
    rating INTEGER NOT NULL CHECK (rating IN (-1, 1)),
    question TEXT NOT NULL,
    answer TEXT NOT NULL,
    citations TEXT NOT NULL,
    no_match INTEGER NOT NULL,
    backend TEXT NOT NULL
)
"""


class FeedbackStore:
    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            private_file(path)  # 0600 in a 0700 folder: it holds what users asked
            with closing(self._connect()) as db, db:
                db.execute(SCHEMA)
        except (OSError, sqlite3.Error) as exc:
            raise ConfigError(f"cannot open the feedback database {path}: {exc}",
                              hint="set TRAINDOC_FEEDBACK_DB to a writable file") from exc

    def _connect(self) -> sqlite3.Connection:
        return sqlite3.connect(self.path, timeout=10)

    def record(self, answer: Answer, rating: int, channel: str) -> int:
        """Store a rating; the question and the answer are stored with their secrets masked (the file is
        exported and shared as eval cases)."""
        if rating not in (-1, 1):
            raise ValueError("rating is +1 or -1")
        citations = [{"n": c.n, "source": mask(c.source), "section": mask(c.section), "chunk_id": c.chunk_id}
                     for c in answer.citations]
        with closing(self._connect()) as db, db:
            cursor = db.execute(
                "INSERT INTO feedback (created, channel, rating, question, answer, citations, no_match, backend)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (time.time(), channel, rating, mask(answer.question), mask(answer.answer),
                 json.dumps(citations, ensure_ascii=False), int(answer.no_match), answer.backend),
            )
            return int(cursor.lastrowid or 0)

    def rows(self) -> Iterator[dict[str, Any]]:
        with closing(self._connect()) as db:
            db.row_factory = sqlite3.Row
            for row in db.execute("SELECT * FROM feedback ORDER BY id"):
                yield dict(row)


def as_eval_case(row: dict[str, Any]) -> dict[str, Any]:
    """A feedback row in the eval-case format (dev.jsonl): a thumbs-up answer's first citation is its
    gold; a thumbs-down keeps an empty gold and says what was wrongly cited, for a person to label."""
    citations = json.loads(row["citations"])
    good = row["rating"] > 0
    gold = [{"file": Path(c["source"]).name, "heading": c["section"].split(" > ")[-1]} for c in citations[:1]] if good else []
    return {
        "id": f"fb{row['id']:04d}",
        "query": row["question"],
        "gold": gold,
        "rating": "good" if good else "bad",
        "channel": row["channel"],
        "notes": "" if good else "marked bad; cited: " + "; ".join(c["section"] for c in citations[:3]),
    }
