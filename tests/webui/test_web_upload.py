"""Log upload in the browser: it drives the search like `ask --log`; oversize files are refused clearly."""

from __future__ import annotations

from pathlib import Path

import pytest
from web_kit import start_web, stop_web, web_env


def test_uploaded_log_drives_the_search(browser, web, tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    noise = "".join(f"step {i} loss=2.31 lr=1e-4\n" for i in range(3000))
    log.write_text(noise + "[rank3]:[E ProcessGroupNCCL.cpp:607] Watchdog caught collective operation timeout: "
                   "WorkNCCL(SeqNum=1, OpType=ALLREDUCE) ran for 600000 milliseconds before timing out.\n" + noise)
    page = browser.new_page()
    try:
        page.goto(web.url)
        page.set_input_files("#log input[type=file]", str(log))
        page.wait_for_timeout(1500)
        page.fill("#question textarea", "why did my job die?")
        page.click("#ask")
        page.wait_for_selector("#sources details", timeout=90_000)
        summaries = page.locator("#sources details summary").all_inner_texts()
        assert any("超时" in s for s in summaries[:3]), summaries
    finally:
        page.close()


def test_oversize_upload_is_refused_with_a_message(browser, shared_index: Path, tmp_path: Path) -> None:
    server = start_web(web_env(tmp_path, shared_index), tmp_path, "--max-upload-mb", "1")
    big = tmp_path / "big.log"
    big.write_text("x" * 100 + "\n" * 1 + ("noise line\n" * 200_000))
    assert big.stat().st_size > 1024 * 1024
    page = browser.new_page()
    try:
        page.goto(server.url)
        page.set_input_files("#log input[type=file]", str(big))
        page.wait_for_timeout(2500)
        text = page.locator("body").inner_text().lower()
        if "exceeds" not in text and "too large" not in text and "limit" not in text:
            page.fill("#question textarea", "why did it crash")
            page.click("#ask")
            page.wait_for_function("() => /limit|exceed|too large/i.test(document.body.innerText)", timeout=60_000)
        assert server.process.poll() is None, "the server keeps running"
    finally:
        page.close()
        stop_web(server)
    pytest.importorskip("gradio")
