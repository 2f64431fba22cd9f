"""The web chat's conversations, kept so that a reload (or tomorrow) shows them again.

One SQLite file beside the feedback store. A conversation belongs to its owner: the signed-in user where
``TRAINDOC_WEB_AUTH`` is set, otherwise the browser (a random id the page keeps in its local storage). What is
kept is what the page showed, with secrets masked as in the feedback store (``common.secrets.mask``): the
questions, the answers, their sources, and the log lines a follow-up needs (the uploaded files themselves are
not copied). Conversations not touched for ``TRAINDOC_WEB_HISTORY_DAYS`` days (default 30) are deleted; 0 keeps
nothing.

Saving a turn costs that turn, not the conversation: each item of the state (a message, an
answer, a turn) is masked once and its JSON kept (``_Fragments``, per conversation, in memory); a save masks what is
new or changed and joins the rest, the same text ``json.dumps(masked(state))`` makes.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections import OrderedDict
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common.errors import ConfigError
from common.private import private_file
from common.secrets import mask

SCHEMA = """
CREATE TABLE IF NOT EXISTS conversation (
    id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    created REAL NOT NULL,
    updated REAL NOT NULL,
    title TEXT NOT NULL,
    state TEXT NOT NULL
)
"""
INDEX = "CREATE INDEX IF NOT EXISTS conversation_owner ON conversation (owner, updated)"
TITLE_CHARS = 60
DAY_S = 86400.0
KEPT_CHARS = 32_768  # of one text in a saved conversation: a pasted log's head and tail, not the whole log again
TAIL_CHARS = 4_096  # of those, from its end (where a log's failure usually is)


def kept(text: str) -> str:
    """A text as the history keeps it: whole up to ``KEPT_CHARS``, else its head and its tail around one line saying
    how much was left out (a 5 MB paste was stored whole, in the message, the answer and the turn, every turn)."""
    if len(text) <= KEPT_CHARS:
        return text
    left_out = len(text) - KEPT_CHARS
    return (f"{text[:KEPT_CHARS - TAIL_CHARS]}\n… [{left_out:,} characters of this paste are not kept in the history]\n"
            f"{text[-TAIL_CHARS:]}")


def masked(value: Any) -> Any:
    """Every string in a JSON-like value with its secrets masked (and cut to what the history keeps)."""
    if isinstance(value, str):
        return mask(kept(value))
    if isinstance(value, list | tuple):
        return [masked(v) for v in value]
    if isinstance(value, dict):
        return {k: masked(v) for k, v in value.items()}
    return value


def _kept_form(value: Any) -> Any:
    """What masking reads of ``value``: its structure, each string as ``kept`` cuts it (cheap: no masking)."""
    if isinstance(value, str):
        return kept(value)
    if isinstance(value, list | tuple):
        return [_kept_form(v) for v in value]
    if isinstance(value, dict):
        return {k: _kept_form(v) for k, v in value.items()}
    return value


def _dumped(value: Any) -> str:
    return json.dumps(masked(value), ensure_ascii=False)


MEMO_CONVERSATIONS = 8  # conversations whose masked items are kept in memory (the rest are masked again when saved)
MEMO_CHARS = 48 * 2**20  # and their JSON, in all


class _Fragments:
    """One conversation's items as saved: for each list of the state, each item's kept form and its masked JSON."""

    def __init__(self) -> None:
        self.lists: dict[str, list[tuple[Any, str]]] = {}
        self.chars = 0
        self.lock = threading.Lock()  # one save of a conversation at a time (two tabs on one conversation)

    def body(self, state: dict[str, Any]) -> str:
        """``json.dumps(masked(state), ensure_ascii=False)``, masking only the items not seen as they are now."""
        if not all(isinstance(key, str) for key in state):  # json.dumps would write such a key its own way
            return _dumped(state)
        parts = []
        for key, value in state.items():
            if not isinstance(value, list):
                parts.append(f"{json.dumps(key, ensure_ascii=False)}: {_dumped(value)}")
                continue
            before = self.lists.get(key, [])
            now: list[tuple[Any, str]] = []
            for index, item in enumerate(value):
                form = _kept_form(item)
                if index < len(before) and before[index][0] == form:
                    now.append(before[index])
                else:
                    now.append((form, _dumped(item)))
            self.lists[key] = now
            parts.append(f"{json.dumps(key, ensure_ascii=False)}: [{', '.join(f for _, f in now)}]")
        body = "{" + ", ".join(parts) + "}"
        self.chars = len(body)
        return body


@dataclass(frozen=True)
class Saved:
    id: str
    title: str
    updated: float
    state: dict[str, Any]


class HistoryStore:
    """Conversations per owner; ``days`` <= 0 keeps none (every call is then a no-op)."""

    def __init__(self, path: Path, days: float) -> None:
        self.path = path
        self.days = days
        self._memo: OrderedDict[tuple[str, str], _Fragments] = OrderedDict()
        self._memo_lock = threading.Lock()
        if not self.enabled:
            return
        try:
            private_file(path)  # 0600 in a 0700 folder: it holds what users asked
            with closing(self._connect()) as db, db:
                db.execute(SCHEMA)
                db.execute(INDEX)
        except (OSError, sqlite3.Error) as exc:
            raise ConfigError(f"cannot open the web chat history {path}: {exc}",
                              hint="set TRAINDOC_DATA_DIR to a writable folder, or TRAINDOC_WEB_HISTORY_DAYS=0") from exc
        self.expire()

    @property
    def enabled(self) -> bool:
        return self.days > 0

    def _connect(self) -> sqlite3.Connection:
        return sqlite3.connect(self.path, timeout=10)

    def expire(self, now: float | None = None) -> int:
        """Delete the conversations older than the retention; how many went."""
        if not self.enabled:
            return 0
        cutoff = (time.time() if now is None else now) - self.days * DAY_S
        with closing(self._connect()) as db, db:
            return db.execute("DELETE FROM conversation WHERE updated < ?", (cutoff,)).rowcount

    def save(self, owner: str, conversation: str, title: str, state: dict[str, Any]) -> None:
        if not (self.enabled and owner and conversation):
            return
        now = time.time()
        fragments = self._fragments(owner, conversation)
        with fragments.lock:
            body = fragments.body(state)
            self.expire(now)
            with closing(self._connect()) as db, db:
                if not db.execute("UPDATE conversation SET updated = ?, state = ? WHERE id = ? AND owner = ?",
                                  (now, body, conversation, owner)).rowcount:
                    # a new row: its title is masked once, with it (an update keeps it), not every turn
                    title = " ".join(mask(title).split())[:TITLE_CHARS] or "(log)"
                    db.execute("INSERT INTO conversation (id, owner, created, updated, title, state)"
                               " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(id) DO UPDATE SET updated = excluded.updated,"
                               " state = excluded.state WHERE conversation.owner = excluded.owner",
                               (conversation, owner, now, now, title, body))
        self._trim()

    def _fragments(self, owner: str, conversation: str) -> _Fragments:
        with self._memo_lock:
            key = (owner, conversation)
            found = self._memo.get(key)
            if found is None:
                found = self._memo[key] = _Fragments()
            self._memo.move_to_end(key)
            return found

    def _trim(self) -> None:
        """The memo within MEMO_CONVERSATIONS and MEMO_CHARS: the least recently saved conversations go first."""
        with self._memo_lock:
            while len(self._memo) > 1 and (len(self._memo) > MEMO_CONVERSATIONS or
                                           sum(f.chars for f in self._memo.values()) > MEMO_CHARS):
                self._memo.popitem(last=False)

    def load(self, owner: str, conversation: str) -> Saved | None:
        """The owner's conversation (another owner's id reads as none)."""
        if not (self.enabled and owner and conversation):
            return None
        with closing(self._connect()) as db:
            row = db.execute("SELECT id, title, updated, state FROM conversation WHERE id = ? AND owner = ? AND updated >= ?",
                             (conversation, owner, time.time() - self.days * DAY_S)).fetchone()
        return Saved(row[0], row[1], row[2], json.loads(row[3])) if row else None

    def recent(self, owner: str, limit: int = 20) -> list[Saved]:
        """The owner's conversations, newest first (without their state)."""
        if not (self.enabled and owner):
            return []
        with closing(self._connect()) as db:
            rows = db.execute("SELECT id, title, updated FROM conversation WHERE owner = ? AND updated >= ?"
                              " ORDER BY updated DESC LIMIT ?", (owner, time.time() - self.days * DAY_S, limit)).fetchall()
        return [Saved(r[0], r[1], r[2], {}) for r in rows]

    def rows(self) -> list[dict[str, Any]]:
        """Everything stored (for tests and for a person checking what is kept)."""
        if not self.enabled:
            return []
        with closing(self._connect()) as db:
            db.row_factory = sqlite3.Row
            return [dict(r) for r in db.execute("SELECT * FROM conversation ORDER BY updated")]


def owner_of(username: str | None, browser: str | None) -> str:
    """Whose conversations these are: the signed-in user, else the browser's own id."""
    if username:
        return f"user:{username}"
    return f"browser:{browser}" if browser else ""
