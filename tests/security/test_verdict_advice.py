"""A team runbook's made-up variable is flagged wherever an answer shows its command (issue 40, point 6): the Fixes
block has advice.review's note under it, and the verdict's First fix and the one-line Summary carry the same flag,
never the command bare. The section goes through the real review; the verdict is read from the answer it makes."""

from __future__ import annotations

import pytest

from advice.review import NOTE_PREFIX, review
from agent.answer import Answer, Citation
from agent.summary import summary_line, verdict_markdown, verdict_of
from common.language import say

FIXES = ("1. Flush the ring before restarting:\n\n```bash\nexport NCCL_GHOST_RING_FLUSH=1\n"
         "torchrun --nproc_per_node=8 train.py\n```\n")


def _answer(lang: str) -> Answer:
    reviewed = review(FIXES, "/srv/team/runbooks/nccl.md", "NCCL hangs > Fixes", lang)  # type: ignore[arg-type]
    assert any(f.id == "NCCL_GHOST_RING_FLUSH" for f in reviewed.flags)
    markdown = f"### {say('fixes', lang)}\n{reviewed.text}\n"
    return Answer(question="NCCL watchdog timeout", answer=markdown, no_match=False, lang=lang,  # type: ignore[arg-type]
                  citations=[Citation(1, "/srv/team/runbooks/nccl.md", "NCCL hangs > Fixes", "c1", 0.9, text=FIXES)],
                  findings=[])


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_first_fix_and_the_summary_flag_what_the_fixes_block_flags(lang: str) -> None:
    answer = _answer(lang)
    verdict = verdict_of(answer)
    assert verdict is not None and "NCCL_GHOST_RING_FLUSH" in verdict.fix_code
    block = verdict_markdown(verdict, answer.lang)
    after_code = block.split("```")[-1]
    assert NOTE_PREFIX in after_code and "NCCL_GHOST_RING_FLUSH" in after_code
    line = summary_line(verdict, answer.lang, 200)
    assert "NCCL_GHOST_RING_FLUSH" in line and say("advice.fix_flagged", answer.lang) in line


def test_an_unflagged_first_fix_carries_no_flag() -> None:
    fixes = "1. Raise the timeout:\n\n```bash\nexport NCCL_TIMEOUT=1800\n```\n"
    markdown = f"### {say('fixes', 'en')}\n{review(fixes, 'corpus/x.md', 'NCCL > Fixes', 'en').text}\n"
    answer = Answer(question="NCCL watchdog timeout", answer=markdown, no_match=False, lang="en",
                    citations=[Citation(1, "corpus/x.md", "NCCL > Fixes", "c1", 0.9, text=fixes)], findings=[])
    verdict = verdict_of(answer)
    assert verdict is not None and verdict.fix_notes == ()
    assert NOTE_PREFIX not in verdict_markdown(verdict, "en") and "⚠" not in summary_line(verdict, "en", 200)
