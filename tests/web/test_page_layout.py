"""The chat page as its users expect, in a real browser at 1280 px and 400 px: example prompts on the empty page
(a pasted error, a log upload, a hang); a new answer opens at its first line, not its end; `[n]` opens that
answer's cited section rendered (not raw Markdown); every answer keeps its sources; the input is the page's
width on a phone and the sources are not pages below; the probe panel names the server's host; no control is
dead; dark mode keeps the source readable."""

from __future__ import annotations

import socket

import pytest
from web_server_kit import ask, last_answer, wait_for_turn

pytestmark = pytest.mark.slow

LONG_QUESTION = "torchrun says Address already in use"  # a long answer: taller than the chat box
OTHER_QUESTION = "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB"

FIRST_LINE_JS = """
() => {
  const rows = document.querySelectorAll('#chat .bot-row');
  const said = [...rows[rows.length - 1].querySelectorAll('.message')].filter(m => !m.querySelector('.thought-group'));
  const message = said[said.length - 1];
  const box = message.getBoundingClientRect(), chat = document.querySelector('#chat').getBoundingClientRect();
  const first = message.querySelector('p, li, h1, h2, h3, h4') || message;
  const line = first.getBoundingClientRect();
  const hit = document.elementFromPoint(line.left + 8, line.top + Math.min(line.height, 20) / 2);
  return {top: line.top, bottom: line.top + 20, height: box.height, chatTop: chat.top, chatBottom: chat.bottom,
          chatHeight: chat.height, viewport: innerHeight, firstLineShown: !!hit && message.contains(hit),
          text: first.innerText.slice(0, 80)};
}
"""


def _first_line_in_view(page) -> dict:
    page.wait_for_timeout(300)  # the scroll runs after the turn's last update
    view = page.evaluate(FIRST_LINE_JS)
    assert view["height"] > view["chatHeight"], f"the answer fits the box, nothing to test: {view}"
    assert 0 <= view["top"] and view["bottom"] <= view["viewport"], view
    assert view["chatTop"] - 1 <= view["top"] and view["bottom"] <= view["chatBottom"], view
    assert view["firstLineShown"], f"the first line is covered: {view}"
    return view


def _popover_for(page, answer_row: int, n: int = 1) -> str:
    cite = page.locator("#chat .bot-row").nth(answer_row).locator(f".traindoc-cite[data-n='{n}']").first
    cite.click()
    pop = page.locator("#traindoc-cite-pop")
    pop.wait_for(state="visible")
    return str(pop.inner_text())


@pytest.mark.parametrize("width", [1280, 400])
def test_an_answer_opens_at_its_top_and_its_markers_open_rendered_sources(open_page, width: int) -> None:
    page = open_page(width).page
    ask(page, LONG_QUESTION)
    _first_line_in_view(page)
    box = page.locator("#question textarea").bounding_box()
    chat = page.locator("#chat").bounding_box()
    if width == 400:
        assert box["width"] >= 0.9 * chat["width"], (box, chat)  # the input is the column's width, not 130 px
        sources_top = page.evaluate("() => document.querySelector('#sources').getBoundingClientRect().top + scrollY")
        assert sources_top < 1.25 * 900, sources_top  # the sources follow the input, not 1,400 px down
    else:
        assert box["width"] >= 0.6 * chat["width"], (box, chat)

    text = _popover_for(page, 0)
    assert text.startswith("[1] ") and "port is already in use" in text.splitlines()[0], text[:200]
    pop = page.locator("#traindoc-cite-pop")
    assert pop.locator(".traindoc-section h3, .traindoc-section p").count() > 0  # rendered Markdown
    assert pop.locator(".traindoc-section code").count() > 0
    for raw in ("**", "```", "### ", "](http"):
        assert raw not in text, f"raw Markdown {raw!r} in the source shown"
    rect = pop.bounding_box()
    assert rect["x"] >= 0 and rect["x"] + rect["width"] <= width and rect["y"] >= 0, rect
    page.keyboard.press("Escape")
    pop.wait_for(state="detached")


