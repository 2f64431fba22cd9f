"""`traindoc web` where its disk cannot take what it writes, run as a user runs it (a real server on 127.0.0.1):

- on a read-only data folder (a read-only bind mount in a mount namespace of the server's own: chmod does not stop
  root) it starts, says once what it will not save, and answers; Gradio's uploads and the index's copy go to private
  folders in the system's temporary folder, and a SIGTERM (to the server, or to its whole group as a service
  manager sends it) leaves none of them behind;
- a folder it cannot write to serve from is said as that, never as a port to change;
- on a full disk (a real tmpfs as Gradio's folder, filled) an upload is held in memory and answered; one that the
  disk fails while it is written (no inode left) is refused with HTTP 507 and one line; never a 500, never a
  traceback in the server's log.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from web_server_kit import WebServer, ask, child_pids, source_files, start_web

pytestmark = pytest.mark.slow

WATCHDOG = ("[E ProcessGroupNCCL.cpp:475] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, "
            "OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600031 milliseconds before timing out.\n")
# An HTTP 500 as the server logs it, never the digits inside a port number ("127.0.0.1:50047").
NOISE = re.compile(r"Traceback|Exception in ASGI|Internal Server Error|(?<![\d:.])500(?!\d)")


def _log(size: int) -> str:
    """A training log of about ``size`` characters that ends in an NCCL watchdog timeout."""
    steps = "".join(f"step {i} loss 2.{i % 97:02d} lr 3e-4\n" for i in range(size // 28))
    return steps + WATCHDOG + "terminate called after throwing an instance of 'c10::DistBackendError'\n"


# -- a read-only data folder ------------------------------------------------------------------------------------

def _read_only(data: Path) -> Any:
    """A launcher: the server's command in a mount namespace where ``data`` is a read-only bind mount."""
    script = 'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" && exec "$@"'
    return lambda argv: ["unshare", "-m", "sh", "-c", script, str(data), *argv]


@pytest.fixture
def read_only_folder(tmp_path: Path) -> Path:
    probe = tmp_path / "probe"
    probe.mkdir()
    if os.geteuid() != 0 or not shutil.which("unshare"):
        pytest.skip("needs root and a mount namespace (unshare) to make the data folder read-only")
    made = subprocess.run(_read_only(probe)(["touch", str(probe / "x")]), capture_output=True, text=True, timeout=30,
                          check=False)
    if made.returncode == 0 or "Read-only" not in made.stderr:
        pytest.skip(f"no read-only bind mount here: {made.stderr.strip()[:200]}")
    return tmp_path


def _said_once_serving(server: WebServer) -> list[str]:
    """The server's lines once it said it serves (it says so just after its page first answers)."""
    deadline = time.monotonic() + 30
    while "serving on" not in server.stderr() and time.monotonic() < deadline:
        time.sleep(0.1)
    return [line for line in server.stderr().splitlines() if line.strip()]


def _gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1].startswith("Z")  # a zombie left to PID 1
    except (OSError, IndexError):
        return True


@pytest.mark.parametrize("to", ["server", "group"])
def test_web_starts_on_a_read_only_data_folder_and_a_sigterm_leaves_no_private_copy(
        read_only_folder: Path, shared_index: Path, to: str) -> None:
    from gradio_client import Client

    base = read_only_folder
    temporary = base / "tmp"  # the server's system temporary folder: what it leaves there is its own
    temporary.mkdir()
    data = base / "data"
    shutil.copytree(shared_index, data)
    (data / "store-version").unlink()  # the snapshot is not known current: the store itself is opened, from a copy
    server = start_web(base, shared_index, env={"TMPDIR": str(temporary), "TRAINDOC_FEEDBACK_DB": ""},
                       launcher=_read_only(data))
    try:
        lines = _said_once_serving(server)
        assert len(lines) == 2 and lines[1] == f"traindoc web: serving on http://127.0.0.1:{server.port}", lines
        assert "conversations and thumbs up/down will not be saved: the data folder is read-only" in lines[0]
        client = Client(server.url, verbose=False)
        short = client.predict("NCCL watchdog timeout", api_name="/ask")
        assert short["citations"][0]["source"] == "corpus/runbooks/en/collective_timeout.md", short
        long = client.predict(_log(70_000), api_name="/ask")  # a long paste: answered by the worker process
        assert long["citations"][0]["source"] == "corpus/runbooks/en/collective_timeout.md", long
        workers = child_pids(server.process.pid)
        assert workers, "the long paste was answered in the worker process"
        made = sorted(p.name.rsplit("-", 1)[0] for p in temporary.iterdir())
        assert made == ["traindoc-index", "traindoc-index", "traindoc-uploads"], made  # the server's, the worker's
        assert not NOISE.search(server.stderr()), server.stderr()
        if to == "group":  # a service manager's stop
            os.killpg(server.process.pid, signal.SIGTERM)
        else:
            server.process.send_signal(signal.SIGTERM)
        assert server.process.wait(timeout=60) == -signal.SIGTERM
        deadline = time.monotonic() + 30
        while not all(_gone(pid) for pid in workers) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert all(_gone(pid) for pid in workers)
        assert list(temporary.iterdir()) == []
    finally:
        server.stop()


