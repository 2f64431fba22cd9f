"""Stacks a user recorded and hands over as a log (`ask --log dump.txt`): py-spy's text dumps (`py-spy dump
--pid N [--native]`, one process after another) and faulthandler's (`faulthandler.dump_traceback`, `kill -USR1`
with `faulthandler.register`). They are read as `traindoc hang` reads live stacks (``jobs.stacks``): where each
process waits, which one is elsewhere, and what one stack alone cannot tell (a rank in a CUDA sync)."""

from __future__ import annotations

import re

from jobs.diagnosis import JobDiagnosis
from jobs.places import RankStack
from jobs.pyspy import main_thread, parse_text
from jobs.stacks import analyse_stacks

MAX_CHARS = 4 * 1024 * 1024  # a dump of 64 ranks is a few hundred KB
# py-spy's "Process 767: /usr/bin/python -u train.py", faulthandler's "Thread 0x... (most recent call first):"
DUMP_HEAD = re.compile(r"^(?:Process \d+: |Thread 0x[0-9a-fA-F]+ \(most recent call first\):|Current thread 0x)")


def looks_like_dump(lines: list[str]) -> bool:
    """The opening lines of a recorded stack dump (not a log that quotes one line of it)."""
    return sum(1 for line in lines[:40] if DUMP_HEAD.match(line)) >= 1 and any(
        line.startswith(("Thread ", "Current thread ")) for line in lines[:80])


def diagnosis_from_dump(text: str) -> JobDiagnosis | None:
    """Each recorded process's main-thread stack, in the dump's order (py-spy does not record RANK: the order of
    the dump is taken for the ranks', and the answer names each by its pid as well)."""
    processes = parse_text(text[:MAX_CHARS])
    stacks = []
    for index, (pid, threads) in enumerate(processes.items()):
        thread = main_thread(threads)
        if thread is not None and thread.frames:
            stacks.append(RankStack(index, thread.frames, pid))
    if not stacks:
        return None
    native = any(frame.line == 0 for stack in stacks for frame in stack.frames)
    return analyse_stacks(stacks, source="recorded stacks (py-spy or faulthandler)", native=native).diagnosis
