"""Log uploads through the page of a server started with --max-upload-mb 1: a log with an NCCL watchdog
timeout is answered from the NCCL timeout section; a binary file and a 2 MB file get a clear message in the
page, and the server goes on answering."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from web_server_kit import ask, source_files, source_summaries

pytestmark = pytest.mark.slow

WATCHDOG = ("[E ProcessGroupNCCL.cpp:475] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, "
            "OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600031 milliseconds before timing out.\n")


def _upload(page, path: Path) -> None:
    page.set_input_files("#log input[type=file]", str(path))


def test_nccl_watchdog_log_cites_the_timeout_section(web_page, tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_text("step 10 loss 2.31\nstep 11 loss 2.30\n" + WATCHDOG + "terminate called after throwing\n")
    page = web_page.page
    _upload(page, log)
    page.locator("#log", has_text="train").wait_for()
    ask(page, "")
    summaries = source_summaries(page)
    assert source_files(page)[0] == "collective_timeout.md", summaries  # nothing names a cause yet: find the rank first
    assert any(t in s for s in summaries for t in ("NCCL 超时", "网络超时", "NCCL Timeout", "Network Timeout")), summaries
    assert "Watchdog caught collective operation timeout" in page.inner_text("#chat")


CASCADE = """[default0]:step 3 loss 2.1
[default2]:Traceback (most recent call last):
[default2]:  File "/job/train.py", line 35, in collate
[default2]:KeyError: 'target'
[default0]:RuntimeError: [../gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting 10000ms for recv operation to complete
[default1]:RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer [127.0.0.1]:4242
"""


def test_a_job_log_leads_with_the_rank_that_failed_first(web_page, tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    log.write_text(CASCADE)
    page = web_page.page
    _upload(page, log)
    page.locator("#log", has_text="job").wait_for()
    ask(page, "why did my job die?")
    chat = page.inner_text("#chat")
    root = chat.index("rank 2 raised KeyError: 'target'")
    assert root < chat.index("rank 0 timed out waiting"), chat[-1500:]
    assert "consequences of rank 2's failure" in chat


def test_binary_upload_gets_a_clear_message(web_page, web_server, tmp_path: Path) -> None:
    blob = tmp_path / "model.bin"
    blob.write_bytes(bytes(range(256)) * 64)
    page = web_page.page
    _upload(page, blob)
    page.locator("#log", has_text="model").wait_for()
    ask(page, "why did training stop?", expect_error=True)
    chat = page.inner_text("#chat")
    assert "mostly binary, not a text log" in chat and "'model.bin'" in chat, chat[-500:]
    assert "Traceback" not in chat and "internal error" not in chat
    assert "binary" in page.inner_text("#status")
    _still_serving(page)


def test_upload_over_the_limit_is_refused(web_page, web_server, tmp_path: Path) -> None:
    big = tmp_path / "huge.log"
    with big.open("wb") as handle:
        handle.write(b"step 1 loss 2.0\n" * (2 * 1024 * 1024 // 16 + 1))
    assert big.stat().st_size > 2 * 1024 * 1024 - 1
    page = web_page.page
    assert "max 1 MB" in page.inner_text("#log")
    _upload(page, big)
    error = page.locator(".toast-body").first
    error.wait_for()
    message = error.inner_text()
    assert "exceed" in message and "1" in message and "huge.log" in message, message
    uploads = Path(web_server.env["TRAINDOC_DATA_DIR"]) / "cache"
    assert not list(uploads.rglob("huge.log")), "the refused file was stored anyway"
    _still_serving(page)


def _still_serving(page) -> None:
    page.reload()
    page.wait_for_selector("#question textarea")
    # the conversation comes back after the page loads (the Ask button is enabled with it): counted before it
    # shows, its warning would pass for a new one
    page.wait_for_selector("#ask:not([disabled])")
    ask(page, "CUDA out of memory with ZeRO-3, what can I do?")
    first = source_summaries(page)[0]
    assert "显存" in first or "OOM" in first or "out of memory" in first.lower(), first


def test_over_limit_file_is_refused_by_the_handler_too(tmp_path: Path) -> None:
    """Gradio enforces max_file_size on upload; the handler checks again for files that reach it anyway."""
    from common.errors import InputError
    from traindoc_web.upload import read_upload

    big = tmp_path / "big.log"
    with big.open("wb") as handle:
        handle.truncate(2 * 1024 * 1024)
    with pytest.raises(InputError, match="the limit is 1 MB"):
        read_upload(str(big), 1)
    small = tmp_path / "ok.log"
    small.write_text(WATCHDOG)
    reading, paths = read_upload(str(small), 1)
    assert reading.errors and paths == (small,) and "Watchdog" in reading.head
    assert reading.diagnosis is not None and reading.diagnosis.collective == "ALLREDUCE SeqNum=1"
    empty, none = read_upload(None, 1)
    assert (empty.head, empty.errors, empty.diagnosis, none) == ("", [], None, ())
    assert os.path.exists(big)
