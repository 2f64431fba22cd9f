"""One line of a job's log, with what its prefixes say: which rank, which host, when.

Real jobs stack prefixes: torchrun's tee (`[default1]:`), then c10's global rank (`[rank1]:`), then a
glog header (`[E1123 02:40:15.763 ProcessGroupNCCL.cpp:689]`); srun -l puts `3: ` first, DeepSpeed's
pdsh launcher `worker-1: `, mpirun's --tag-output (DeepSpeed's MPI launcher) `[1,3]<stdout>:`, a rank-tagged
logger `[RANK 3] `; NCCL writes `host:pid:tid [dev] NCCL WARN`. They are peeled off one by one,
so the message that remains can be matched on its own. A JSON-lines record (structured logging) is read as its
message, with the rank, host and time its fields name.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[()][A-Za-z0-9]")
CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
MAX_LINE = 2000

# Each prefix, tried at the start of what is left; (kind, pattern).
TORCHRUN_TEE = re.compile(r"\[(?P<role>[A-Za-z_][\w-]*?)?(?P<n>\d+)\]:")  # [default1]: / [rank1]: / [1]:
SRUN_LABEL = re.compile(r"(?P<n>\d{1,5}): ")
MPI_TAG = re.compile(r"\[(?P<job>\d+),(?P<n>\d+)\]<(?:stdout|stderr|stddiag)>: ?")  # mpirun --tag-output
RANK_WORD = re.compile(r"\[RANK[ _:]?(?P<n>\d{1,5})\]:? ?")  # [RANK 3]; c10's own "[Rank 3] ..." is message
# A JSON-lines record: where its message and its rank are (the first field present wins).
JSON_MESSAGE = ("message", "msg", "text", "log", "line")
JSON_RANK = ("rank", "global_rank", "RANK", "process_index", "proc_id")
JSON_LOCAL_RANK = ("local_rank", "LOCAL_RANK", "local_process_index")
JSON_HOST = ("host", "hostname", "node")
JSON_TIME = ("time", "timestamp", "asctime", "ts", "@timestamp")
# pdsh prefixes every line, a traceback's indented frames and blank lines too ("worker-1:   File ...", "worker-1: ")
HOST_LABEL = re.compile(r"(?P<host>localhost|[a-z0-9](?=[a-z0-9.-]*[\d-])[a-z0-9.-]*[a-z0-9]): (?:(?=\s*\S)|\s*$)")
RAY_LABEL = re.compile(r"\((?:\w+) pid=\d+(?:, ip=[\d.]+)?\) ")
# NCCL's WARN lines may carry the source file first: "host:97:183 [0] include/shm.h:48 NCCL WARN ..."
NCCL_HEADER = re.compile(r"(?P<host>[\w.-]+):(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>\d+)\] (?:[\w./-]+:\d+ )?(?=NCCL )")

GLOG = re.compile(  # I1122 15:31:15.535000 12792 file.py:1002] / [E1123 02:40:15.763257978 File.cpp:689]
    r"\[?(?P<level>[IWEF])(?P<month>\d\d)(?P<day>\d\d) (?P<time>\d\d:\d\d:\d\d(?:\.\d+)?)(?: +\d+)? [^\]\s]+\] ?"
)
ISO = re.compile(  # 2026-11-23 02:40:00,900 / [2026-11-23 02:40:00,900] / 2026-11-23T02:40:00.9Z
    r"\[?(?P<date>\d{4}-\d\d-\d\d)[ T_](?P<time>\d\d:\d\d:\d\d(?:[.,]\d+)?)(?:Z|[+-]\d\d:?\d\d)?\]?"
)
US_DATE = re.compile(r"(?P<month>\d\d)/(?P<day>\d\d)/(?P<year>\d{4}) (?P<time>\d\d:\d\d:\d\d)")  # transformers
SUMMARY_TIME = re.compile(r"time\s*:\s*(?P<date>\d{4}-\d\d-\d\d)_(?P<time>\d\d:\d\d:\d\d)")  # ChildFailedError


@dataclass(frozen=True)
class LogLine:
    source: str  # the file (or "standard input") it came from
    number: int  # 1-based line number in that source
    text: str  # the message with every prefix removed
    rank: int | None = None  # global rank, when a prefix or the file's place says it
    local_rank: int | None = None
    host: str | None = None
    pid: int | None = None
    time: datetime | None = None


def clean(raw: str) -> str:
    """Printable text: colours and NULs dropped, a carriage-return progress bar reduced to its last state."""
    line = raw.rstrip("\r\n").removeprefix("\ufeff")  # a byte-order mark opens the first line of some files
    if "\x1b" in line:
        line = ANSI.sub("", line)
    if "\r" in line:
        parts = [p for p in line.split("\r") if p.strip()]
        line = parts[-1] if parts else ""
    if CONTROL.search(line):
        line = CONTROL.sub("", line)
    return line[:MAX_LINE]


def _time(hms: str, year: int, month: int, day: int) -> datetime | None:
    hms = hms.replace(",", ".")
    whole, _, fraction = hms.partition(".")
    try:
        h, m, s = (int(x) for x in whole.split(":"))
        micro = int((fraction + "000000")[:6]) if fraction else 0
        return datetime(year, month, day, h, m, s, micro)
    except ValueError:
        return None


def parse_time(text: str, year: int) -> tuple[datetime | None, str]:
    """(the time a line starts with, the line without it). glog headers carry no year: ``year`` fills it."""
    if match := GLOG.match(text):
        when = _time(match["time"], year, int(match["month"]), int(match["day"]))
        return when, text[match.end():]
    if match := ISO.match(text):
        y, mo, d = (int(x) for x in match["date"].split("-"))
        return _time(match["time"], y, mo, d), text[match.end():].lstrip(" -|:")
    if match := US_DATE.match(text):
        when = _time(match["time"], int(match["year"]), int(match["month"]), int(match["day"]))
        return when, text[match.end():].lstrip(" -|:")
    return None, text


def parse_line(raw: str, source: str, number: int, *, rank: int | None = None, local_rank: int | None = None,
               host: str | None = None, year: int = 1970) -> LogLine:
    """Peel the prefixes off ``raw``. ``rank``/``local_rank``/``host`` are what the file's place says."""
    text = clean(raw)
    pid = None
    when = None
    if (record := _json_record(text)) is not None:
        text, rank, local_rank, host, when = _from_record(record, rank, local_rank, host, year)
    for _ in range(6):  # prefixes nest a few deep at most
        stripped = text.lstrip()
        if match := MPI_TAG.match(stripped) or RANK_WORD.match(stripped):
            rank = int(match["n"])
            text = stripped[match.end():]
            continue
        if match := TORCHRUN_TEE.match(stripped):
            role, n = match["role"] or "", int(match["n"])
            if role.lower() == "rank" or not role:
                rank = n
            else:
                local_rank = n
            text = stripped[match.end():]
            text = text[1:] if text.startswith(" ") else text  # "[rank3]: Traceback": one space is the separator
            continue
        if match := NCCL_HEADER.match(stripped):
            host, pid = host or match["host"], int(match["pid"])
            text = stripped[match.end():]
            continue
        if when is None and stripped[:1] in "[IWEF0123456789" and (parsed := parse_time(stripped, year))[0]:
            when, text = parsed
            continue
        if rank is None and (match := SRUN_LABEL.match(stripped)):
            rank = int(match["n"])
            text = stripped[match.end():]
            continue
        if host is None and (match := HOST_LABEL.match(stripped)) and not match["host"].endswith(".py"):
            host = match["host"]
            text = stripped[match.end():]
            continue
        if match := RAY_LABEL.match(stripped):
            text = stripped[match.end():]
            continue
        break
    return LogLine(source, number, text.rstrip(), rank, local_rank, host, pid, when)


