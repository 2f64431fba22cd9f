"""py-spy reads a running rank without pausing it, so one read can fail mid-update ("Failed to copy PyCodeObject:
Bad address", seen here about once in 90 reads of a real hung job). The reader asks the debug server's py-spy page
once more for the ranks whose stack failed, before falling back to faulthandler's stacks (which carry no pid).

The frontend is a real HTTP server on 127.0.0.1 serving the page shape torch.distributed.debug's frontend serves."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from jobs.debug_server import read_debug_server

FAILED = ("Process 4242: python -u train.py\nPython v3.11.7 (/usr/bin/python3.11)\n\nError: Failed to get stack traces\n\n"
          "Caused by:\n    0: Failed to call get_stack_trace for thread 140209568065216\n    1: Failed to copy PyCodeObject\n"
          "    2: Bad address (os error 14)\n")


def _dump(pid: int, func: str) -> str:
    return (f"Process {pid}: python -u train.py\nPython v3.11.7 (/usr/bin/python3.11)\n\n"
            f'Thread {pid} (idle): "MainThread"\n    {func} (train.py:30)\n    main (train.py:44)\n    <module> (train.py:50)\n')


def _section(rank: int, text: str, status: int = 200) -> str:
    failed = f"<p>Failed to fetch: status={status}</p>" if status != 200 else ""
    return f"<h2>Rank {rank}: http://127.0.0.1:{9000 + rank}</h2>{failed}<pre>{text}</pre>"


class Frontend(BaseHTTPRequestHandler):
    pyspy_calls = 0

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        if self.path.startswith("/pyspy_dump"):
            Frontend.pyspy_calls += 1
            flaky = Frontend.pyspy_calls == 1
            body = _section(0, _dump(4241, "barrier")) + (
                _section(1, FAILED, 500) if flaky else _section(1, _dump(4242, "load_shard")))
        elif self.path.startswith("/stacks"):
            body = "".join(_section(r, f'Thread 0x0001 (most recent call first):\n  File "train.py", line 30 in {f}\n')
                           for r, f in ((0, "barrier"), (1, "load_shard")))
        else:
            body = ""
        data = f"<html><body>{body}</body></html>".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def frontend() -> Iterator[str]:
    Frontend.pyspy_calls = 0
    server = ThreadingHTTPServer(("127.0.0.1", 0), Frontend)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_a_failed_py_spy_read_is_asked_once_more(frontend: str) -> None:
    reading = read_debug_server(frontend, timeout_s=5)
    assert Frontend.pyspy_calls == 2
    assert reading.pids == {0: 4241, 1: 4242}  # rank 1's pid from the second read, not lost to the fallback
    assert not reading.errors
