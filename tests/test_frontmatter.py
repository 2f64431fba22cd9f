"""Front matter: machine-readable facts before a Markdown document's text, never part of it, never a reason to
refuse a document, parsed only when short."""

from __future__ import annotations

from corpus.frontmatter import MAX_FRONT_MATTER, split_front_matter


def test_front_matter_is_split_from_the_text():
    meta, body = split_front_matter("---\nkind: x\nlang: en\n---\n# Title\n\ntext\n")
    assert meta == {"kind": "x", "lang": "en"} and body == "# Title\n\ntext\n"


def test_what_is_not_a_mapping_or_not_yaml_stays_text():
    for text in ("---\n- a list\n---\n# T\n", "---\nkey: [unclosed\n---\n# T\n", "# no front matter\n---\n"):
        assert split_front_matter(text) == ({}, text)


def test_a_long_opening_block_is_never_parsed():
    text = "---\n" + "key: value\n" * (MAX_FRONT_MATTER // 10) + "---\n# T\n"
    assert split_front_matter(text) == ({}, text)
