"""The job's own numbers and names in the runbook's "In your job" line, read from real logs (an H100 OOM, an NCCL
duplicate-GPU failure): the allocation asked for against the GPU's size, the processes holding its memory."""

from __future__ import annotations

from pathlib import Path

from runbooks.quoted import quoted_facts, size_bytes

DATA = Path(__file__).resolve().parents[1] / "jobs" / "data"


def _lines(path: Path, needle: str) -> list[str]:
    return [line for line in path.read_text(encoding="utf-8", errors="replace").splitlines() if needle in line]


def test_an_oom_says_what_was_asked_for_and_who_holds_the_gpu() -> None:
    lines = _lines(DATA / "gpu-real" / "oom_crash" / "console.log", "CUDA out of memory")
    facts = quoted_facts(lines, "en")
    joined = "; ".join(facts)
    assert "asked for 149.01 GiB on GPU 0 (79.18 GiB in all, 73.15 GiB free)" in joined, facts
    assert "larger than the whole GPU" in joined, facts  # 149 GiB on a 79 GiB GPU: no allocator setting helps
    assert "PID 475 814.00 MiB" in joined and "PID 483 880.00 MiB" in joined, facts
    assert "this rank's process holds 978.00 MiB: 162.79 MiB in live tensors" in joined, facts
    assert joined.count("PID 475") == 1  # the same line on the console and in the rank's file: said once
    assert "在 GPU 0 上申请 149.01 GiB" in "; ".join(quoted_facts(lines, "zh"))


def test_an_allocation_that_fits_the_gpu_is_not_called_too_large() -> None:
    line = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
            "79.18 GiB of which 1.10 GiB is free. Process 12 has 78.00 GiB memory in use.")
    facts = quoted_facts([line], "en")
    assert any("asked for 2.00 GiB" in f for f in facts) and not any("larger than" in f for f in facts), facts
    assert size_bytes("1.5 GiB") == 1.5 * 2**30 and size_bytes("many GiB") is None


def test_lines_without_such_facts_give_none() -> None:
    assert quoted_facts(["RuntimeError: something else went wrong"], "en") == []
