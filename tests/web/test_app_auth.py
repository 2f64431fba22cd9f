"""Authentication: with TRAINDOC_WEB_AUTH the page and the API need a login; binding a non-loopback
address without it prints a warning at start, and with it does not."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from web_server_kit import WebServer, start_web

pytestmark = pytest.mark.slow

WARNING = "without authentication"


@pytest.fixture(scope="module")
def servers(shared_index, tmp_path_factory) -> Iterator[tuple[WebServer, WebServer]]:
    """Both on 0.0.0.0, started together: one with a login, one without."""
    base = tmp_path_factory.mktemp("auth")
    started: list[WebServer] = []
    try:
        started.append(start_web(base / "auth", shared_index, host="0.0.0.0", env={"TRAINDOC_WEB_AUTH": "u:p"}, wait=False))
        started.append(start_web(base / "open", shared_index, host="0.0.0.0", wait=False))
        for server in started:
            server.wait_ready()
        yield started[0], started[1]
    finally:
        for server in started:
            server.stop()


def _status(url: str, data: bytes | None = None) -> int:
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"} if data else {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def test_api_and_config_need_a_login(servers) -> None:
    authed, _ = servers
    assert _status(authed.url + "config") == 401
    body = json.dumps({"data": ["why is NCCL hanging"]}).encode()
    assert _status(authed.url + "gradio_api/call/ask", body) == 401


def test_gradio_client_with_credentials(servers) -> None:
    from gradio_client import Client

    authed, _ = servers
    answer = Client(authed.url, auth=("u", "p"), verbose=False).predict("why is NCCL hanging", api_name="/ask")
    assert answer["citations"][0]["source"].startswith("corpus/")
    for auth in (None, ("u", "wrong")):
        with pytest.raises(Exception):  # noqa: B017 - gradio_client raises ValueError or httpx errors by version
            Client(authed.url, auth=auth, verbose=False).predict("why is NCCL hanging", api_name="/ask")


def test_page_shows_the_login_form(servers, browser) -> None:
    authed, _ = servers
    context = browser.new_context()
    try:
        page = context.new_page()
        page.goto(authed.url)
        page.wait_for_selector("input[type=password]")
        assert page.locator("#question").count() == 0
        page.fill("input[type=text]", "u")
        page.fill("input[type=password]", "p")
        page.keyboard.press("Enter")
        page.wait_for_selector("#question textarea")
    finally:
        context.close()


def _signed_in(browser, server) -> tuple:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(30_000)
    page.goto(server.url)
    page.fill("input[type=text]", "u")
    page.fill("input[type=password]", "p")
    page.keyboard.press("Enter")
    page.wait_for_selector("#question textarea:enabled")
    return context, page


def test_a_signed_in_user_finds_their_chats_in_another_browser(servers, browser) -> None:
    from web_server_kit import ask

    authed, _ = servers
    first, page = _signed_in(browser, authed)
    try:
        ask(page, "torchrun says Address already in use")
    finally:
        first.close()
    second, page = _signed_in(browser, authed)  # another browser profile, the same user
    try:
        assert page.locator("#chat .user-row").count() == 0  # a new chat, with the earlier one listed
        page.click("#earlier input")
        option = page.locator("ul[role=listbox] li", has_text="Address already in use")
        option.click()
        page.wait_for_function("() => document.querySelectorAll('#chat .user-row').length == 1")
        assert "Address already in use" in page.inner_text("#chat")
        assert page.locator("#sources .traindoc-turn").count() == 1
    finally:
        second.close()


def test_warning_only_without_auth_off_loopback(servers) -> None:
    authed, open_server = servers
    assert WARNING in open_server.stderr()
    assert "TRAINDOC_WEB_AUTH" in open_server.stderr()
    open_server.stop()
    assert open_server.process.returncode is not None
    assert WARNING not in authed.stderr()
    assert "serving on http://0.0.0.0:" in authed.stderr()


@pytest.mark.parametrize(
    ("host", "loopback"),
    [("127.0.0.1", True), ("127.0.0.2", True), ("localhost", True), ("::1", True), ("", True),
     ("0.0.0.0", False), ("::", False), ("192.168.1.5", False), ("10.0.0.1", False), ("example.com", False)],
)
def test_is_loopback(host: str, loopback: bool) -> None:
    from traindoc_web.chat import is_loopback

    assert is_loopback(host) is loopback


def test_parse_auth() -> None:
    from common.errors import ConfigError
    from traindoc_web.chat import parse_auth

    assert parse_auth(None) is None and parse_auth("") is None
    assert parse_auth("u:p") == ("u", "p")
    assert parse_auth("u:p:with:colons") == ("u", "p:with:colons")
    for bad in ("u", "u:", ":p"):
        with pytest.raises(ConfigError, match="user:password"):
            parse_auth(bad)
