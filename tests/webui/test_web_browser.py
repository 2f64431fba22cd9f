"""The chat page in a real browser (Debian chromium, headless): ask, see a cited answer and a probe step."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import urlparse

import pytest

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
CJK_RENDERS = """() => {
  const font = getComputedStyle(document.querySelector('#chat')).fontFamily;
  const canvas = document.createElement('canvas'); canvas.width = 160; canvas.height = 48;
  const ctx = canvas.getContext('2d');
  const draw = (text) => { ctx.clearRect(0, 0, 160, 48); ctx.font = '32px ' + font; ctx.fillText(text, 0, 38);
                           return Array.from(ctx.getImageData(0, 0, 160, 48).data).join(','); };
  const blank = draw('');
  const chinese = draw('错误'), tofu = draw('\\uE000\\uE001');
  return {drawn: chinese !== blank, notTofu: chinese !== tofu};
}"""


def ask(page, question: str, answers_before: int) -> str:
    page.fill("#question textarea", question)
    page.click("#ask")
    page.wait_for_function(
        "n => document.querySelectorAll('#sources details').length > 0 && "
        "document.querySelector('#chat').innerText.split('Likely cause').length - 1 > n",
        arg=answers_before, timeout=90_000,
    )
    return page.locator("#chat").inner_text()


@pytest.fixture
def page(browser, web):
    context = browser.new_context(viewport={"width": 1400, "height": 1100}, locale="en-US")
    page = context.new_page()
    hosts: set[str] = set()
    page.on("request", lambda request: hosts.add(urlparse(request.url).netloc))
    page.goto(web.url)
    page.wait_for_selector("#question textarea")
    page.hosts = hosts  # type: ignore[attr-defined]
    yield page
    context.close()


def test_question_gets_cited_answer_with_probe_step_and_sources(page, web) -> None:
    backend = page.locator("#backend").inner_text()
    assert "offline" in backend
    chat = ask(page, "训练跑了几个小时后报 Watchdog caught collective operation timeout，NCCL 超时怎么办？", 0)
    assert "[1]" in chat
    assert "🔧" in chat, "a probe step is shown in the chat"
    summaries = page.locator("#sources details summary").all_inner_texts()
    assert summaries and any(".txt" in s and "›" in s for s in summaries)
    assert any("超时" in s or "timeout" in s.lower() for s in summaries), summaries
    first = page.locator("#sources details").first
    first.locator("summary").click()
    assert first.locator("pre").inner_text().strip(), "an expanded source shows the section text"
    rendering = page.evaluate(CJK_RENDERS)
    assert rendering == {"drawn": True, "notTofu": True}, "Chinese must render with a CJK font, not as boxes"
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "web.png"), full_page=True)
    served = urlparse(web.url).netloc
    assert page.hosts == {served}, f"the page contacted other hosts: {page.hosts - {served}}"  # type: ignore[attr-defined]


def test_follow_up_uses_the_earlier_turn(page) -> None:
    ask(page, "torchrun fails with: RuntimeError: Address already in use", 0)
    ask(page, "how do I find which process holds it?", 1)
    summaries = page.locator("#sources details summary").all_inner_texts()
    assert any("002_" in s and ("端口" in s or "进程" in s) for s in summaries), summaries


def test_thumbs_up_is_stored_and_exported(page, web, cli) -> None:
    ask(page, "CUDA out of memory during training, what should I do?", 0)
    page.locator("#chat button[aria-label='Like']").last.click()
    page.wait_for_function("() => document.querySelector('#status').innerText.includes('feedback saved')",
                           timeout=30_000)
    exported = cli("traindoc", "feedback", "export", env=web.env)
    assert exported.returncode == 0, exported.stderr
    cases = [json.loads(line) for line in exported.stdout.splitlines()]
    mine = [c for c in cases if c["query"] == "CUDA out of memory during training, what should I do?"]
    assert mine and mine[-1]["rating"] == "good"
    assert mine[-1]["gold"] and mine[-1]["gold"][0]["file"].endswith(".txt")
    assert "Traceback" not in web.log()


def test_binary_upload_gets_a_clear_message(page, tmp_path) -> None:
    binary = tmp_path / "core.bin"
    binary.write_bytes(b"\x7fELF\x00\x00\x01\x02" * 2048)
    page.set_input_files("#log input[type=file]", str(binary))
    page.wait_for_timeout(1500)
    page.fill("#question textarea", "why did it crash")
    page.click("#ask")
    page.wait_for_function("() => document.querySelector('#chat').innerText.includes('binary')", timeout=60_000)
    assert "binary" in page.locator("#status").inner_text() or "binary" in page.locator("#chat").inner_text()
