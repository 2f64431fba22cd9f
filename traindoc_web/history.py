"""The web chat's conversations, kept so that a reload (or tomorrow) shows them again.

One SQLite file beside the feedback store. A conversation belongs to its owner: the signed-in user where
``TRAINDOC_WEB_AUTH`` is set, otherwise the browser (a random id the page keeps in its local storage). What is
kept is what the page showed, with secrets masked as in the feedback store (``common.secrets.mask``): the
questions, the answers, their sources, and the log lines a follow-up needs (the uploaded files themselves are
not copied). Conversations not touched for ``TRAINDOC_WEB_HISTORY_DAYS`` days (default 30) are deleted; 0 keeps
nothing.

Saving a turn costs that turn, not the conversation: every item of the state's lists (a message, an answer, a turn)
is a row of its own (``item``: the conversation, the list, its position, its masked JSON), and the conversation's row
keeps the rest (its lists empty). A save masks and writes only the items that are new or changed since the last
save, as this process knows them (``_Fragments``: each item's form and masked JSON, for the conversations saved
last); a conversation it does not know (a restart) is masked once and compared with what is stored.
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
ITEMS = """
CREATE TABLE IF NOT EXISTS item (
    conversation TEXT NOT NULL,
    list TEXT NOT NULL,
    position INTEGER NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (conversation, list, position)
) WITHOUT ROWID
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

Stored = dict[str, list[str]]  # each list of a conversation's state: its items' masked JSON, by position


class _Fragments:
    """One conversation's lists as this process last saved them: each item's form (``_kept_form``) and masked JSON."""

    def __init__(self) -> None:
        self.lists: dict[str, list[tuple[Any, str]]] = {}
        self.updated: float | None = None  # when it was saved (another writer since: what is stored is read again)
        self.chars = 0
        self.lock = threading.Lock()  # one save of a conversation at a time (two tabs on one conversation)

    def changes(self, state: dict[str, Any], stored: Stored | None) -> tuple[str, list[tuple[str, int, str]], Stored | None]:
        """(the state without its lists' items, masked; the items to write: list, position, masked JSON; every list
        as it now is where one is shorter than it was, else None: no row to delete). ``stored``: what the file holds,
        where this memo does not know it."""
        rest = {key: [] if isinstance(value, list) else masked(value) for key, value in state.items()}
        writes: list[tuple[str, int, str]] = []
        was = {key: len(items) for key, items in self.lists.items()} if stored is None else {
            key: len(bodies) for key, bodies in stored.items()}
        now: Stored = {}
        for key, value in state.items():
            if not isinstance(value, list):
                continue
            before = self.lists.get(key, []) if stored is None else [(None, body) for body in stored.get(key, [])]
            kept_now: list[tuple[Any, str]] = []
            for position, item in enumerate(value):
                form = _kept_form(item)
                if position < len(before) and before[position][0] is not None and before[position][0] == form:
                    kept_now.append(before[position])  # as saved last: neither masked nor written again
                    continue
                body = _dumped(item)
                kept_now.append((form, body))
                if position >= len(before) or before[position][1] != body:
                    writes.append((key, position, body))
            self.lists[key] = kept_now
            now[key] = [body for _, body in kept_now]
        for key in [k for k in self.lists if k not in now]:
            del self.lists[key]
        self.chars = sum(len(body) for bodies in now.values() for body in bodies)
        shorter = any(len(now.get(key, ())) < length for key, length in was.items())
        return json.dumps(rest, ensure_ascii=False), writes, now if shorter else None


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
                db.execute(ITEMS)
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
            db.execute("DELETE FROM item WHERE conversation IN (SELECT id FROM conversation WHERE updated < ?)", (cutoff,))
            return db.execute("DELETE FROM conversation WHERE updated < ?", (cutoff,)).rowcount

    def save(self, owner: str, conversation: str, title: str, state: dict[str, Any]) -> None:
        """Keep the owner's conversation as ``state`` now is, writing what changed since it was last saved (another
        owner's conversation of that id is left as it is)."""
        if not (self.enabled and owner and conversation):
            return
        now = time.time()
        fragments = self._fragments(owner, conversation)
        with fragments.lock:
            self.expire(now)
            with closing(self._connect()) as db, db:
                row = db.execute("SELECT owner, updated FROM conversation WHERE id = ?", (conversation,)).fetchone()
                if row is not None and row[0] != owner:
                    return
                known = row is not None and fragments.updated == row[1]
                fragments.updated = None  # until this save is committed: a failed one leaves the memo unknown
                rest, writes, lists = fragments.changes(state, None if known else _stored_items(db, conversation))
                db.executemany("INSERT OR REPLACE INTO item (conversation, list, position, body) VALUES (?, ?, ?, ?)",
                               [(conversation, key, position, body) for key, position, body in writes])
                if lists is not None:  # a list grew shorter (or went): its rows past its end go
                    db.execute(f"DELETE FROM item WHERE conversation = ? AND NOT ({_kept_rows(lists)})",
                               [conversation, *[v for key, bodies in lists.items() for v in (key, len(bodies))]])
                if row is None:  # a new conversation: its title is masked once, with it (an update keeps it)
                    title = " ".join(mask(title).split())[:TITLE_CHARS] or "(log)"
                    db.execute("INSERT INTO conversation (id, owner, created, updated, title, state) VALUES (?, ?, ?, ?, ?, ?)",
                               (conversation, owner, now, now, title, rest))
                else:
                    db.execute("UPDATE conversation SET updated = ?, state = ? WHERE id = ?", (now, rest, conversation))
            fragments.updated = now
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
            if row is None:
                return None
            state = json.loads(row[3])
            for key, bodies in _stored_items(db, conversation).items():  # a conversation saved before items: in state
                state[key] = [json.loads(body) for body in bodies]
        return Saved(row[0], row[1], row[2], state)

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
            rows = [dict(r) for r in db.execute("SELECT * FROM conversation ORDER BY updated")]
            for row in rows:
                row["items"] = _stored_items(db, row["id"])
        return rows


def _stored_items(db: sqlite3.Connection, conversation: str) -> Stored:
    stored: Stored = {}
    for key, body in db.execute("SELECT list, body FROM item WHERE conversation = ? ORDER BY list, position",
                                (conversation,)):
        stored.setdefault(key, []).append(body)
    return stored


def _kept_rows(lists: Stored) -> str:
    """The SQL condition of the item rows a conversation still has (its lists as long as they now are)."""
    return " OR ".join(["(list = ? AND position < ?)"] * len(lists)) or "0"


def owner_of(username: str | None, browser: str | None) -> str:
    """Whose conversations these are: the signed-in user, else the browser's own id."""
    if username:
        return f"user:{username}"
    return f"browser:{browser}" if browser else ""
