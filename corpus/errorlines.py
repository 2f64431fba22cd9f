"""Pull the error lines out of a pasted log or a document's code blocks.

A pasted log is long and noisy (progress bars, warnings, config dumps); what identifies the failure
is a handful of lines: a traceback's last line, NCCL/CUDA error lines, OOM and watchdog messages.
The same extractor runs over the documents' code blocks, so the two sides can be matched.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

ERROR_LINE = re.compile(
    r"(?:\b[A-Z][A-Za-z]*(?:Error|Exception|Interrupt)\b"  # RuntimeError, DistBackendError ...
    r"|\bNCCL (?:WARN|ERROR|error)\b|\bnccl[A-Z][A-Za-z]+Error\b"
    r"|\bCUDA (?:error|out of memory|failure)|\bCUBLAS_STATUS_\w+|\bcuda\w*Error\w*"
    r"|out of memory|\bOOM\b|Watchdog caught|timed? ?out|Timeout|Address already in use"
    r"|not compatible with|no kernel image|Segmentation fault|core dumped|Killed\b|SIGKILL|SIGSEGV"
    r"|\bERROR\b|\bFATAL\b|\berror:|\bfailed\b|\bFailed\b|unrecognized arguments|is not supported"
    r"|报错|错误|失败|卡住|超时)"
)
# Every ERROR_LINE branch needs one of these literals. Python's re tries each alternative at every
# position (~0.7 us a character), far too slow for a multi-GB log; a substring test rules out
# almost every noise line first.
ERROR_LITERALS = (
    "Error", "Exception", "Interrupt", "NCCL ", "CUDA ", "CUBLAS_STATUS_", "out of memory", "OOM",
    "Watchdog caught", "time", "Timeout", "Address already in use", "not compatible with", "no kernel image",
    "Segmentation fault", "core dumped", "Killed", "SIGKILL", "SIGSEGV", "ERROR", "FATAL", "error:", "failed",
    "Failed", "unrecognized arguments", "is not supported", "报错", "错误", "失败", "卡住", "超时",
)
ERROR_PREFILTER = re.compile("|".join(map(re.escape, ERROR_LITERALS)))
TRACEBACK_START = re.compile(r"^\s*Traceback \(most recent call last\)")
FRAME_LINE = re.compile(r'^\s*(File "|at |\^+$|~+$)')
TIMESTAMP = re.compile(r"^\s*(\[?\d{4}[-/]\d\d[-/]\d\d[ T][\d:.,]+\]?|\[?\d\d/\d\d \d\d:\d\d:\d\d\]?)\s*")
RANK_PREFIX = re.compile(r"^\s*(\[(?:rank|Rank|RANK)?\s*\d+\]:?|\(\w+ pid=\d+(?:, ip=[\d.]+)?\)|[\w.-]+:\d+:\d+ )\s*")
VOLATILE = re.compile(r"0x[0-9a-fA-F]+|\b\d{3,}\b")
MAX_LINE = 400
READ_CHARS = MAX_LINE * 4  # what of a line any pattern here reads: a megabyte "line" costs what 1,600 characters do
# A question longer than this is a pasted log: it is read as one (jobs.reader, which bounds every line), its
# opening words asked, never dropped (split_long_question).
QUESTION_CAP = 16 * 1024
OPENING_CHARS = 2000


# A failure word the line denies ("也没有报错", "没有错误", "不报错", "no errors"): a hang report's prose says there was
# no error; that is no error line. Read only on a line ERROR_LINE matched (rare), so a long log costs nothing more.
NEGATED = re.compile(r"(?:没有?|无|不|未|并没有?)(?:任何|什么|出现|看到|显示)?(?:报错|错误|失败)(?:信息|提示|输出)?"
                     r"|(?i:\b(?:no|without(?: any)?|zero) (?:errors?|failures?)\b)")


def is_error_line(line: str) -> bool:
    line = line[:READ_CHARS]
    if ERROR_PREFILTER.search(line) is None or ERROR_LINE.search(line) is None:
        return False
    return NEGATED.search(line) is None or ERROR_LINE.search(NEGATED.sub(" ", line)) is not None


def normalise(line: str) -> str:
    """Strip timestamps, rank prefixes and volatile numbers so the same error matches across runs."""
    line = TIMESTAMP.sub("", line)
    line = RANK_PREFIX.sub("", line)
    return VOLATILE.sub("#", line).strip()[:MAX_LINE]


class ErrorLineCollector:
    """Streams lines and keeps the distinct error lines, in bounded memory.

    Tracebacks' last lines lead; of the other error lines the first ``keep`` (the root cause of a
    cascade is usually early) and the last ``keep`` (what finally killed the job) are kept.
    """

    def __init__(self, keep: int = 20, max_seen: int = 20000) -> None:
        self.keep = keep
        self.max_seen = max_seen
        self.tracebacks: list[str] = []
        self.first: list[str] = []
        self.last: list[str] = []
        self._seen: set[str] = set()
        self._in_traceback = False

    def _new(self, line: str) -> bool:
        key = normalise(line)
        if not key or key in self._seen:
            return False
        if len(self._seen) < self.max_seen:
            self._seen.add(key)
        return True

    def feed(self, raw: str) -> None:
        line = raw[: READ_CHARS + 64].rstrip()[:READ_CHARS]
        if TRACEBACK_START.match(line):
            self._in_traceback = True
            return
        if self._in_traceback:
            if FRAME_LINE.match(line) or line.startswith("    "):
                return
            self._in_traceback = False
            if self._new(line):
                self.tracebacks.append(line.strip()[:MAX_LINE])
                del self.tracebacks[: -self.keep]
            return
        if is_error_line(line) and self._new(line):
            entry = line.strip()[:MAX_LINE]
            if len(self.first) < self.keep:
                self.first.append(entry)
            else:
                self.last.append(entry)
                del self.last[: -self.keep]

    def result(self, limit: int = 40) -> list[str]:
        return list(dict.fromkeys(self.tracebacks + self.first + self.last))[:limit]


def error_lines(lines: Iterable[str], limit: int = 40) -> list[str]:
    """The distinct error lines of a log, most telling first (tracebacks' last lines lead)."""
    collector = ErrorLineCollector(keep=limit)
    for line in _lines(lines):
        collector.feed(line)
    return collector.result(limit)


PASTED = re.compile(  # what output looks like: an exception with its message, a log prefix, a traceback frame
    r"^\s*(?:\[[^\]]{1,40}\]:?\s*|\d{4}-\d\d-\d\d[ T]|\w+\.\w+:\d+|File \")|"
    r"\b[A-Z]\w*(?:Error|Exception)(?::|$)|\bNCCL (?:WARN|INFO)\b"
)
PROSE = re.compile(r"[\u4e00-\u9fff][，。？！、]|[？?]\s*$")


def pasted_first(lines: Iterable[str]) -> list[str]:
    """The error lines to quote back to a person: where some are pasted output, those, not the lines of their own
    prose that only mention a failure ("最后启动失败，日志停在：", "it failed, why?"). Retrieval keeps reading all
    of them: dropping the prose ones cost 2 of 126 real reports their right section (R@1 0.81 -> 0.79 on dev2)."""
    found = list(lines)
    pasted = [line for line in found if _pasted(line)]
    return pasted or found


def _pasted(line: str) -> bool:
    """Output, not the asker's prose (read from the line's first READ_CHARS)."""
    line = line[:READ_CHARS]
    return PASTED.search(line) is not None and PROSE.search(line) is None


def output_lines(lines: list[str]) -> set[int]:
    """The indexes of ``lines`` that are output, not the asker's words: pasted lines (``_pasted``), the lines of a
    fenced block, and a line between two output lines that does not read as prose (a library's own log line without
    a prefix, "Device does not support bfloat16. Set float16 forcefully", between timestamped ones). The first line
    written is the asker's (a report's title: "[Issue] 不支持BF16的显卡..." is no log prefix) unless it opens a fence."""
    out: set[int] = set()
    fenced = False
    first = next((i for i, line in enumerate(lines) if line.strip()), -1)
    for i, line in enumerate(lines):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            out.add(i)
        elif fenced or (i != first and _pasted(line)):
            out.add(i)
    written = [i for i, line in enumerate(lines) if line.strip()]
    for before, i, after in zip(written, written[1:], written[2:], strict=False):
        if i not in out and before in out and after in out and PROSE.search(lines[i][:READ_CHARS]) is None:
            out.add(i)
    return out


def split_long_question(text: str, cap: int = QUESTION_CAP) -> tuple[str, str] | None:
    """A question longer than ``cap`` is a pasted log, perhaps after a few words of the asker's: (those words, the
    whole text to read as a log through the job reader). None for a question within the cap.

    The words are the lines before the first line of output, at most ``OPENING_CHARS``; empty where the paste
    starts with the log (ask about the job's root cause then, as `ask --log` without a question does)."""
    if len(text) <= cap:
        return None
    words: list[str] = []
    for line in text[: OPENING_CHARS + 1].splitlines():
        if _pasted(line) or is_error_line(line) and not PROSE.search(line[:READ_CHARS]):
            break
        words.append(line)
    opening = "\n".join(words).strip()[:OPENING_CHARS]
    return opening, text


def _lines(lines: Iterable[str]) -> Iterator[str]:
    for item in lines:
        yield from item.splitlines() if "\n" in item else (item,)


def looks_like_log(text: str) -> bool:
    """A pasted log (several lines, some of them errors) rather than a typed question."""
    lines = [ln for ln in text.splitlines() if ln[:READ_CHARS].strip()]
    return len(lines) >= 2 and any(is_error_line(ln) for ln in lines)
