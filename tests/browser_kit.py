"""The one browser of a test process: Debian's Chromium driven by Playwright (never downloaded).

Playwright's sync API runs its own event loop for as long as it is open, and a second ``sync_playwright()`` in the same
process while the first is open fails ("using Playwright Sync API inside the asyncio loop"). So every test that drives
a page takes the session's ``browser`` fixture (tests/conftest.py), whichever folder it is in and whichever worker runs it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

BROWSER_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                "--disable-sync", "--no-first-run"]
CHROMIUM = "/usr/bin/chromium"


@contextmanager
def launched() -> Iterator[Any]:
    """Chromium launched headless, closed with its Playwright driver; a skip where either is missing."""
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"{CHROMIUM} is not installed")
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=BROWSER_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()
