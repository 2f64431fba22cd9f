"""The shipped runbooks: well-formed, sourced, paired across languages, and covering every kind the triage names."""

from __future__ import annotations

import json
from importlib import resources

import pytest

from jobs.diagnosis import CATEGORIES
from runbooks.catalog import all_problems, read_runbook, runbooks
from runbooks.choose import DIAGNOSED_ONLY, for_category, for_lines

CATCH_ALL = {"config", "exception", "cuda_error", "checkpoint"}  # several kinds: only a quoted message picks one


def test_every_runbook_is_well_formed_sourced_and_paired():
    assert all_problems() == []


def test_every_triage_category_but_the_catch_alls_has_a_runbook_in_both_languages():
    defaults = json.loads(resources.files("runbooks").joinpath("data/defaults.json").read_text(encoding="utf-8"))
    for category in CATEGORIES:
        if category in CATCH_ALL:
            assert category not in defaults, f"{category} is several kinds: it must not have a default runbook"
            continue
        kind = defaults.get(category)
        assert kind, f"no runbook answers the triage category {category}"
        assert (kind, "en") in runbooks() and (kind, "zh") in runbooks(), kind
        assert category in runbooks()[(kind, "en")].triage, f"{kind} does not list {category} in its triage"


def test_every_catch_all_category_is_split_into_kinds_by_their_messages():
    for category in CATCH_ALL:
        listing = [book for (kind, lang), book in runbooks().items() if lang == "en" and category in book.triage]
        assert len(listing) >= 2, f"{category}: fewer than two runbooks list it"
        assert for_category(category, ["a line no runbook quotes"]) is None


def test_a_message_picks_its_own_runbook_and_no_other():
    english = [book for (kind, lang), book in runbooks().items() if lang == "en"]
    owners: dict[str, set[str]] = {}
    for book in english:
        for message in book.messages:
            owners.setdefault(message, set()).add(book.kind)
    shared = {message: kinds for message, kinds in owners.items() if len(kinds) > 1}
    assert not shared, f"messages claimed by several runbooks: {shared}"
    for book in english:
        for message in book.messages:
            lines = [f"[rank3]: {message} (some context)"]
            if book.triage and set(book.triage) <= DIAGNOSED_ONLY:  # a kind only the job's diagnosis tells apart: its category's
                chosen = for_category(book.triage[0], lines)  # runbooks, not one pasted line, decide
                assert chosen is not None and chosen.kind == book.kind, (message, chosen)
                assert for_lines(lines) is None or for_lines(lines).kind != book.kind  # type: ignore[union-attr]
                continue
            chosen = for_lines(lines)
            assert chosen is not None
            # a longer message of another runbook may contain this one; then that one is the more specific
            assert chosen.kind == book.kind or message in " ".join(chosen.messages), (message, chosen.kind)


@pytest.mark.parametrize("broken, problem", [
    ("---\nkind: x\n---\n# X\n", "front matter lacks"),
    ("# no front matter\n", "no YAML front matter"),
])
def test_a_broken_runbook_is_named(tmp_path, broken, problem):
    path = tmp_path / "en" / "x.md"
    path.parent.mkdir()
    path.write_text(broken, encoding="utf-8")
    with pytest.raises(ValueError, match=problem):
        read_runbook(path)


def test_an_item_without_a_source_is_a_problem(tmp_path):
    from runbooks.catalog import problems

    original = runbooks()[("straggler", "en")]
    text = original.path.read_text(encoding="utf-8").replace(" (source: https://github.com/benfred/py-spy)", "", 1)
    path = tmp_path / "en" / "straggler.md"
    path.parent.mkdir()
    path.write_text(text, encoding="utf-8")
    found = problems(read_runbook(path))
    assert any("has no (source: ...)" in line for line in found), found


@pytest.mark.parametrize("key", sorted(runbooks()), ids=lambda key: f"{key[0]}-{key[1]}")
def test_a_fix_without_a_source_is_a_problem_in_every_runbook(tmp_path, key):
    """Every shipped runbook (both languages): its first fix with its sources taken out is named as a problem."""
    from runbooks.catalog import SOURCE, problems

    book = runbooks()[key]
    heading = f"## {book.heading('fixes')}\n"
    head, fixes = book.path.read_text(encoding="utf-8").split(heading, 1)
    before, item = fixes.split("\n1. ", 1)
    first, rest = item.split("\n\n", 1)  # the item's paragraph, however many lines it wraps over
    assert SOURCE.search(first), f"{book.source}: its first fix cites nothing"
    path = tmp_path / book.lang / f"{book.kind}.md"
    path.parent.mkdir()
    path.write_text(f"{head}{heading}{before}\n1. {SOURCE.sub('', first)}\n\n{rest}", encoding="utf-8")
    found = problems(read_runbook(path))
    assert any(f"'{heading.strip()}' item 1 has no (source: ...)" in line for line in found), found
