"""common.textsafe.cells: the terminal columns of a text (CJK, hangul and full-width forms two, others one), with
ASCII counted by its length."""

from __future__ import annotations

import pytest

from common.textsafe import cells


@pytest.mark.parametrize(("text", "columns"), [
    ("", 0),
    ("NCCL timeout", 12),
    ("显存不足", 8),
    ("CUDA 显存不足 (OOM)", 19),
    ("한국어", 6),
    ("ＡＢＣ１", 8),  # full-width forms
    ("⺀ and 鿿", 9),  # the ends of the CJK range
    ("é ü ß → ✓", 9),  # Latin letters and symbols outside the wide ranges: one each
    ("\u2e7f\ua000\uffff", 3),  # just outside the ranges
])
def test_columns_follow_the_wide_ranges(text, columns):
    assert cells(text) == columns
