"""Answers people finish (issue 38 point 3): the default `ask` answer of a pasted error or a log fits 40 rows at 80
columns (the verdict, why, the fixes with their commands, what not to do, the sources by title, the summary);
`--full` has the rest (checks, applies-to, the documents' notes), `--json` both; nothing is cut mid-word or
mid-number; no hash-named file anywhere; the weak-match line in both languages."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from clikit import ROOT
from rich.cells import cell_len

GPU_REAL = ROOT / "tests" / "jobs" / "data" / "gpu-real"
HASH_NAME = re.compile(r"\b\d{3}_[0-9a-f]{16}\.txt\b")
PASTED = [
    "torch.distributed.DistBackendError: [Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, "
    "OpType=ALLREDUCE, NumelIn=1, Timeout(ms)=600000) ran for 600012 milliseconds before timing out",
    "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1191, unhandled system error, NCCL version 2.18.1",
    "训练时报错 torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB，怎么解决？",
    "RuntimeError: CUDA error: no kernel image is available for execution on the device",
]
LOGS = [GPU_REAL / "oom_crash" / "console.log", GPU_REAL / "straggler_gloo_timeout" / "console.log"]
ENV = {"COLUMNS": "80", "LINES": "24"}


def rows(text: str, width: int = 80) -> int:
    """Terminal rows: each line wrapped at ``width`` cells (CJK two)."""
    return sum(max(1, -(-cell_len(line) // width)) for line in text.splitlines())


def cut_words(brief: str, full: str) -> list[str]:
    """Words the brief clipped ("…") that the full answer continues: cut mid-word or mid-number."""
    plain = " ".join(full.split())
    cut = []
    for before in re.findall(r"(?<![A-Za-z0-9_.])([A-Za-z0-9_.]+)…", brief):  # a Latin word or a number
        if before and re.search(re.escape(before) + r"\w", plain) and not re.search(re.escape(before) + r"(?!\w)", plain):
            cut.append(before)
    return cut


@pytest.mark.parametrize("argv", [[text] for text in PASTED] + [["--log", str(path)] for path in LOGS],
                         ids=[f"pasted-{i}" for i in range(len(PASTED))] + [p.parent.name for p in LOGS])
def test_the_default_answer_fits_40_rows_and_full_keeps_the_rest(argv: list[str], cli, use_shared_index: Path) -> None:
    brief = cli("ask", "--no-probes", "--format", "text", *argv, env=ENV)
    full = cli("ask", "--no-probes", "--format", "text", "--full", *argv, env=ENV)
    assert brief.returncode == 0 and full.returncode == 0, brief.stderr + full.stderr
    assert rows(brief.stdout) <= 40, brief.stdout
    last = brief.stdout.strip().splitlines()[-2:]
    assert any(line.startswith(("Summary:", "结论：")) for line in last), last  # the summary ends it
    assert all(cell_len(line) <= 80 or "fix" in line or "修复" in line for line in last), last  # never wrapped mid-word
    assert rows(full.stdout) >= rows(brief.stdout)
    if rows(full.stdout) > 40:  # shortened: the rest is one flag away, and said so
        assert "--full" in brief.stdout
        assert re.search(r"Checks that confirm it|验证|Fixes|修复", full.stdout)
    assert not cut_words(brief.stdout, full.stdout), cut_words(brief.stdout, full.stdout)
    assert not HASH_NAME.search(brief.stdout + full.stdout)


def test_json_carries_the_whole_answer_and_the_brief_one(cli, use_shared_index: Path) -> None:
    result = cli("ask", "--json", "--no-probes", "--log", str(LOGS[0]))
    answer = json.loads(result.stdout)
    assert answer["language"] == "en"
    assert "Checks that confirm it" in answer["answer"] and "Checks that confirm it" not in answer["brief"]
    assert len(answer["brief"]) < len(answer["answer"])
    chinese = json.loads(cli("ask", "--json", "--no-probes", PASTED[2]).stdout)
    assert chinese["language"] == "zh"


def test_a_clipped_sentence_before_the_more_follows_mark_shows_one_ellipsis(cli, use_shared_index: Path) -> None:
    done = cli("ask", "--no-probes", "多卡训练卡死了，数据里有一些图片没有目标", env=ENV)
    assert done.returncode == 0 and "首先尝试" in done.stdout
    first_fix = next(line for line in done.stdout.splitlines() if "首先尝试" in line)
    assert first_fix.endswith("…") and not re.search(r"…\s*…", first_fix), first_fix
