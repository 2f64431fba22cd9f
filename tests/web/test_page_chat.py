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
from web_server_kit import ask, last_answer, last_steps, latest_sources, source_files, source_summaries

pytestmark = pytest.mark.slow

CORPUS = ROOT / "corpus"
# as the original names them, and as their English renderings do (an English asker reads those)
PORT_SECTIONS = ("端口被占用", "检查端口占用", "检查进程状态", "Port Already in Use", "Check Port Usage", "Check Process Status")
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


@pytest.mark.parametrize(
    ("question", "expected_file", "expected_section"),
    [
        # a hang in allreduce: the timeout sections, or the one on ranks that do not call the same collectives
        ("NCCL timeout: training hangs at allreduce", ("004_", "002_", "001_"), ("NCCL 超时", "网络超时", "DDP (分布式)",
                                                                                 "NCCL Timeout", "Network Timeout", "DDP (Distributed)")),
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
    assert not any(probe in s for s in steps for probe in PROBES), "the server's own host is not probed by default"

    summaries, files = source_summaries(page), source_files(page)
    assert summaries[0].startswith("[1] "), summaries
    assert not any(re.search(r"\d{3}_[0-9a-f]{16}", s) for s in summaries), "titles, never hash-named files"
    lang = "zh" if question.startswith("训练") else "en"
    n = next(i for i, f in enumerate(files) if re.match(r"\d{3}_", f))  # the first document's
    assert all((CORPUS / "runbooks" / lang / f).is_file() for f in files[:n]), files  # a runbook before it
    assert files[n].startswith(expected_file), files
    assert any(section in summaries[n] for section in expected_section), summaries
    assert (CORPUS / files[n]).is_file()

    first = latest_sources(page).locator(".traindoc-source").nth(n).locator("xpath=..")
    assert not first.locator(".traindoc-section").is_visible()
    first.locator("summary").click()
    section = first.locator(".traindoc-section")
    section.wait_for(state="visible")
    text = section.inner_text()
    # An English asker reads the seed section's English rendering ([en]); a Chinese one the original.
    shown = (CORPUS / "renderings" / "en" / Path(files[n]).with_suffix(".md").name
             if summaries[n].endswith("[en]") else CORPUS / files[n])
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
    assert "port is already in use" in source_summaries(page)[0]  # the runbook, by its title
    assert any(p in s for s in source_summaries(page) for p in PORT_SECTIONS)

    ask(page, "and how do I find which process holds it?")
    summaries, files = source_summaries(page), source_files(page)
    port = [s for s, f in zip(summaries, files, strict=True) if f.startswith("002_") and any(p in s for p in PORT_SECTIONS)]
    assert port, summaries
    assert "[1]" in last_answer(page)
    assert page.locator("#chat .user-row").count() == 2
    _assert_same_host(web_page.urls, web_server.netloc)


def test_thumbs_up_is_exported_as_an_eval_case(web_page, web_server, tmp_path: Path) -> None:
    """Two turns; the first (the brief answer, the whole one folded under it, one pair of thumbs) is the one liked."""
    page = web_page.page
    question = "RuntimeError: The server socket has failed to listen on port 29500, Address already in use"
    ask(page, question)
    first, first_file = source_summaries(page)[0], source_files(page)[0]
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
        assert [g["file"] for g in case["gold"]] == [first_file]
        assert case["gold"][0]["heading"] and case["gold"][0]["heading"] in first, (case["gold"], first)
    assert "wrote" in result.stderr