def test_a_folder_the_server_cannot_write_is_said_as_that_never_as_a_port(
        read_only_folder: Path, shared_index: Path) -> None:
    base = read_only_folder
    data = base / "data"
    shutil.copytree(shared_index, data)
    server = start_web(base, shared_index, env={"GRADIO_TEMP_DIR": str(data / "uploads")}, launcher=_read_only(data),
                       wait=False)
    try:
        assert server.process.wait(timeout=240) == 1
        lines = [line for line in server.stderr().splitlines() if line.strip()]
        assert lines[-1] == (f"traindoc: error: cannot start the web server: Read-only file system ({data / 'uploads'})"
                             " (set TRAINDOC_DATA_DIR (or GRADIO_TEMP_DIR) to a folder this user can write)"), lines
        assert "--port" not in server.stderr() and "Traceback" not in server.stderr()
    finally:
        server.stop()


@pytest.mark.parametrize(("number", "said", "hint"), [
    (errno.EADDRINUSE, "the address is in use", "pick another --port"),
    (errno.ENOSPC, "cannot start the web server", "free some space"),
    (errno.EROFS, "cannot start the web server", "to a folder this user can write"),
    (errno.EIO, "cannot start the web server", "--debug"),
])
def test_only_an_address_in_use_is_a_port_problem(number: int, said: str, hint: str) -> None:
    from traindoc_cli.main import _serve_failed

    error = _serve_failed("127.0.0.1", 7860, OSError(number, os.strerror(number), "/srv/x"))
    assert said in error.message and hint in (error.hint or "")
    assert ("--port" in (error.hint or "")) == (number == errno.EADDRINUSE)


# -- a full disk during an upload -----------------------------------------------------------------------------

@contextmanager
def _small_disk(where: Path, size_mb: int, inodes: int) -> Iterator[Path]:
    where.mkdir()
    if os.geteuid() != 0:
        pytest.skip("needs root to mount a small tmpfs as Gradio's upload folder")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_mb}m,nr_inodes={inodes},mode=0700", "tmpfs",
                              str(where)], capture_output=True, text=True, timeout=30, check=False)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()[:200]}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True, timeout=30, check=False)


def _fill_bytes(disk: Path, leave: int) -> Path:
    filler = disk / "filler"
    with filler.open("wb") as handle:
        while (more := shutil.disk_usage(disk).free - leave) > 0:
            handle.write(b"\0" * min(2**20, more))
            handle.flush()
    return filler


def _fill_inodes(disk: Path) -> None:
    for n in range(100_000):
        try:
            (disk / f"inode-{n}").touch()
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
            return
    raise AssertionError("the tmpfs never ran out of inodes")


def _post_upload(server: WebServer, name: str, data: bytes) -> tuple[int, str]:
    boundary = "traindocboundary7e1f"
    body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"files\"; filename=\"{name}\"\r\n"
            "Content-Type: application/octet-stream\r\n\r\n").encode() + data + f"\r\n--{boundary}--\r\n".encode()
    request = urllib.request.Request(f"{server.url}gradio_api/upload", data=body, method="POST",
                                     headers={"Content-Type": f"multipart/form-data; boundary={boundary}"})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_a_full_disk_during_an_upload_holds_it_in_memory_or_says_so_in_one_line(
        shared_index: Path, tmp_path: Path, browser: Any) -> None:
    with _small_disk(tmp_path / "uploads", 64, 512) as disk:
        server = start_web(tmp_path / "web", shared_index, "--max-upload-mb", "4", env={"GRADIO_TEMP_DIR": str(disk)})
        try:
            filler = _fill_bytes(disk, leave=1 * 2**20)  # after the start: Gradio copies its examples there then
            log = tmp_path / "train.log"
            log.write_text(_log(1_500_000), encoding="utf-8")  # 1.5 MB: more than the disk has left
            status, said = _post_upload(server, "direct.log", b"NCCL WARN x\r\n\0binary\r\n--traindocboundary7e1\r\n")
            assert status == 200, said
            (path,) = json.loads(said)
            assert path.startswith(str(disk)) and not Path(path).exists()  # Gradio's kind of path, held in memory

            context = browser.new_context(viewport={"width": 1400, "height": 1000}, locale="en-US")
            try:
                page = context.new_page()
                page.set_default_timeout(30_000)
                page.goto(server.url)
                page.wait_for_selector("#question textarea:enabled")
                page.set_input_files("#log input[type=file]", str(log))
                page.locator("#log", has_text="train").wait_for()
                ask(page, "")
                assert source_files(page)[0] == "collective_timeout.md"
                assert "Watchdog caught collective operation timeout" in page.inner_text("#chat")
                assert "📎 train.log" in page.inner_text("#chat")
            finally:
                context.close()
            assert not list(disk.rglob("train.log"))

            filler.unlink()  # space again, but not one inode: the disk fails Gradio's own write
            _fill_inodes(disk)
            status, said = _post_upload(server, "late.log", log.read_bytes())
            assert status == 507, said
            assert json.loads(said) == {"detail": "the upload could not be kept: the server's disk is full. Paste the "
                                        "log's last lines into the message instead, or upload it again once there "
                                        "is space."}
            urllib.request.urlopen(server.url, timeout=10).close()  # and it goes on serving
            stderr = server.stderr()
            assert "an upload of 1.5 MB is held in memory" in stderr
            assert f"an upload was refused: {disk} has no space left" in stderr
            assert not NOISE.search(stderr), stderr
        finally:
            server.stop()


