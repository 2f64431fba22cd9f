"""Stale advice never leaves traindoc, whatever path a section takes: the agent's search tool (what a model
reads) and the web chat's expandable sources quote the sm_120 section corrected (cu128 builds, PyTorch 2.7+),
with a line saying what was corrected, never the seed's cu124 commands."""

from __future__ import annotations

import re

from agent.core import Question, build_troubleshooter
from agent.llm.toolbox import Toolbox
from common.redaction import Redactor
from common.settings import Settings
from traindoc_web.chat import sources_html

QUESTION = "RTX 5090: sm_120 is not compatible with the current PyTorch installation, which build do I install?"
STALE = re.compile(r"whl/cu124|pytorch-cuda=12\.4")


def _troubleshooter(shared_index, monkeypatch):
    monkeypatch.setenv("TRAINDOC_DATA_DIR", str(shared_index))
    return build_troubleshooter(Settings.from_env())


def test_the_search_tool_hands_a_model_the_corrected_section(shared_index, monkeypatch):
    troubleshooter = _troubleshooter(shared_index, monkeypatch)
    toolbox = Toolbox(retriever=troubleshooter.retriever(), probe_context=None, redactor=Redactor(mode="strict"))
    output = toolbox.search_docs(QUESTION)
    assert "sm_120" in output or "Blackwell" in output
    assert not STALE.search(output), output
    assert "whl/cu128" in output and "traindoc corrected this section" in output


def test_the_web_sources_a_user_expands_are_corrected(shared_index, monkeypatch):
    troubleshooter = _troubleshooter(shared_index, monkeypatch)
    answer = troubleshooter.ask(Question(QUESTION, probes=False))
    html = sources_html(answer)
    assert "<details>" in html
    assert not STALE.search(html), html
    assert "whl/cu128" in html and "traindoc corrected this section" in html
