"""What the check tests share: the processes of a run as /proc shows them (read here, not through checks.run, so
cleanup is checked by other code than its own), and waiting for a rank's event in its progress file."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

WAIT_S = 120.0  # a generous bound: torch imports on 2 shared cores


def processes_holding(marker: str) -> list[tuple[int, str]]:
    """(pid, command line) of every live process (zombies are ended) whose command line or environment holds
    ``marker`` (a run id, a progress folder)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_bytes()
            if stat[stat.rfind(b")") + 2:][:1] == b"Z":
                continue
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            environ = Path(f"/proc/{entry}/environ").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmdline or marker.encode() in environ:
            found.append((int(entry), cmdline.replace(b"\0", b" ").decode(errors="replace")))
    return found


def events(folder: Path, rank: int) -> list[dict[str, Any]]:
    path = folder / f"rank-{rank}.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def wait_for(condition: Callable[[], Any], what: str, timeout_s: float = WAIT_S) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")
