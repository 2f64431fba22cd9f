"""Every seed section is readable in English: a rendering beside each seed, with the same headings at the same
levels, every command, number and error string of the original, and no Chinese prose left in it."""

from __future__ import annotations

import re

import pytest

from common.settings import BUILTIN_DIR
from corpus.chunking import HeadingsDiffer, chunk_document
from corpus.frontmatter import split_front_matter

SEEDS = sorted(BUILTIN_DIR.glob("[0-9][0-9][0-9]_*.txt"))
CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff\uff00-\uffef\u3000-\u303f]")
FENCE = re.compile(r"^\s*```")
# A command, variable, version, path or flag: a token with a digit, an underscore, a dot, '=', '/' or '--'.
TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-/=:+]*[0-9A-Za-z_]")
NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)*")


def _rendering(seed):
    return BUILTIN_DIR / "renderings" / "en" / f"{seed.stem}.md"


def _technical(text: str) -> set[str]:
    tokens = {t for t in TOKEN.findall(text) if re.search(r"[\d_.=/]|--", t)}
    return tokens | set(NUMBER.findall(text))


def test_there_are_five_seeds():
    assert len(SEEDS) == 5


@pytest.mark.parametrize("seed", SEEDS, ids=lambda p: p.stem)
def test_each_seed_has_a_rendering_with_its_headings(seed):
    path = _rendering(seed)
    assert path.exists(), f"no English rendering of {seed.name}"
    meta, body = split_front_matter(path.read_text(encoding="utf-8"))
    assert meta == {"rendering_of": seed.name, "lang": "en"}
    original = seed.read_text(encoding="utf-8")
    chunks = chunk_document(body, "r.md", headings_from=original)
    assert {c.section for c in chunks} == {c.section for c in chunk_document(original, "o.txt")}


@pytest.mark.parametrize("seed", SEEDS, ids=lambda p: p.stem)
def test_each_rendering_keeps_every_command_number_and_error_string(seed):
    _, body = split_front_matter(_rendering(seed).read_text(encoding="utf-8"))
    missing = sorted(t for t in _technical(seed.read_text(encoding="utf-8")) if t not in body)
    assert not missing, f"{seed.name}: the rendering lacks {missing[:10]}"


@pytest.mark.parametrize("seed", SEEDS, ids=lambda p: p.stem)
def test_no_chinese_is_left_in_a_rendering(seed):
    text = _rendering(seed).read_text(encoding="utf-8")
    left = [line for line in text.splitlines() if CJK.search(line)]
    assert not left, left[:3]


def test_a_rendering_whose_headings_drift_is_refused():
    seed = SEEDS[0]
    _, body = split_front_matter(_rendering(seed).read_text(encoding="utf-8"))
    drifted = re.sub(r"(?m)^## ", "### ", body, count=1)
    with pytest.raises(HeadingsDiffer):
        chunk_document(drifted, "r.md", headings_from=seed.read_text(encoding="utf-8"))


def test_the_agents_search_tool_cites_a_rendering_as_its_original(shared_index, monkeypatch):
    from agent.core import build_troubleshooter
    from agent.llm.toolbox import Toolbox
    from common.redaction import Redactor
    from common.settings import Settings

    monkeypatch.setenv("TRAINDOC_DATA_DIR", str(shared_index))
    troubleshooter = build_troubleshooter(Settings.from_env())
    toolbox = Toolbox(retriever=troubleshooter.retriever(), probe_context=None, redactor=Redactor(mode="default"))
    output = toolbox.search_docs("the port 29500 is already in use when I start torchrun, how do I fix it?")
    assert "/renderings/" not in output and ".md ›" in output  # a runbook, then the seeds by their own names
    sources = {hit.chunk.source for hit in toolbox.chunks.values()}
    assert sources and not any("/renderings/" in source for source in sources), sources
    assert any(re.search(r"corpus/00\d_\w+\.txt$", source) for source in sources), sources
