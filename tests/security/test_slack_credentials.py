"""The Slack bot's token goes only to Slack's own file hosts: never to a file link on another host, never across a
redirect to another host. Real HTTP servers on 127.0.0.1 stand in for the Slack side (the host of SLACK_API_URL,
which the bot trusts as it trusts Slack) and for a foreign host. A downloaded attachment is 0600 in a 0700 folder,
its secrets masked, and it is gone once its turn is answered; a refusal names no path on the bot's host."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from fakes.slack_api import FakeSlack

from agent.answer import Answer
from common.errors import InputError
from traindoc_slack.thread import download_attachment, token_goes_to

TOKEN = "xoxb-1234567890-Zq8vR2kL5mN7pT1xW4yB6cD9"
LOG = "step 1\nRuntimeError: NCCL watchdog timeout\nexport HF_TOKEN=hf_Zq8vR2kL5mN7pT1xW4yB6cD9fG3hJ0sA2e\n"


class Host:
    """A web server on 127.0.0.1 that answers each path as scripted (status, headers, body) and records every
    request's path and headers."""

    def __init__(self) -> None:
        self.routes: dict[str, tuple[int, dict[str, str], bytes]] = {}
        self.requests: list[tuple[str, dict[str, str]]] = []
        host = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

            def do_GET(self) -> None:
                host.requests.append((self.path, {k.lower(): v for k, v in self.headers.items()}))
                status, headers, body = host.routes.get(self.path, (404, {}, b"not found"))
                self.send_response(status)
                for name, value in {**headers, "Content-Length": str(len(body))}.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def authorizations(self) -> list[str]:
        return [headers.get("authorization", "") for _, headers in self.requests]


@pytest.fixture
def hosts() -> Iterator[tuple[Host, Host]]:
    """(the Slack side, a foreign host)."""
    pair = (Host(), Host())
    for host in pair:
        host.thread.start()
    yield pair
    for host in pair:
        host.server.shutdown()
        host.server.server_close()


def _file(url: str, name: str = "train.log") -> dict[str, Any]:
    return {"id": "F1", "name": name, "size": len(LOG), "url_private_download": url}


@pytest.mark.parametrize("url, allowed", [
    ("https://files.slack.com/files-pri/T1-F1/train.log", True),
    ("https://files.slack-gov.com/files-pri/T1-F1/train.log", True),
    ("https://slack-files.com/T1-F1-abc", True),
    ("https://a.slack-edge.com/x.png", True),
    ("http://files.slack.com/files-pri/T1-F1/train.log", False),  # not https: the token would travel in clear
    ("https://files.slack.com.evil.example/train.log", False),
    ("https://evilslack.com/train.log", False),
    ("https://files-slack.com/train.log", False),
    ("https://user@evil.example/@files.slack.com/x", False),
    ("ftp://files.slack.com/x", False),
    ("https://drive.google.com/file/d/1/view", False),  # an external file's url_private
])
def test_the_token_goes_only_to_slacks_file_hosts(url: str, allowed: bool) -> None:
    assert token_goes_to(url) is allowed


def test_the_api_url_host_is_trusted_as_slack_is_and_no_other(hosts: tuple[Host, Host]) -> None:
    slack, foreign = hosts
    assert token_goes_to(slack.url + "/files/a.log", slack.url + "/api/")
    assert not token_goes_to(foreign.url + "/files/a.log", slack.url + "/api/")  # same address, another port


def test_a_slack_file_is_downloaded_with_the_token_private_and_masked(hosts: tuple[Host, Host], tmp_path: Path) -> None:
    slack, _ = hosts
    slack.routes["/files/train.log"] = (200, {}, LOG.encode())
    path = download_attachment(_file(slack.url + "/files/train.log"), tmp_path / "turn", TOKEN, 20, slack.url + "/api/")
    assert path is not None and slack.authorizations() == [f"Bearer {TOKEN}"]
    text = path.read_text(encoding="utf-8")
    assert "RuntimeError: NCCL watchdog timeout" in text and "hf_Zq8vR2kL5mN7" not in text and "HF_TOKEN=***" in text
    assert path.stat().st_mode & 0o777 == 0o600 and path.parent.stat().st_mode & 0o777 == 0o700


def test_a_redirect_to_another_host_is_followed_without_the_token(hosts: tuple[Host, Host], tmp_path: Path) -> None:
    slack, foreign = hosts
    slack.routes["/files/train.log"] = (302, {"Location": foreign.url + "/cdn/train.log"}, b"")
    foreign.routes["/cdn/train.log"] = (200, {}, LOG.encode())
    path = download_attachment(_file(slack.url + "/files/train.log"), tmp_path, TOKEN, 20, slack.url + "/api/")
    assert path is not None and "NCCL watchdog timeout" in path.read_text(encoding="utf-8")
    assert slack.authorizations() == [f"Bearer {TOKEN}"]
    assert [p for p, _ in foreign.requests] == ["/cdn/train.log"] and foreign.authorizations() == [""]


