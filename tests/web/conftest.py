"""Web UI tests: `traindoc web` runs as a real subprocess on a free 127.0.0.1 port over the session's
shared index; the browser is the system Chromium driven by Playwright (never downloaded).

One server serves the whole directory (with a 1 MB upload limit, so the over-limit upload can be tested on
it); the auth tests start their own. Every server is stopped by killing its process group."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from web_server_kit import WebServer, start_web


@pytest.fixture(scope="session")
def web_server(shared_index: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebServer]:
    server = start_web(tmp_path_factory.mktemp("web"), shared_index, "--max-upload-mb", "1")
    try:
        yield server
    finally:
        server.stop()


class RecordedPage:
    """A page in a fresh browser context, with every request and websocket it opened."""

    def __init__(self, context: Any) -> None:
        self.context = context
        self.page = context.new_page()
        self.urls: list[str] = []
        self.page.on("request", lambda request: self.urls.append(request.url))
        self.page.on("websocket", lambda ws: self.urls.append(ws.url))


@pytest.fixture
def web_page(browser: Any, web_server: WebServer) -> Iterator[RecordedPage]:
    context = browser.new_context(viewport={"width": 1400, "height": 1000}, locale="en-US")
    recorded = RecordedPage(context)
    recorded.page.set_default_timeout(30_000)
    recorded.page.goto(web_server.url)
    recorded.page.wait_for_selector("#question textarea:enabled")  # the conversation is restored
    try:
        yield recorded
    finally:
        context.close()


@pytest.fixture
def open_page(browser: Any, web_server: WebServer) -> Iterator[Any]:
    """Open the chat in a fresh browser context (a new browser profile) at a given width: ``open_page(400)``."""
    contexts: list[Any] = []

    def opened(width: int, height: int = 900, query: str = "") -> RecordedPage:
        context = browser.new_context(viewport={"width": width, "height": height}, locale="en-US")
        contexts.append(context)
        recorded = RecordedPage(context)
        recorded.page.set_default_timeout(30_000)
        recorded.page.goto(web_server.url + query)
        recorded.page.wait_for_selector("#question textarea:enabled")  # the conversation is restored
        return recorded

    try:
        yield opened
    finally:
        for context in contexts:
            context.close()
