"""The README lists every runbook kind with its title and the date its facts were checked (issue 37 point 4), and
says why the kinds it decided against have none: the table follows the runbooks' front matter, and each decision
names a runbook that exists and answers what such a report shows."""

from __future__ import annotations

import re
from pathlib import Path

from runbooks.catalog import runbooks_in

README = Path(__file__).resolve().parents[2] / "README.md"
ROW = re.compile(r"^\| `(?P<kind>[a-z0-9_]+)` \| (?P<title>.+?) \| (?P<checked>\d{4}-\d{2}-\d{2}) \|$")


def _section(heading: str) -> str:
    text = README.read_text(encoding="utf-8")
    start = text.index(f"\n{heading}\n")
    level = heading.split(" ", 1)[0]
    end = min((i for marker in ("\n## ", f"\n{level} ") if (i := text.find(marker, start + 1)) > 0), default=len(text))
    return text[start:end]


def _table() -> dict[str, tuple[str, str]]:
    rows = [m for line in _section("## Runbooks").splitlines() if (m := ROW.match(line))]
    kinds = [m["kind"] for m in rows]
    assert len(kinds) == len(set(kinds)), "a kind listed twice"
    return {m["kind"]: (m["title"], m["checked"]) for m in rows}


def test_the_table_lists_every_runbook_kind_and_no_other() -> None:
    assert set(_table()) == set(runbooks_in("en"))


def test_each_row_shows_the_runbook_s_title_and_checked_date() -> None:
    table = _table()
    wrong = {kind: (table[kind], (book.title, book.checked)) for kind, book in runbooks_in("en").items()
             if kind in table and table[kind] != (book.title, book.checked)}
    assert not wrong, wrong


def test_each_kind_without_a_runbook_is_decided_and_names_the_runbooks_that_answer_it_instead() -> None:
    reasons = _section("### Failure kinds without a runbook, and why")
    known = set(runbooks_in("en"))
    for topic in ("MoE load balancing", "Checkpoint retention", "FSDP wrapping", "Mixed-precision set-up"):
        assert f"- **{topic}**" in reasons, topic
        bullet = reasons.split(f"- **{topic}**", 1)[1].split("\n- **", 1)[0]
        assert set(re.findall(r"`([a-z0-9_]+)`", bullet)) & known, f"{topic}: names no runbook that answers it"
