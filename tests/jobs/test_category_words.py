"""The words retrieval searches with for a diagnosed failure kind (jobs/data/category_words.json)."""

from __future__ import annotations

import json
from importlib import resources

from jobs.diagnosis import CATEGORIES, search_terms


def test_every_entry_names_a_diagnosis_category_and_says_something() -> None:
    table = json.loads(resources.files("jobs").joinpath("data/category_words.json").read_text(encoding="utf-8"))
    entries = {k: v for k, v in table.items() if not k.startswith("_")}
    assert entries
    for category, entry in entries.items():
        assert category in CATEGORIES, category
        assert len(entry["words"].split()) >= 8 and isinstance(entry["instead_of_lines"], bool), category
        assert isinstance(entry["only_if_quoted"], bool), category


def test_a_kind_described_by_its_behaviour_is_searched_without_its_raw_lines() -> None:
    raw = "[enforce fail at pair.cc:456] op.preamble.length <= op.nbytes. 344 vs 4."
    terms = search_terms("collective_mismatch", [raw])
    assert raw not in terms and any("same collectives" in t for t in terms)


def test_other_kinds_keep_their_lines_and_add_words() -> None:
    timeout = "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE)"
    assert search_terms("straggler", [timeout])[0] == timeout and len(search_terms("straggler", [timeout])) == 2
    assert search_terms("port_in_use", ["EADDRINUSE"]) == ["EADDRINUSE", "port in use"]
