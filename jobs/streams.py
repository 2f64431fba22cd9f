"""A log as a stream of bytes, read in blocks, in bounded memory: long lines cut, lines numbered, and a big
stream prefiltered by GNU grep while it is still being read (a file, a .gz being expanded, standard input)."""

from __future__ import annotations

import os
import subprocess
import threading
from collections import deque
from collections.abc import Iterable, Iterator

from jobs.signatures import prefilter_regex

EDGE_BYTES = 128 * 1024  # of a prefiltered stream, its head and tail are read whole (launch lines, the summary)
LINE_BYTES = 16 * 1024  # what of one line is kept (jobs.lines.MAX_LINE characters fit in it many times over)


def _last_state(tail: bytes) -> bytes:
    """What follows a cut line's kept start: a carriage-return progress bar's last states (jobs.lines.clean shows
    the last), else nothing (a long message keeps its start)."""
    at = tail.find(b"\r")
    return tail[at:] if at >= 0 else b""


def cut_long_lines(blocks: Iterable[bytes], cap: int = LINE_BYTES) -> Iterator[bytes]:
    """The same stream with every line longer than ``cap`` cut to its first ``cap`` bytes (and a progress bar's
    last state, from its last ``cap`` bytes): a 2 GB line costs 2 x ``cap`` of memory, and the lines after it
    are read. Blocks without a long line pass unchanged."""
    run = 0  # bytes of the current line passed on
    tail: bytes | None = None  # the current line's last bytes, once it passed the cap
    for block in blocks:
        if tail is None and _all_short(block, run, cap):
            run = len(block) - block.rfind(b"\n") - 1
            yield block
            continue
        pieces = block.split(b"\n")
        out: list[bytes] = []
        for index, piece in enumerate(pieces):
            if index:  # a newline ended the line before this piece
                if tail is not None:
                    out.append(_last_state(tail))
                    tail = None
                out.append(b"\n")
                run = 0
            if tail is not None:
                tail = (tail + piece)[-cap:]
            elif run + len(piece) <= cap:
                out.append(piece)
                run += len(piece)
            else:
                out.append(piece[: cap - run])
                tail = piece[cap - run:][-cap:]
                run = cap
        yield b"".join(out)
    if tail is not None:
        yield _last_state(tail)


def _all_short(block: bytes, run: int, cap: int) -> bool:
    """Whether no line of ``block`` (the first one ``run`` bytes in already) passes ``cap``, without splitting it: a
    line longer than ``cap`` between two newlines covers a whole aligned window of ``cap // 2`` bytes, so a newline
    in every such window says no line is (a few ``find`` calls a block)."""
    first, last = block.find(b"\n"), block.rfind(b"\n")
    if first < 0 or run + first > cap or len(block) - last - 1 > cap:
        return False
    half = cap // 2
    return all(block.find(b"\n", k * half, (k + 1) * half) >= 0 for k in range(first // half + 1, last // half))


def numbered_lines(blocks: Iterable[bytes]) -> Iterator[tuple[int, str]]:
    number, rest = 0, b""
    for block in blocks:
        pieces = (rest + block).split(b"\n")
        rest = pieces.pop()
        for piece in pieces:
            number += 1
            yield number, piece.decode("utf-8", "replace")
    if rest:
        yield number + 1, rest.decode("utf-8", "replace")


def _lines_at(data: bytes, start: int) -> Iterator[tuple[int, str]]:
    """The lines of ``data`` numbered by their byte offset (``data`` starts a line at ``start``)."""
    pieces = data.split(b"\n")
    if pieces[-1] == b"":
        pieces.pop()
    for piece in pieces:
        yield start, piece.decode("utf-8", "replace")
        start += len(piece) + 1


class _Feed:
    """What the thread writing into grep has passed on: its byte count, the last bytes, a failure."""

    def __init__(self) -> None:
        self.written = 0
        self.tail = b""
        self.error: BaseException | None = None


def grep_stream(blocks: Iterable[bytes], grep: str) -> Iterator[tuple[int, str]]:
    """Lines numbered by their byte offset: the whole head and tail, and between them what GNU grep keeps
    (``grep -b``: offsets cost grep nothing, line numbers would). The stream (a file, a .gz being expanded,
    standard input) is written into grep by a thread while its output is read here, in bounded memory."""
    blocks = iter(blocks)
    head = b""
    for block in blocks:
        head += block
        if len(head) > EDGE_BYTES:
            break
    else:
        yield from _lines_at(head, 0)
        return
    middle = head.rfind(b"\n", 0, EDGE_BYTES) + 1  # the head: the lines that end before EDGE_BYTES
    yield from _lines_at(head[:middle], 0)
    feed = _Feed()
    process = subprocess.Popen([grep, "-a", "-b", "-E", prefilter_regex()], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env={**os.environ, "LC_ALL": "C"})
    assert process.stdin is not None and process.stdout is not None
    sink = process.stdin

    def write() -> None:
        try:
            for block in _chain(head[middle:], blocks):
                feed.tail = (feed.tail + block)[-(EDGE_BYTES + 1):]
                feed.written += len(block)
                sink.write(block)
        except BrokenPipeError:
            pass
        except BaseException as exc:  # the cap, a damaged .gz: raised again below, in the reading thread
            feed.error = exc
        finally:
            try:
                sink.close()
            except OSError:
                pass

    writer = threading.Thread(target=write, name="traindoc-log-feed", daemon=True)
    held: deque[tuple[int, bytes]] = deque()  # grep's lines that may still turn out to be in the tail
    try:
        writer.start()
        while raw := process.stdout.readline(2 * LINE_BYTES + 64):
            offset, _, text = raw.partition(b":")
            if not offset.isdigit():
                continue
            held.append((middle + int(offset), text))
            # A line more than EDGE_BYTES before what has been written is not in the tail, whatever follows.
            while held and held[0][0] < middle + feed.written - EDGE_BYTES - 1:
                at, line = held.popleft()
                yield at, line.decode("utf-8", "replace")
        writer.join()
        if feed.error is not None:
            raise feed.error
        total, tail = middle + feed.written, feed.tail
        tail_start = total - len(tail)
        if tail_start == middle:
            first = 0
        else:
            first = tail.find(b"\n") + 1
            if first == 0:  # no line starts in the tail: grep's lines are all there is
                first = len(tail)
        for at, line in held:
            if at < tail_start + first:
                yield at, line.decode("utf-8", "replace")
        yield from _lines_at(tail[first:], tail_start + first) if first < len(tail) else ()
    finally:
        if process.poll() is None:
            process.kill()
        process.stdout.close()
        process.wait()
        if writer.is_alive():  # a reader that stopped early: the writer's next write meets the closed pipe
            writer.join(timeout=1.0)


def _chain(first: bytes, rest: Iterator[bytes]) -> Iterator[bytes]:
    yield first
    yield from rest


def chain_all(first: list[bytes], rest: Iterator[bytes]) -> Iterator[bytes]:
    while first:
        yield first.pop(0)
    yield from rest
