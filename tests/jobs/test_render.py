"""The diagnosis leads the answer; a fix that only raises a timeout never survives when a rank failed first."""

from __future__ import annotations

from jobs.diagnosis import JobDiagnosis, RootCause
from jobs.render import demote_timeout_fixes, diagnosis_markdown

BODY = """### Likely cause: NCCL timeout [1]

### Fixes
**1.** from [1] NCCL timeout:

```bash
# raise the timeout
export NCCL_TIMEOUT=1800
# see where it stops
export NCCL_DEBUG=INFO
```

**2.** from [2] init:

```python
dist.init_process_group("nccl", timeout=timedelta(seconds=3600))
```

### See also
- [2] init"""


def _job(category: str, rank: int | None) -> JobDiagnosis:
    return JobDiagnosis("log", RootCause(category, rank, f"rank {rank} raised KeyError: 'x`y'", evidence=["KeyError: 'x```y'"]))


def test_timeout_lines_leave_the_fixes_when_a_rank_failed_first() -> None:
    out = demote_timeout_fixes(BODY, _job("exception", 2))
    fixes = out[out.index("### Fixes"):out.index("### See also")]
    assert "NCCL_TIMEOUT" not in fixes and "timedelta" not in fixes and "# raise the timeout" not in fixes
    assert "export NCCL_DEBUG=INFO" in fixes and "**1.**" in fixes and "**2.**" not in fixes
    assert "A longer timeout is left out" in fixes
    assert out.endswith("- [2] init")


def test_when_nothing_can_tell_the_fixes_stay() -> None:
    assert demote_timeout_fixes(BODY, _job("unknown", None)) == BODY


def test_evidence_with_backticks_cannot_close_its_fence() -> None:
    text = diagnosis_markdown(_job("exception", 2))
    assert "````text\nKeyError: 'x```y'\n````" in text
    assert text.index("Root cause") < text.index("KeyError")


def test_a_long_line_is_clipped_at_a_word_with_an_ellipsis() -> None:
    from jobs.diagnosis import clip

    line = "RuntimeError: Expected to have finished reduction in the prior iteration before starting a new one. " * 4
    clipped = clip(line, 120)
    assert len(clipped) <= 121 and clipped.endswith("…") and line.startswith(clipped[:-1])
    assert line[len(clipped) - 1] in " ,;:"  # what follows the kept text is a separator: no word was cut
    assert clip("short", 120) == "short"


OOM_BODY = """### Likely cause: OOM [1]

### Fixes
**1.** from [1] OOM:

```bash
--micro_train_batch_size 1
```

**2.** from [1] OOM:

```bash
# 开启 CPU 卸载
--adam_offload
```

### See also
- [2] memory"""


def test_cpu_offload_leaves_the_fixes_when_the_hosts_ram_ran_out() -> None:
    out = demote_timeout_fixes(OOM_BODY, _job("host_oom", 1))
    fixes = out[out.index("### Fixes"):out.index("### See also")]
    assert "--adam_offload" not in fixes and "开启 CPU 卸载" not in fixes and "**2.**" not in fixes
    assert "--micro_train_batch_size 1" in fixes and "CPU offload is left out" in fixes
    assert demote_timeout_fixes(OOM_BODY, _job("oom", 1)) == OOM_BODY  # a GPU's memory: offload is a fix


def test_when_ranks_timed_out_and_nothing_tells_why_a_longer_timeout_goes_last() -> None:
    from jobs.diagnosis import Symptom

    job = JobDiagnosis("log", RootCause("unknown", None, "rank 3 timed out"),
                       [Symptom("collective_timeout", [3], "rank 3 timed out waiting in a collective")])
    out = demote_timeout_fixes(BODY, job)
    fixes = out[out.index("### Fixes"):out.index("### See also")]
    first, rest = fixes.split("**2.**", 1)
    assert "NCCL_TIMEOUT" not in first and "export NCCL_DEBUG=INFO" in first
    assert rest.startswith(" last, and only once every rank's log") and "**3.**" not in rest  # block 2 was only that
    assert "export NCCL_TIMEOUT=1800" in rest and "timedelta(seconds=3600)" in rest  # moved, not dropped
    assert "```bash\n# raise the timeout\nexport NCCL_TIMEOUT=1800\n```" in rest and "```python\ndist.init" in rest
