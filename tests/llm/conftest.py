"""Fixtures for the agent tests: a troubleshooter over the session's real index, with a scripted model
(in-process) or the real langchain-openai client against the fake server; and `ask` run as a user would."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from clikit import run_cli

from agent.core import Question, Troubleshooter
from agent.events import Event
from common.settings import Settings


@pytest.fixture(autouse=True)
def _capability_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """doctor-llm's verdicts per test, never in the shared index's data directory."""
    path = tmp_path / "llm-capabilities.json"
    monkeypatch.setenv("TRAINDOC_LLM_CAPABILITIES", str(path))
    return path


@pytest.fixture(scope="session")
def warm_retriever(shared_index: Path) -> Any:
    """The session index loaded once (loading costs ~2 s); every troubleshooter here shares it."""
    return Troubleshooter(replace(Settings.from_env(), data_dir=shared_index)).retriever()


class WarmTroubleshooter(Troubleshooter):
    def __init__(self, settings: Settings, retriever: Any, chat_model: Any | None = None) -> None:
        super().__init__(settings, chat_model=chat_model)
        self._warm = retriever

    def retriever(self) -> Any:
        return self._warm


Ask = Callable[..., tuple[Any, list[Event]]]


@pytest.fixture
def agent_ask(use_shared_index: Path, warm_retriever: Any) -> Ask:
    """``agent_ask(question, model=None, **settings)`` -> (answer, events).

    With ``model`` a scripted chat model is used; without, the real client built from the settings
    (``llm_base_url=server.url``). Agent mode unless ``llm_mode`` says otherwise."""

    def ask(question: str | Question, model: Any | None = None, **overrides: Any) -> tuple[Any, list[Event]]:
        settings = replace(Settings.from_env(), backend="openai", llm_model="scripted" if model else "fake-model",
                           llm_timeout_s=10.0, **({"llm_mode": "agent"} | overrides))
        events: list[Event] = []
        q = question if isinstance(question, Question) else Question(text=question, probes=False)
        answer = WarmTroubleshooter(settings, warm_retriever, chat_model=model).ask(q, on_event=events.append)
        return answer, events

    return ask


@pytest.fixture
def ask_cli(use_shared_index: Path) -> Iterator[Callable[..., subprocess.CompletedProcess[str]]]:
    """``ask_cli(server_url, *args, **env)``: `.venv/bin/ask` with the openai backend pointed at ``server_url``,
    in agent mode unless ``TRAINDOC_LLM_MODE`` is given."""

    def run(base_url: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
        full = {"TRAINDOC_BACKEND": "openai", "TRAINDOC_LLM_BASE_URL": base_url, "TRAINDOC_LLM_MODEL": "fake-model",
                "TRAINDOC_LLM_TIMEOUT": "20", "TRAINDOC_LLM_MODE": "agent", **env}
        return run_cli("ask", *args, env=full, timeout=120)

    yield run