def _json_record(text: str) -> dict[str, Any] | None:
    """The line as a JSON object with a message field, else None (most lines: one look at the first character)."""
    stripped = text.strip()
    if not (stripped.startswith("{") and stripped.endswith("}")):
        return None
    try:
        record = json.loads(stripped)
    except ValueError:
        return None
    if not isinstance(record, dict) or not any(isinstance(record.get(k), str) for k in JSON_MESSAGE):
        return None
    return record


def _field(record: dict[str, Any], names: tuple[str, ...]) -> Any:
    return next((record[name] for name in names if record.get(name) not in (None, "")), None)


def _number(value: Any) -> int | None:
    return int(value) if isinstance(value, int | str) and str(value).strip().isdigit() else None


def _from_record(record: dict[str, Any], rank: int | None, local_rank: int | None, host: str | None,
                 year: int) -> tuple[str, int | None, int | None, str | None, datetime | None]:
    """(message, rank, local rank, host, time) of a JSON-lines record; what the file's place said stands where
    the record is silent."""
    message = str(_field(record, JSON_MESSAGE))
    found_rank = _number(_field(record, JSON_RANK))
    found_local = _number(_field(record, JSON_LOCAL_RANK))
    found_host = _field(record, JSON_HOST)
    stamp = _field(record, JSON_TIME)
    when = parse_time(stamp, year)[0] if isinstance(stamp, str) else None
    return (message, found_rank if found_rank is not None else rank, found_local if found_local is not None else local_rank,
            str(found_host) if isinstance(found_host, str) else host, when)


def summary_time(text: str) -> datetime | None:
    """The `time : 2026-11-23_02:41:21` field of torchrun's failure summary."""
    if match := SUMMARY_TIME.search(text):
        y, mo, d = (int(x) for x in match["date"].split("-"))
        return _time(match["time"], y, mo, d)
    return None
