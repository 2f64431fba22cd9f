"""The chat page in a real browser: cited answers with tool steps (English and Chinese), sources that expand
to their section, Chinese rendered with a real CJK font, no request leaving the serving host, a follow-up
that builds on the previous turn, and a thumbs-up that `traindoc feedback export` turns into an eval case."""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from clikit import ROOT, run_cli
from web_server_kit import ask, last_answer, last_steps, latest_sources, source_summaries

pytestmark = pytest.mark.slow

CORPUS = ROOT / "corpus"
PORT_SECTIONS = ("端口被占用", "检查端口占用", "检查进程状态")
PROBES = ("port_check", "env_vars", "processes")

# Draws each string on a canvas in the font the page uses for chat text and returns the pixels, so a
# missing CJK font (every character drawn as the same .notdef box) is told apart from real glyphs.
GLYPHS_JS = """
([selector, strings]) => {
  const el = document.querySelector(selector);
  const style = getComputedStyle(el);
  const font = `32px ${style.fontFamily}`;
  const canvas = document.createElement('canvas');
  canvas.width = 64; canvas.height = 48;
  const ctx = canvas.getContext('2d');
  ctx.font = font;
  const out = {font, family: style.fontFamily, check: document.fonts.check(font, strings.join('')), glyphs: {}};
  for (const s of strings) {
    ctx.clearRect(0, 0, canvas.width, canvas.height);
    ctx.fillStyle = '#000';
    ctx.fillText(s, 4, 36);
    const data = ctx.getImageData(0, 0, canvas.width, canvas.height).data;
    let ink = 0, hash = 0;
    for (let i = 3; i < data.length; i += 4) { ink += data[i] > 0; hash = (hash * 31 + data[i]) | 0; }
    out.glyphs[s] = {width: ctx.measureText(s).width, ink, hash};
  }
  return out;
}
"""
TOFU = ("\ue000", "\U000f0000", "\uffff")  # private-use and unassigned: no font has a glyph


def _assert_cjk_renders(page, selector: str) -> None:
    chinese = ("端", "口", "占")
    result = page.evaluate(GLYPHS_JS, [selector, [*chinese, *TOFU]])
    glyphs = result["glyphs"]
    assert result["check"], f"document.fonts.check failed for {result['font']}"
    tofu_hashes = {glyphs[t]["hash"] for t in TOFU}
    for ch in chinese:
        assert glyphs[ch]["ink"] > 20, f"{ch!r} drew nothing in {result['family']}"
        assert glyphs[ch]["hash"] not in tofu_hashes, f"{ch!r} is drawn as a missing-glyph box in {result['family']}"
    assert len({glyphs[ch]["hash"] for ch in chinese}) == len(chinese), f"distinct characters look alike: {glyphs}"


def _assert_same_host(urls: list[str], netloc: str) -> None:
    foreign = sorted({u for u in urls if not u.startswith(("data:", "blob:")) and urlsplit(u).netloc != netloc})
    assert urls, "no request recorded"
    assert not foreign, f"requests left {netloc}: {foreign}"


def _cited_file(summary: str) -> str:
    """'[1] 002_x.txt › A > B' -> '002_x.txt'"""
    return summary.split("]", 1)[1].split("›", 1)[0].strip()