def test_a_redirect_back_to_slack_carries_the_token_again(hosts: tuple[Host, Host], tmp_path: Path) -> None:
    slack, _ = hosts
    slack.routes["/files/a.log"] = (301, {"Location": "/files/b.log"}, b"")  # a relative Location, same host
    slack.routes["/files/b.log"] = (200, {}, LOG.encode())
    assert download_attachment(_file(slack.url + "/files/a.log"), tmp_path, TOKEN, 20, slack.url + "/api/") is not None
    assert slack.authorizations() == [f"Bearer {TOKEN}"] * 2


def test_a_link_on_another_host_is_never_fetched(hosts: tuple[Host, Host], tmp_path: Path) -> None:
    slack, foreign = hosts
    foreign.routes["/train.log"] = (200, {}, LOG.encode())
    assert download_attachment(_file(foreign.url + "/train.log"), tmp_path, TOKEN, 20, slack.url + "/api/") is None
    assert foreign.requests == [] and list(tmp_path.iterdir()) == []


def test_a_redirect_loop_ends(hosts: tuple[Host, Host], tmp_path: Path) -> None:
    slack, _ = hosts
    slack.routes["/files/loop.log"] = (302, {"Location": "/files/loop.log"}, b"")
    assert download_attachment(_file(slack.url + "/files/loop.log"), tmp_path, TOKEN, 20, slack.url + "/api/") is None
    assert 1 < len(slack.requests) <= 6


class _Troubleshooter:
    """Records what each turn's attachments looked like while it was being answered; refuses when told to."""

    def __init__(self, data: Path, refuse: bool = False) -> None:
        self.settings = SimpleNamespace(data_dir=data, cache_dir=data / "cache", probe_timeout_s=5)
        self.refuse = refuse
        self.seen: list[tuple[Path, bool, str]] = []

    def ask(self, question: Any) -> Answer:
        for path in question.log_paths:
            self.seen.append((path, path.is_file(), path.read_text(encoding="utf-8")))
        if self.refuse:
            raise InputError(f"cannot read {question.log_paths[0]}: not a log")
        return Answer(question=question.text, answer="### Likely cause\nNCCL timeout", citations=[], findings=[],
                      no_match=False)


def _bridge(troubleshooter: _Troubleshooter, slack: FakeSlack) -> Any:
    from traindoc_slack.bot import SlackBridge
    from traindoc_slack.options import SlackOptions

    return SlackBridge(troubleshooter, SlackOptions(bot_token=TOKEN, signing_secret="s", api_url=slack.api_url))  # type: ignore[arg-type]


def test_an_attachment_lives_only_as_long_as_its_turn(tmp_path: Path) -> None:
    from slack_sdk import WebClient

    troubleshooter = _Troubleshooter(tmp_path)
    with FakeSlack() as slack:
        bridge = _bridge(troubleshooter, slack)
        event = {"type": "app_mention", "user": "U1", "channel": "C1", "ts": "1.1", "text": "<@UBOT> why?",
                 "files": [_file(slack.add_file("train.log", LOG))]}
        bridge.handle(event, WebClient(token=TOKEN, base_url=slack.api_url))
        assert slack.wait_for("chat.postMessage")
    ((path, existed, text),) = troubleshooter.seen
    assert existed and "NCCL watchdog timeout" in text and "hf_Zq8vR2kL5mN7" not in text
    assert not path.exists() and not any(p.is_file() for p in bridge.downloads.rglob("*"))


def test_a_refusal_names_no_path_on_the_bots_host(tmp_path: Path) -> None:
    from slack_sdk import WebClient

    troubleshooter = _Troubleshooter(tmp_path, refuse=True)
    with FakeSlack() as slack:
        bridge = _bridge(troubleshooter, slack)
        event = {"type": "app_mention", "user": "U1", "channel": "C1", "ts": "1.1", "text": "<@UBOT> why?",
                 "files": [_file(slack.add_file("train.log", LOG))]}
        bridge.handle(event, WebClient(token=TOKEN, base_url=slack.api_url))
        (post,) = slack.wait_for("chat.postMessage")
    posted = json.dumps(post.params, ensure_ascii=False)
    assert "train.log" in posted and "not a log" in posted
    assert str(tmp_path) not in posted and "cache" not in posted
