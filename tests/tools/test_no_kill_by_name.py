"""traindoc stops nothing and never tells anyone to stop processes by name or pattern: on a shared node that kills
other users' jobs and, for a hang, the evidence. Advice names one PID and SIGTERM (`kill -TERM <pid>`)."""

import re
from pathlib import Path

import pytest

TOOLS = Path(__file__).resolve().parents[2] / "tools"
BY_NAME = re.compile(r"\bpkill\b|\bkillall\b|\bkill\s+-(9|KILL|SIGKILL)\b|xargs\s+kill|fuser\s+-k", re.I)


@pytest.mark.parametrize("path", sorted(p for p in TOOLS.rglob("*") if p.is_file() and p.suffix in (".py", ".json", ".md", ".txt")),
                         ids=lambda p: str(p.relative_to(TOOLS)))
def test_no_kill_by_name_or_sigkill_advice(path: Path) -> None:
    hits = [f"{n}: {line.strip()}" for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
            if BY_NAME.search(line)]
    assert not hits, hits


def test_stop_advice_is_one_pid_and_sigterm() -> None:
    advice = [line for p in TOOLS.glob("*.py") for line in p.read_text(encoding="utf-8").splitlines() if "`kill " in line]
    assert advice and all("`kill -TERM " in line for line in advice), advice