@pytest.mark.parametrize(
    ("question", "expected_file", "expected_section"),
    [
        # a hang in allreduce: the timeout sections, or the one on ranks that do not call the same collectives
        ("NCCL timeout: training hangs at allreduce", ("004_", "002_", "001_"), ("NCCL 超时", "网络超时", "DDP (分布式)")),
        ("训练启动时报错 端口被占用 怎么办", ("002_",), ("端口被占用",)),
    ],
    ids=["english-nccl", "chinese-port"],
)
def test_cited_answer_with_probe_steps(web_page, web_server, question, expected_file, expected_section) -> None:
    page = web_page.page
    assert "offline" in page.inner_text("#backend")
    ask(page, question)

    answer = last_answer(page)
    assert "[1]" in answer
    steps = last_steps(page)
    assert any(s.startswith("🔧") for s in steps), steps
    assert any(probe in s for s in steps for probe in PROBES), steps

    summaries = source_summaries(page)
    assert summaries[0].startswith("[1] "), summaries
    lang = "zh" if question.startswith("训练") else "en"
    n = next(i for i, s in enumerate(summaries) if re.match(r"\d{3}_", _cited_file(s)))  # the first document's
    assert all((CORPUS / "runbooks" / lang / _cited_file(s)).is_file() for s in summaries[:n]), summaries  # a runbook before it
    assert _cited_file(summaries[n]).startswith(expected_file), summaries
    assert any(section in summaries[n] for section in expected_section), summaries
    assert (CORPUS / _cited_file(summaries[n])).is_file()

    first = latest_sources(page).locator(".traindoc-source").nth(n).locator("xpath=..")
    assert not first.locator(".traindoc-section").is_visible()
    first.locator("summary").click()
    section = first.locator(".traindoc-section")
    section.wait_for(state="visible")
    text = section.inner_text()
    # An English asker reads the seed section's English rendering ([en]); a Chinese one the original.
    shown = (CORPUS / "renderings" / "en" / Path(_cited_file(summaries[n])).with_suffix(".md").name
             if summaries[n].endswith("[en]") else CORPUS / _cited_file(summaries[n]))
    corpus_text = shown.read_text(encoding="utf-8")
    lines = [line.strip() for line in text.splitlines() if len(line.strip()) > 8]
    assert lines and sum(line in corpus_text for line in lines) >= len(lines) // 2, text

    _assert_cjk_renders(page, "#sources summary")
    _assert_cjk_renders(page, "#chat .bot-row .message-content")
    if question.startswith("训练"):
        assert question in page.inner_text("#chat")
        out = ROOT / "test-artifacts" / "web.png"
        out.parent.mkdir(exist_ok=True)
        page.screenshot(path=str(out), full_page=True)
    _assert_same_host(web_page.urls, web_server.netloc)


def test_follow_up_uses_the_earlier_turn(web_page, web_server) -> None:
    page = web_page.page
    ask(page, "torchrun says Address already in use")
    assert "port_in_use.md" in source_summaries(page)[0]
    assert any(p in s for s in source_summaries(page) for p in PORT_SECTIONS)

    ask(page, "and how do I find which process holds it?")
    summaries = source_summaries(page)
    port = [s for s in summaries if _cited_file(s).startswith("002_") and any(p in s for p in PORT_SECTIONS)]
    assert port, summaries
    assert "[1]" in last_answer(page)
    assert page.locator("#chat .user-row").count() == 2
    _assert_same_host(web_page.urls, web_server.netloc)


def test_thumbs_up_is_exported_as_an_eval_case(web_page, web_server, tmp_path: Path) -> None:
    """Two turns; the first (tool steps, then the answer, under one pair of thumbs) is the one liked."""
    page = web_page.page
    question = "RuntimeError: The server socket has failed to listen on port 29500, Address already in use"
    ask(page, question)
    first = source_summaries(page)[0]
    assert any(s.startswith("🔧") for s in last_steps(page))
    ask(page, "saving the checkpoint fails: No space left on device")
    likes = page.locator("#chat button[aria-label='Like']")
    assert likes.count() == 2
    likes.first.click()
    page.wait_for_function("() => document.querySelector('#status').innerText.includes('feedback saved')")

    out = tmp_path / "cases.jsonl"
    for args in ((), ("--out", str(out))):
        result = run_cli("traindoc", "feedback", "export", *args, env={"TRAINDOC_FEEDBACK_DB": web_server.feedback_db})
        assert result.returncode == 0, result.stderr
        text = out.read_text(encoding="utf-8") if args else result.stdout
        cases = [json.loads(line) for line in text.splitlines()]
        mine = [c for c in cases if c["query"] == question]
        assert len(mine) == 1, cases
        case = mine[0]
        assert case["rating"] == "good" and case["channel"] == "web"
        heading = re.sub(r" \[[a-z]{2}\]$", "", first.split("›", 1)[1].split(" > ")[-1].strip())
        assert case["gold"] == [{"file": _cited_file(first), "heading": heading}]
    assert "wrote" in result.stderr
