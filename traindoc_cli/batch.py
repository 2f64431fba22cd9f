"""`ask --batch FILE`: one question per JSON line, answered in order, one JSON line out per line in.

A line that cannot be a question (not UTF-8, not JSON, nested too deep, a number too long for Python's int, no
"id" or "query", longer than the line cap) is one line on stderr with its number (``ask: FILE:N: skipped: ...``)
and an ``{"id", "line", "error"}`` row on stdout; the other lines are still answered, and the run exits 1 at the
end. A line that fails while being answered is reported the same way; a failure of the index or the setup,
which every line would hit, stops the run.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from common.errors import ConfigError, IndexStoreError, TraindocError, UsageError
from common.surrogates import escape_surrogates, notice
from common.textsafe import printable

log = logging.getLogger("traindoc")

MAX_LINE_BYTES = 1 << 20  # a question is a few KB; a pasted log in a query is still well under this


class _BadLine(ValueError):
    def __init__(self, message: str, echo: Any = None) -> None:
        super().__init__(message)
        self.echo = echo  # the line's id when it has one, so that the row can be matched to its case


def _lines(handle: IO[bytes]) -> Iterator[tuple[int, bytes | None]]:
    """(number, bytes) per line; None for a line longer than the cap, whose rest is skipped without keeping it."""
    number = 0
    while True:
        line = handle.readline(MAX_LINE_BYTES + 1)
        if not line:
            return
        number += 1
        if len(line) > MAX_LINE_BYTES and not line.endswith(b"\n"):
            while (rest := handle.readline(MAX_LINE_BYTES)) and not rest.endswith(b"\n"):
                pass
            yield number, None
            continue
        yield number, line


def _case(raw: bytes | None) -> dict[str, Any]:
    if raw is None:
        raise _BadLine(f"longer than {MAX_LINE_BYTES >> 20} MB")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise _BadLine(f"not valid UTF-8 (byte {exc.start + 1} of the line)") from exc
    try:
        case = json.loads(text)
    except json.JSONDecodeError as exc:
        raise _BadLine(f"not JSON ({exc.msg} at column {exc.colno})") from exc
    except RecursionError as exc:
        raise _BadLine("JSON nested too deeply") from exc
    except ValueError as exc:  # Python refuses an integer of more than 4300 digits
        raise _BadLine(f"not a usable JSON line ({str(exc).split(';')[0]})") from exc
    if not isinstance(case, dict) or "id" not in case:
        raise _BadLine('needs "id" and a non-empty "query"')
    query = case.get("query")
    if not isinstance(query, str) or not query.strip():
        echo = case["id"] if isinstance(case["id"], (str, int)) else None
        raise _BadLine('needs "id" and a non-empty "query" (a string)', echo)
    return case


def _text(value: Any) -> tuple[str, int]:
    return escape_surrogates(str(value))


def run_batch(args: argparse.Namespace, troubleshooter_for: Callable[[argparse.Namespace], Any]) -> int:
    from agent.intake import Received, intake
    from traindoc_cli.quiet import one_line

    path: Path = args.batch
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise UsageError(f"cannot read batch file {path}: {exc.strerror or exc}") from exc
    troubleshooter = troubleshooter_for(args)
    failures = 0

    def failed(number: int, what: str, error: str, echo: Any = None) -> None:
        nonlocal failures
        failures += 1
        print(one_line(f"ask: {path}:{number}: {what}: {error}"), file=sys.stderr, flush=True)
        print(json.dumps({"id": echo, "line": number, "error": error}), flush=True)

    with handle:
        for number, raw in _lines(handle):
            if raw is not None and not raw.strip():
                continue
            try:
                case = _case(raw)
            except _BadLine as exc:
                failed(number, "skipped", str(exc), exc.echo)
                continue
            query, escaped = _text(case["query"])
            case_id, id_escaped = _text(case["id"])
            if escaped or id_escaped:
                print(f"ask: {path}:{number}: note: {notice(escaped + id_escaped, 'the line')}", file=sys.stderr)
            try:  # through the one intake, as every front end: an empty question is this line's error
                answer = troubleshooter.ask(intake(Received(text=query, id=case_id, probes=not args.no_probes)))
            except (IndexStoreError, ConfigError):
                raise  # every line would fail the same way: one line for the run, not one per case
            except TraindocError as exc:  # this line's input: its one line, no exception class
                failed(number, "skipped", exc.message, case_id)
                continue
            except Exception as exc:  # this line's failure; the others are still answered
                if args.debug:
                    log.exception("line %d failed", number)
                failed(number, "failed", f"{type(exc).__name__}: {exc}", case_id)
                continue
            payload = answer.to_json() if args.json else {"id": answer.id, "answer": printable(answer.answer)}
            print(json.dumps(payload, ensure_ascii=False), flush=True)
            if args.debug:
                print(f"ask: {number} answered", file=sys.stderr)
    return 1 if failures else 0
