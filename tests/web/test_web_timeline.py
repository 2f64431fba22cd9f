"""The job's timeline picture in a real browser (the system Chromium): the SVG of a 16-rank failed job on two nodes
(tests/jobs/picturekit.py) on its own at 1280 and 400 px, light and dark, its labels apart and inside the width;
then in the web chat, where an uploaded log's answer shows it below the verdict."""

from __future__ import annotations

import base64
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import picturekit
import pytest
from web_server_kit import ask

from jobs.picture import svg_of
from jobs.triage import triage_paths

SVG = "{http://www.w3.org/2000/svg}"
PICTURE = "#chat img[src^='data:image/svg+xml']"
# Every text of one kind, with its box: the lane labels, node labels, ticks and legend each must not overlap.
BOXES = """(selector) => [...document.querySelectorAll(selector)].map(e => {
  const r = e.getBoundingClientRect(); return {text: e.firstChild ? e.firstChild.nodeValue : "", left: r.left, right: r.right, top: r.top,
  bottom: r.bottom}; })"""


@pytest.fixture(scope="module")
def job_svg(tmp_path_factory: pytest.TempPathFactory) -> str:
    folder = picturekit.write_job(tmp_path_factory.mktemp("job16"))
    svg = svg_of(triage_paths([folder], "why did my job die?"))
    assert svg is not None
    return svg


@pytest.fixture
def context(browser: Any) -> Iterator[Any]:
    made: list[Any] = []

    def opened(width: int, scheme: str) -> Any:
        made.append(browser.new_context(viewport={"width": width, "height": 900}, color_scheme=scheme, locale="en-US"))
        page = made[-1].new_page()
        page.set_default_timeout(30_000)
        return page

    try:
        yield opened
    finally:
        for each in made:
            each.close()


def _apart(boxes: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """Pairs of boxes that overlap (by more than half a pixel)."""
    clashes = []
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            if min(a["right"], b["right"]) - max(a["left"], b["left"]) > 0.5 and \
                    min(a["bottom"], b["bottom"]) - max(a["top"], b["top"]) > 0.5:
                clashes.append((a["text"], b["text"]))
    return clashes


@pytest.mark.parametrize("width", [1280, 400])
@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_picture_reads_at_1280_and_400_px_in_light_and_dark(context: Any, job_svg: str, width: int, scheme: str,
                                                                tmp_path: Path) -> None:
    page = context(width, scheme)
    page.set_content(f"<!doctype html><html><body style='margin:0'>{job_svg}</body></html>")
    page.screenshot(path=str(tmp_path / f"timeline-{width}-{scheme}.png"), full_page=True)
    svg = page.locator("svg.traindoc-timeline").bounding_box()
    assert svg["width"] <= width and svg["width"] >= min(width, 680) - 1
    labels = page.evaluate(BOXES, ".lane-label")
    assert [label["text"].split("rank ")[-1] for label in labels if "rank" in label["text"]] == [str(r) for r in range(16)]
    for kind in (".lane-label", ".node-label", ".tick", ".legend-label", ".title, .subtitle"):
        boxes = page.evaluate(BOXES, kind)
        assert boxes, kind
        assert not _apart(boxes), (kind, _apart(boxes))
        assert all(b["left"] >= 0 and b["right"] <= width for b in boxes), (kind, boxes)
    smallest = page.evaluate("() => Math.min(...[...document.querySelectorAll('svg text')].map("
                             "t => t.getBoundingClientRect().height))")
    assert smallest >= (9 if width == 400 else 12), smallest  # the smallest text's box, in CSS pixels
    background = page.evaluate("() => getComputedStyle(document.querySelector('svg .bg')).fill")
    label = page.evaluate("() => getComputedStyle(document.querySelector('svg .lane-label')).fill")
    if scheme == "dark":
        assert (background, label) == ("rgb(13, 17, 23)", "rgb(230, 237, 243)")
    else:
        assert (background, label) == ("rgb(255, 255, 255)", "rgb(31, 35, 40)")


def _picture_in_chat(page: Any) -> ET.Element:
    src = page.locator(PICTURE).last.get_attribute("src") or ""
    return ET.fromstring(base64.b64decode(src.split(",", 1)[1]).decode("utf-8"))


@pytest.mark.slow
@pytest.mark.parametrize(("width", "scheme"), [(1280, "light"), (400, "dark")])
def test_an_uploaded_job_log_shows_its_timeline_below_the_verdict(context: Any, web_server: Any, tmp_path: Path,
                                                                  width: int, scheme: str) -> None:
    log = picturekit.combined_log(tmp_path / "job16.log")
    page = context(width, scheme)
    page.goto(web_server.url)
    page.wait_for_selector("#question textarea:enabled")
    page.set_input_files("#log input[type=file]", str(log))
    page.locator("#log", has_text="job16").wait_for()
    ask(page, "why did my job die?")
    page.wait_for_selector(PICTURE)
    picture = page.locator(PICTURE).last
    # the answer's message that holds it (``has`` is relative to the message: the image alone, not "#chat img")
    message = page.locator("#chat .bot-row .message", has=page.locator("img[src^='data:image/svg+xml']")).last
    said = message.inner_text()
    assert said.index("rank 11") < said.index("Checks, more fixes"), said[:600]  # the verdict first, the picture below
    picture.scroll_into_view_if_needed()
    page.screenshot(path=str(tmp_path / f"chat-{width}-{scheme}.png"))
    box = picture.bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= width
    assert box["width"] >= (300 if width == 400 else 600), box  # as wide as the chat lets it be
    assert page.evaluate("() => document.documentElement.scrollWidth") <= width
    root = _picture_in_chat(page)
    lanes = [g for g in root.iter(f"{SVG}g") if "lane" in g.get("class", "").split() and g.get("data-rank")]
    assert len(lanes) == 16
    first = [e for e in root.iter() if {"mark", "first-failure"} <= set(e.get("class", "").split())]
    assert [e.get("data-rank") for e in first] == ["11"]


@pytest.mark.slow
def test_a_question_without_a_log_shows_no_picture(web_page: Any) -> None:
    page = web_page.page
    ask(page, "why is NCCL hanging")
    assert page.locator(PICTURE).count() == 0
