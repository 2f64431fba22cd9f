"""common.secrets.mask remembers the short texts it masked lately (an answer's JSON repeats the documents' strings
from one answer to the next): the result is the scan's own, the memory stays within its budget, and a long text is
never kept."""

from __future__ import annotations

from common.secrets import MASK, _masked, _Remembered, mask, scan

TOKEN = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"


def test_a_remembered_text_masks_as_the_scan_does_every_time():
    texts = [f"export HF_TOKEN={TOKEN}", f"see {TOKEN} here", "no secret at all", "", "密码：hunter2hunter2"]
    for text in texts * 3:  # the second and third time come from memory
        assert mask(text) == scan(text, _masked)
    assert TOKEN not in mask(texts[0]) and MASK in mask(texts[0])


def test_the_memory_keeps_within_its_budget_dropping_the_least_recent_first():
    remembered = _Remembered(longest=100, budget=400)
    for i in range(50):
        assert remembered.get(f"line {i} with {TOKEN}") == scan(f"line {i} with {TOKEN}", _masked)
    kept = remembered._kept
    assert sum(len(k) + len(v) for k, v in kept.items()) <= 400
    assert remembered._size == sum(len(k) + len(v) for k, v in kept.items())
    assert f"line 49 with {TOKEN}" in kept and f"line 0 with {TOKEN}" not in kept


def test_a_text_past_the_longest_is_scanned_and_not_kept():
    from common import secrets

    long_text = ("x" * 9000) + f" {TOKEN}"
    assert len(long_text) > secrets._REMEMBERED.longest
    assert TOKEN not in mask(long_text)
    assert long_text not in secrets._REMEMBERED._kept
