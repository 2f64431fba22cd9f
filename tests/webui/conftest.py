from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from web_kit import WebServer, start_web, stop_web, web_env  # noqa: E402


@pytest.fixture(scope="module")
def web(shared_index: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebServer]:
    base = tmp_path_factory.mktemp("web")
    server = start_web(web_env(base, shared_index), base)
    yield server
    stop_web(server)


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    playwright_api = pytest.importorskip("playwright.sync_api")
    if not Path("/usr/bin/chromium").exists():
        pytest.skip("Debian chromium is not installed (make test installs it)")
    from web_kit import CHROMIUM, CHROMIUM_ARGS

    with playwright_api.sync_playwright() as playwright:
        instance = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield instance
        instance.close()
