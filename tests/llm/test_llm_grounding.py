"""Grounding: only citations to what the agent actually retrieved or probed survive, numbered [1], [2]..."""

from __future__ import annotations

from typing import Any

from fakes.chat_model import ScriptedChatModel, reply, tool_call

from agent.core import Question
from agent.llm.grounding import ground

WARNING = "cites no retrieved section or probe result"


def retrieved_ids(retriever: Any, query: str, k: int = 5) -> list[str]:
    """What search_docs will show the model for ``query`` (the same retriever, the same call)."""
    return [hit.chunk.chunk_id for hit in retriever.search(query, k=k).hits]


def test_valid_citations_are_numbered_and_the_rest_dropped(agent_ask: Any, warm_retriever: Any) -> None:
    first, second, *_ = retrieved_ids(warm_retriever, "NCCL timeout")
    never = next(i for i in retrieved_ids(warm_retriever, "CUDA out of memory") if i not in {first, second})
    model = ScriptedChatModel(script=[
        reply(calls=[tool_call("search_docs", {"query": "NCCL timeout"})]),
        reply(f"Raise the timeout [doc:{first}]. Turn on NCCL_DEBUG [doc:{second}] [doc:{first}]. "
              f"Unseen [doc:{never}], invented [doc:0123456789abcdef], made up [7], unprobed [probe:gpu_inventory]."),
    ])
    answer, _ = agent_ask("NCCL watchdog timeout", model)

    assert "Raise the timeout [1]. Turn on NCCL_DEBUG [2] [1]." in answer.answer
    for gone in ("[7]", "[3]", "doc:", "probe:", never):
        assert gone not in answer.answer
    assert [(c.n, c.chunk_id) for c in answer.citations] == [(1, first), (2, second)]
    assert all(c.source and c.section for c in answer.citations)
    assert answer.grounded is True and WARNING not in answer.answer


def test_a_probe_citation_is_numbered_and_linked_to_its_findings(agent_ask: Any) -> None:
    model = ScriptedChatModel(script=[reply(calls=[tool_call("env_vars")]), reply("NCCL_DEBUG is unset [probe:env_vars].")])
    answer, _ = agent_ask(Question("NCCL watchdog timeout", probes=True), model)

    assert answer.answer.endswith("NCCL_DEBUG is unset [1].")
    assert answer.grounded is True and answer.citations == []
    assert answer.findings and all(1 in f.related for f in answer.findings if f.probe == "env_vars")


def test_no_valid_citation_means_not_grounded_and_a_warning(agent_ask: Any) -> None:
    model = ScriptedChatModel(script=[reply("Probably a driver bug [doc:feedfacefeedface] [2].")])
    answer, _ = agent_ask("NCCL watchdog timeout", model)

    assert answer.grounded is False and answer.citations == []
    assert WARNING in answer.answer and "[2]" not in answer.answer and "feedface" not in answer.answer


def test_json_keeps_the_offline_schema_and_adds_steps_grounded_and_the_model(
    agent_ask: Any, warm_retriever: Any
) -> None:
    from agent.core import Troubleshooter
    from common.settings import Settings

    class Offline(Troubleshooter):
        def retriever(self) -> Any:
            return warm_retriever

    offline = Offline(Settings.from_env()).ask(Question("NCCL watchdog timeout", probes=False)).to_json()
    (first, *_) = retrieved_ids(warm_retriever, "NCCL timeout")
    model = ScriptedChatModel(script=[reply(calls=[tool_call("search_docs", {"query": "NCCL timeout"})]),
                                      reply(f"Raise the timeout [doc:{first}].")])
    answer, _ = agent_ask("NCCL watchdog timeout", model)
    data = answer.to_json()

    assert set(offline) <= set(data)
    assert set(data) - set(offline) == {"steps", "grounded", "mode"}
    assert data["backend"] == "openai:scripted" and offline["backend"] == "offline" and data["mode"] == "agent"
    assert data["grounded"] is True
    assert data["steps"] == [{"tool": "search_docs", "args": {"query": "NCCL timeout"},
                              "result": data["steps"][0]["result"], "cached": False}]
    assert data["citations"][0]["chunk_id"] == first and set(data["citations"][0]) == set(offline["citations"][0])


def test_ground_unit() -> None:
    class Hit:
        def __init__(self, ident: str) -> None:
            self.score = 0.5
            self.chunk = type("Chunk", (), {"chunk_id": ident, "source": f"{ident}.md", "section": "S", "text": "t"})

    result = ground("a [doc:x] b [doc:y] c [doc:x] d [doc:z] e [probe:env_vars] f [3] g [9]",
                    {"x": Hit("x"), "y": Hit("y")}, {"env_vars": object()})
    # A bare [3] the model wrote itself is dropped even though 3 becomes a valid number: it was never checked.
    assert result.text == "a [1] b [2] c [1] d  e [3] f  g "
    assert result.dropped == ["[3]", "[9]", "[doc:z]"]
    assert result.probe_numbers == {"env_vars": 3} and result.grounded
