"""A client for PyTorch's distributed debug server (``torch.distributed.debug.start_debug_server``).

The job starts it on every rank; rank 0 serves the frontend (port 25999 unless the job chose another)
and fetches each rank's data from that rank's worker server, on whichever node it runs, so one URL
covers the whole job and nothing of traindoc runs on the other nodes. The frontend answers HTML pages
with one ``<h2>Rank N: WORKER_URL</h2>`` and one ``<pre>`` per rank:

    /pyspy_dump      each rank's ``py-spy dump`` (needs py-spy on the workers' PATH)
    /stacks          each rank's faulthandler traceback (always there)
    /fr_trace_json   each rank's Flight Recorder trace as JSON

Only GET requests, stdlib urllib, every request bounded by the caller's timeout.
"""

from __future__ import annotations

import html
import json
import re
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

from common.errors import ConfigError, UsageError
from jobs.pyspy import ThreadStack, main_thread, parse_text, parse_traceback

DEFAULT_PORT = 25999
_SECTION = re.compile(r"<h2>\s*Rank (\d+): ([^<]*)</h2>\s*(?:<p>Failed to fetch: status=(\d+)</p>\s*)?<pre>(.*?)</pre>", re.S)


@dataclass(frozen=True)
class RankPage:
    rank: int
    worker: str  # the rank's worker-server URL, as the frontend lists it
    status: int  # 200, or what the frontend got from that worker
    text: str


@dataclass
class DebugServerReading:
    url: str
    threads: dict[int, tuple[ThreadStack, ...]] = field(default_factory=dict)
    pids: dict[int, int] = field(default_factory=dict)
    hosts: dict[int, str] = field(default_factory=dict)
    errors: dict[int, str] = field(default_factory=dict)  # ranks whose stack could not be had, and why
    fr_dumps: dict[int, dict[str, Any]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def normalise_url(url: str) -> str:
    text = url.strip()
    if "://" not in text:
        text = "http://" + text
    parsed = urlparse(text)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise UsageError(f"--debug-server {url}: expected http://HOST[:PORT] (rank 0's host, port {DEFAULT_PORT} by default)")
    port = parsed.port or DEFAULT_PORT
    host = f"[{parsed.hostname}]" if ":" in parsed.hostname else parsed.hostname
    return f"{parsed.scheme}://{host}:{port}"


def fetch_pages(base: str, endpoint: str, timeout_s: float, query: str = "") -> list[RankPage]:
    """One frontend page, split by rank. Raises ConfigError when the frontend cannot be reached."""
    url = f"{base}/{endpoint}" + (f"?{query}" if query else "")
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method="GET"), timeout=timeout_s) as response:
            body = response.read(32 * 1024 * 1024).decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        raise ConfigError(f"--debug-server {base}: /{endpoint} answered HTTP {exc.code} {exc.reason}") from exc
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise ConfigError(
            f"--debug-server {base}: cannot reach it ({reason})",
            hint="the job must call torch.distributed.debug.start_debug_server() on every rank; its frontend "
            f"listens on rank 0's host, port {DEFAULT_PORT} unless start_debug_server(port=...) chose another",
        ) from exc
    return parse_page(body)


def parse_page(body: str) -> list[RankPage]:
    pages = []
    for match in _SECTION.finditer(body):
        text = match.group(4)
        if re.search(r"&(?:lt|gt|amp|quot|#\d+);", text):  # an escaping template (the current one is not)
            text = html.unescape(text)
        pages.append(RankPage(int(match.group(1)), html.unescape(match.group(2).strip()),
                              int(match.group(3) or 200), text))
    return pages


def _pyspy_stack(page: RankPage) -> tuple[int | None, tuple[ThreadStack, ...]] | None:
    """(pid, threads) of a rank's py-spy page, when it holds the main thread's stack."""
    if page.status != 200:
        return None
    pid, threads = next(iter(parse_text(page.text).items()), (None, ()))
    return (pid, threads) if main_thread(threads) is not None else None


def read_debug_server(url: str, *, timeout_s: float = 10.0, native: bool = False) -> DebugServerReading:
    """Every rank's stack (py-spy's, else faulthandler's) and Flight Recorder trace, fetched concurrently."""
    base = normalise_url(url)
    reading = DebugServerReading(base)
    # Native frames need the target paused. The frontend adds nonblocking=1 unless the query names the key,
    # and the worker passes --nonblocking when the key has any value: an empty one pauses.
    pyspy_query = "native=1&nonblocking=" if native else ""
    with ThreadPoolExecutor(max_workers=3, thread_name_prefix="debug-server") as pool:
        pyspy = pool.submit(fetch_pages, base, "pyspy_dump", timeout_s, pyspy_query)
        stacks = pool.submit(fetch_pages, base, "stacks", timeout_s)
        traces = pool.submit(fetch_pages, base, "fr_trace_json", timeout_s)
        traceback_pages = {p.rank: p for p in stacks.result()}  # the one page every torch version serves
        try:
            pyspy_pages = {p.rank: p for p in pyspy.result()}
        except ConfigError as exc:
            pyspy_pages = {}
            reading.notes.append(f"py-spy page: {exc.message}")
        try:
            trace_pages = traces.result()
        except ConfigError as exc:
            trace_pages = []
            reading.notes.append(f"Flight Recorder page: {exc.message}")
    pyspy_stacks = {rank: _pyspy_stack(page) for rank, page in pyspy_pages.items()}
    missed = [rank for rank, stack in pyspy_stacks.items() if stack is None]
    if missed:  # py-spy reads a running process without pausing it: a read can fail mid-update; one more try
        try:
            again = {p.rank: p for p in fetch_pages(base, "pyspy_dump", timeout_s, pyspy_query)}
        except ConfigError:
            again = {}
        for rank in missed:
            if rank in again and (stack := _pyspy_stack(again[rank])) is not None:
                pyspy_pages[rank], pyspy_stacks[rank] = again[rank], stack
    for rank in sorted(set(traceback_pages) | set(pyspy_pages)):
        page = pyspy_pages.get(rank)
        fallback = traceback_pages.get(rank)
        worker = (page or fallback).worker  # type: ignore[union-attr]
        host = urlparse(worker).hostname
        if host:
            reading.hosts[rank] = host
        stack = pyspy_stacks.get(rank)
        if stack is not None:
            pid, threads = stack
            reading.threads[rank] = threads
            if pid is not None:
                reading.pids[rank] = pid
            continue
        if fallback is not None and fallback.status == 200:
            threads = parse_traceback(fallback.text)
            if main_thread(threads) is not None:
                reading.threads[rank] = threads
                continue
        source = fallback if fallback is not None else page
        reading.errors[rank] = f"the debug server could not fetch rank {rank}'s stack: " + (
            f"HTTP {source.status}: {source.text.strip()[:160]}" if source is not None else "no answer")
    for page in trace_pages:
        if page.status != 200:
            continue
        try:
            dump = json.loads(page.text)
        except ValueError:
            continue
        if isinstance(dump, dict) and dump.get("entries"):
            reading.fr_dumps[page.rank] = dump
    return reading
