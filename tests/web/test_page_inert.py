"""Text from users is inert in the web page (a real browser): a backtick in a log line cannot end the code that
quotes it, so no image it names is loaded and no link it writes is live (an e-mail address, a bare URL, an autolink,
a Markdown link: none becomes an <a>); a right-to-left override shows as <U+202E> while emoji stay whole; secrets
are not shown."""

from __future__ import annotations

from pathlib import Path

import pytest
from web_server_kit import ask

from common.secrets import SHAPES
from tools.base import ProbeResult, Status
from traindoc_web.markup import probes_html
from traindoc_web.page import citation_items, sources_html

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


SPOOF = "invoice_\u202egpj.exe"  # reads "invoice_exe.jpg"
EMOJI = ("👩\u200d💻", "🏳\ufe0f\u200d🌈")
LINKS = (f"mail ops@{ATTACKER} or a.b+c@{ATTACKER}, see http://{ATTACKER}/help https://{ATTACKER}/s www.{ATTACKER} "
         f"<http://{ATTACKER}/auto> <ops@{ATTACKER}> [docs](http://{ATTACKER}/docs) mailto:ops@{ATTACKER}")


def test_log_text_makes_no_link_and_shows_an_override(web_page, tmp_path: Path) -> None:
    """The log's root cause (its error line) is the question when none is typed: shown as text, outside any code."""
    log = tmp_path / "spoof.log"
    log.write_text(f"step 1 loss 2.3\nRuntimeError: CUDA error: out of memory in {SPOOF} {EMOJI[0]} {EMOJI[1]} "
                   f"\u200bhidden {LINKS}\n", encoding="utf-8")
    page = web_page.page
    page.set_input_files("#log input[type=file]", str(log))
    page.locator("#log", has_text="spoof").wait_for()
    ask(page, "")
    chat = page.locator("#chat")
    text = chat.inner_text()
    assert f"ops@{ATTACKER}" in text and f"http://{ATTACKER}/help" in text  # shown, as text
    assert chat.locator(f"a[href*='{ATTACKER}'], a[href^='mailto:']").count() == 0
    assert "\u202e" not in text and "\u200b" not in text
    assert "invoice_<U+202E>gpj.exe" in text and "<U+200B>hidden" in text
    for sequence in EMOJI:
        assert sequence in text, sequence
    page.wait_for_timeout(300)
    assert not [url for url in web_page.urls if ATTACKER in url], "the page fetched from the attacker's host"


def test_the_probe_table_and_the_sources_show_an_override() -> None:
    table = probes_html([ProbeResult("gpu", Status.PROBLEM, f"device {SPOOF} {EMOJI[0]} <b>x</b>")])
    assert "\u202e" not in table and table.count("invoice_&lt;U+202E&gt;gpj.exe") == 1 and EMOJI[0] in table
    citation = {"n": 1, "source": f"docs/{SPOOF}.md", "section": f"Top > {SPOOF}", "chunk_id": "c1", "lang": None}
    answer = {"question": f"why {SPOOF}?", "citations": [citation], "texts": {"c1": f"# {SPOOF}\n\nmail ops@{ATTACKER}"}}
    panel = sources_html([{"answer": answer, "turn": 1, "texts": answer["texts"]}]) + citation_items(answer)
    assert "\u202e" not in panel and "&lt;U+202E&gt;" in panel and "mailto:" not in panel and "<a " not in panel
