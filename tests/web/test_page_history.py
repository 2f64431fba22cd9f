"""Conversations survive a reload, per browser (another browser profile sees none of them); "New chat" empties
the page and keeps the earlier chat reachable; what is stored has its secrets masked."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from web_server_kit import ask

from common.secrets import SHAPES

pytestmark = pytest.mark.slow


def _turns(page) -> tuple[int, int]:
    return page.locator("#chat .user-row").count(), page.locator("#sources .traindoc-turn").count()


def _reload(page) -> None:
    page.reload()
    page.wait_for_selector("#question textarea:enabled")  # the conversation is restored


def test_history_survives_a_reload_and_new_chat_empties_it(open_page, web_server) -> None:
    shape = SHAPES[1]
    first = open_page(400)
    page = first.page
    question = "NCCL watchdog timeout, my env has " + shape.example.replace("\n", " ")
    ask(page, question)
    ask(page, "and with 4 GPUs?")
    answer_before = page.locator("#chat .bot-row").last.inner_text()
    _reload(page)
    page.wait_for_function("() => document.querySelectorAll('#chat .user-row').length == 2")
    assert _turns(page) == (2, 2)
    assert page.locator("#chat .bot-row").last.inner_text() == answer_before
    assert page.locator("#chat .bot-row").last.locator(".traindoc-cite").count() > 0  # markers still open sources

    other = open_page(1280).page  # another browser: none of it
    assert _turns(other) == (0, 0)
    assert other.locator("#earlier").inner_text().count("NCCL") == 0

    page.click("#new-chat")
    page.wait_for_function("() => !document.querySelector('#chat .user-row')")
    assert _turns(page) == (0, 0)
    _reload(page)
    assert _turns(page) == (0, 0)  # the new, empty chat is the one the page keeps
    page.click("#earlier input")
    option = page.locator("ul[role=listbox] li").first
    assert "NCCL watchdog timeout" in option.inner_text()
    option.click()
    page.wait_for_function("() => document.querySelectorAll('#chat .user-row').length == 2")

    stored = Path(web_server.env["TRAINDOC_DATA_DIR"]) / "web-history.sqlite3"
    with sqlite3.connect(stored) as db:
        rows = db.execute("SELECT owner, title, state FROM conversation").fetchall()
        items = db.execute("SELECT body FROM item").fetchall()  # each message, answer and turn: a row of its own
    assert rows and all(owner.startswith("browser:") for owner, _, _ in rows)
    dump = repr(rows) + repr(items)
    assert "NCCL watchdog timeout" in dump and shape.planted not in dump