def test_every_answer_keeps_its_own_sources(open_page) -> None:
    page = open_page(1280).page
    ask(page, LONG_QUESTION)
    ask(page, OTHER_QUESTION)
    groups = page.locator("#sources .traindoc-turn")
    assert groups.count() == 2
    assert groups.first.get_attribute("open") is not None and groups.nth(1).get_attribute("open") is None
    assert "Answer 2" in groups.first.locator("summary").first.inner_text()
    assert "CUDA out of memory" in _popover_for(page, 1).splitlines()[0]  # the second answer's [1]
    page.keyboard.press("Escape")
    assert "port is already in use" in _popover_for(page, 0).splitlines()[0]  # the first answer's [1], still there
    page.mouse.click(5, 5)  # a click outside closes it
    page.locator("#traindoc-cite-pop").wait_for(state="detached")


def test_examples_on_the_empty_page_and_an_uploaded_log_stays_with_its_question(open_page) -> None:
    page = open_page(1280).page
    examples = page.locator("#chat button.example")
    labels = examples.all_inner_texts()
    assert len(labels) == 3, labels
    assert any("error" in t.lower() for t in labels) and any("log" in t.lower() for t in labels)
    assert any("hang" in t.lower() for t in labels)
    before = [0, 0, 0]
    examples.nth([i for i, t in enumerate(labels) if "log" in t.lower()][0]).click()
    wait_for_turn(page, "(the log example)", before=before)
    answer = last_answer(page)
    assert "oom" in answer.lower() and "example-oom-2-ranks.log" in page.inner_text("#chat")
    assert page.locator("#log .file-preview, #log table").count() == 0, "the upload stays attached after its turn"

    ask(page, "how do I fix it?")
    first_line = last_answer(page).strip().splitlines()[0]
    assert first_line.startswith("↩ Using the log uploaded with your earlier question (example-oom-2-ranks.log)")
    assert "CUDA out of memory" in page.locator("#sources .traindoc-turn").first.inner_text()

    ask(page, "训练卡住了怎么办")  # a new question: the OOM log is not triaged again
    fresh = last_answer(page)
    assert "↩" not in fresh and "OutOfMemoryError" not in fresh and "oom_crash.py" not in fresh


def test_the_probe_panel_names_the_server_and_no_control_is_dead(open_page) -> None:
    page = open_page(1280).page
    host = socket.gethostname()
    panel = page.locator("#probe-panel")
    assert host in panel.inner_text() and "this machine" not in panel.inner_text()
    ask(page, LONG_QUESTION)
    assert page.locator("#chat button[aria-label*='hare' i], #chat [title*='hare' i]").count() == 0  # no share icon
    unnamed = page.evaluate("""() => [...document.querySelectorAll('button')]
        .filter(b => b.offsetParent !== null)
        .filter(b => !(b.getAttribute('aria-label') || b.title || b.innerText.trim()))
        .map(b => b.outerHTML.slice(0, 120))""")
    assert unnamed == [], unnamed
    # the remaining controls work: copy, thumbs, the chat's own clear (a new chat)
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    page.locator("#chat .bot-row").last.hover()
    page.locator("#chat button[aria-label='Copy message']").last.click()
    copied = page.evaluate("() => navigator.clipboard.readText()")
    assert "EADDRINUSE" in copied and "**" in copied, copied[:200]  # the answer's Markdown, ready to paste
    page.locator("#chat button[aria-label='Like']").last.click()
    page.wait_for_function("() => document.querySelector('#status').innerText.includes('feedback saved')")
    page.locator("#chat button[aria-label='Clear']").click()
    page.wait_for_function("() => !document.querySelector('#chat .user-row') && !document.querySelector('#sources .traindoc-turn')")


def test_dark_mode_keeps_the_source_readable(open_page) -> None:
    page = open_page(1280, query="?__theme=dark").page
    ask(page, LONG_QUESTION)
    _popover_for(page, 0)
    colours = page.evaluate("""() => {
        const lum = c => { const [r, g, b] = c.match(/\\d+(\\.\\d+)?/g).map(Number); return (0.2126*r + 0.7152*g + 0.0722*b) / 255; };
        const pop = getComputedStyle(document.querySelector('#traindoc-cite-pop'));
        return {background: lum(pop.backgroundColor), text: lum(pop.color), dark: document.body.classList.contains('dark')
                || document.documentElement.classList.contains('dark')}; }""")
    assert colours["dark"], colours
    assert colours["background"] < 0.35 and colours["text"] > 0.6, colours
