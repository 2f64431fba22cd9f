"""Text from users is inert in the web page (a real browser): a backtick in a log line cannot end the code that
quotes it, so no image it names is loaded and no link it writes is live; secrets are not shown."""

from __future__ import annotations

from pathlib import Path

import pytest
from web_server_kit import ask

from common.secrets import SHAPES

pytestmark = pytest.mark.slow
ATTACKER = "attacker.example"
HOSTILE = (f"RuntimeError: CUDA error: out of memory ` ![x](http://{ATTACKER}/p.png) [t](http://{ATTACKER}/t) "
           f"<img src=http://{ATTACKER}/i.png> <a href=http://{ATTACKER}/a>a</a> www.{ATTACKER} `")


def test_a_hostile_log_loads_nothing_and_links_nowhere(web_page, tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_text("step 1 loss 2.3\n" + HOSTILE + "\n", encoding="utf-8")
    page = web_page.page
    page.set_input_files("#log input[type=file]", str(log))
    page.locator("#log", has_text="train").wait_for()
    ask(page, f"why did it crash? ![q](http://{ATTACKER}/q.png)")
    chat = page.locator("#chat")
    assert "out of memory" in chat.inner_text()
    assert chat.locator(f"img[src*='{ATTACKER}']").count() == 0
    assert chat.locator(f"a[href*='{ATTACKER}']").count() == 0
    page.wait_for_timeout(500)
    assert not [url for url in web_page.urls if ATTACKER in url], "the page fetched from the attacker's host"


def test_secrets_in_a_question_are_not_shown(web_page) -> None:
    page = web_page.page
    planted = " ".join(shape.example.replace("\n", " ") for shape in SHAPES[1:8])
    ask(page, f"NCCL watchdog timeout with {planted}")
    text = page.inner_text("#chat")
    for shape in SHAPES[1:8]:
        assert shape.planted not in text, shape.kind
