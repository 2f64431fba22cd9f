"""One phrase book: every sentence traindoc says is a key with each language beside it. A key that lacks a
language, or that two files hold, fails when the book is read; a field one language leaves out is grammar the
other needs."""

from __future__ import annotations

import string

import pytest

from common.language import LANGS, merge_books, phrase_books, say

# Fields a language may leave out: English verb agreement (was/were, has/have, is/are, wait/waits), the space
# Chinese sets before a Latin word, and a line's meaning, which the Chinese cause line does not add.
ONE_LANGUAGE_FIELDS = {"was", "have", "are", "wait", "gap", "meaning"}


def _fields(text: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(text) if name}


def test_every_phrase_has_every_language_and_one_home() -> None:
    books = phrase_books()
    assert [name for name, _ in books][0] == "phrases.json" and len(books) > 1
    for name, book in books:
        lacking = {key: sorted(set(LANGS) - set(said)) for key, said in book.items() if set(said) != set(LANGS)}
        assert not lacking, f"{name}: phrases without every language: {lacking}"
    tables = merge_books(books)
    assert sum(len(book) for _, book in books) == len(tables["en"]) == len(tables["zh"])


def test_a_phrase_that_lacks_a_language_fails() -> None:
    with pytest.raises(ValueError, match=r"phrases/x\.json: phrase 'x\.lonely' needs a text in each of en, zh"):
        merge_books([("phrases/x.json", {"x.lonely": {"en": "alone"}})])
    with pytest.raises(ValueError, match="needs a text in each of"):
        merge_books([("phrases/x.json", {"x.number": {"en": "one", "zh": 1}})])


def test_a_phrase_in_two_files_fails() -> None:
    said = {"en": "twice", "zh": "两次"}
    with pytest.raises(ValueError, match=r"phrases/b\.json: phrase 'x\.twice' is also in common/data/phrases/a\.json"):
        merge_books([("phrases/a.json", {"x.twice": said}), ("phrases/b.json", {"x.twice": said})])


def test_the_languages_of_a_phrase_take_the_same_fields_but_for_grammar() -> None:
    for name, book in phrase_books()[1:]:  # phrases.json: tests/test_language.py
        for key, said in book.items():
            fields = {lang: _fields(text) for lang, text in said.items()}
            odd = fields["en"] ^ fields["zh"]
            assert odd <= ONE_LANGUAGE_FIELDS, f"{name}: {key}: {fields}"


def test_a_phrase_is_said_with_its_fields() -> None:
    assert say("jobs.ranks", "en", ranks="0 and 2") == "ranks 0 and 2"
    assert say("jobs.ranks", "zh", ranks="0 和 2") == "rank 0 和 2"