# -- the pieces, alone ----------------------------------------------------------------------------------------

def _run(coroutine: Any) -> Any:
    """``asyncio.run`` on a thread of its own (the browser's Playwright keeps an event loop on this one)."""
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


def test_a_held_upload_is_taken_once_and_dropped_when_no_turn_takes_it(tmp_path: Path) -> None:
    from traindoc_web.held import HeldUploads

    held = HeldUploads(budget=100, hold_s=60)
    path = held.put(str(tmp_path), "../../etc/passwd", b"x" * 60)
    assert Path(path).parent.parent == tmp_path and Path(path).name == "passwd"
    assert not held.room(41) and held.room(40)
    assert held.take(path) == b"x" * 60 and held.take(path) is None and held.take(None) is None
    stale = HeldUploads(budget=100, hold_s=0)
    gone = stale.put(str(tmp_path), "a.log", b"y")
    time.sleep(0.01)
    assert stale.take(gone) is None and stale.room(100)


def test_a_write_that_fails_for_space_is_a_507_and_any_other_error_is_not_hidden(tmp_path: Path) -> None:
    from starlette.exceptions import HTTPException

    from traindoc_web.held import HeldUploads, guarded

    class Request:
        headers = {"content-length": "10"}

    def failing(error: OSError) -> Any:
        async def upload_fn(*_args: Any, **_kwargs: Any) -> Any:
            raise error
        return upload_fn

    upload = guarded(failing(OSError(errno.ENOSPC, "No space left on device")), HeldUploads())
    with pytest.raises(HTTPException) as refused:
        _run(upload(Request(), str(tmp_path), 2**20, None))
    assert refused.value.status_code == 507 and "disk is full" in str(refused.value.detail)
    upload = guarded(failing(OSError(errno.EACCES, "Permission denied")), HeldUploads())
    with pytest.raises(PermissionError):
        _run(upload(Request(), str(tmp_path), 2**20, None))


def test_a_form_read_into_memory_is_the_bytes_that_were_sent() -> None:
    from traindoc_web.held import FORM_BYTES, _read_form

    sent = b"NCCL WARN x\r\n\0\xff\xfe binary\r\n--edge\r\n--edg\r\nlast line without an end"
    body = (b'--edge7\r\nContent-Disposition: form-data; name="files"; filename="a.log"\r\n'
            b"Content-Type: application/octet-stream\r\n\r\n" + sent + b"\r\n--edge7--\r\n")

    class Request:
        headers = {"content-type": "multipart/form-data; boundary=edge7"}

        async def stream(self) -> Any:
            for start in range(0, len(body), 7):
                yield body[start:start + 7]

    assert _run(_read_form(Request(), len(body) + FORM_BYTES)) == [("a.log", sent)]


def test_a_held_log_is_read_from_memory_and_a_held_gzip_or_bundle_is_one_line() -> None:
    import gzip

    from common.errors import InputError
    from traindoc_web.upload import read_upload

    reading, paths = read_upload("/srv/gradio/abc/train.log", 1, "why", held=_log(20_000).encode())
    assert paths == () and any("Watchdog caught collective operation timeout" in line for line in reading.errors)
    for data in (gzip.compress(b"NCCL WARN x\n"), b'{"traindoc_bundle": 1, "results": []}'):
        with pytest.raises(InputError) as refused:
            read_upload("/srv/gradio/abc/job.log.gz", 1, "why", held=data)
        assert refused.value.message.startswith("'job.log.gz': the upload could not be kept: the server's disk is full")
