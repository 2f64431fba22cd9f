"""A section reviewed again is the same review, from the cache: the same text, flags and notes, and a different
question or torch version is reviewed on its own."""

from __future__ import annotations

from advice.review import review

SECTION = "NCCL > hang"
TEXT = "Try this:\n\n```bash\nexport NCCL_SOCKET_IFNAME=lo\nexport NCCL_IB_DISABLE=1\n```\n"


def test_a_section_reviewed_twice_is_the_same_frozen_review() -> None:
    first = review(TEXT, "corpus/002_8a84ca4f82c44780.txt", SECTION, "en")
    again = review(TEXT, "corpus/002_8a84ca4f82c44780.txt", SECTION, "en")
    assert again is first  # from the cache
    assert first.flags and isinstance(first.flags, tuple) and isinstance(first.notes, tuple)


def test_another_language_or_torch_is_reviewed_on_its_own() -> None:
    english = review(TEXT, "corpus/002_8a84ca4f82c44780.txt", SECTION, "en")
    chinese = review(TEXT, "corpus/002_8a84ca4f82c44780.txt", SECTION, "zh")
    assert chinese is not english and chinese.text != english.text
    older = review(TEXT, "corpus/002_8a84ca4f82c44780.txt", SECTION, "en", torch_version="1.13.1")
    assert older is not english
