"""The bounded agent loop (langchain `create_agent`), streamed as typed events.

Safeguards (HolmesGPT's): a step limit; the last step is made without tools, so an answer always
comes; tool output is capped and repeated identical calls are answered from the first result (in
the toolbox); independent tool calls in one model turn run concurrently (langgraph's tool node).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from agent.events import EventSink, Token
from agent.llm.toolbox import Toolbox

log = logging.getLogger(__name__)
ANSWER_NOW = (
    "Tool budget spent. Answer now from the results above, citing [doc:ID] / [probe:NAME]; "
    "if they do not explain the problem, say so."
)


def system_prompt() -> str:
    return resources.files("agent").joinpath("data/system_prompt.md").read_text(encoding="utf-8")


@dataclass
class LoopResult:
    text: str
    model_calls: int
    malformed: list[str] = field(default_factory=list)  # tool calls whose arguments were not valid JSON


def _bounded_steps(max_steps: int) -> Any:
    from langchain.agents.middleware import AgentMiddleware, ModelResponse
    from langchain_core.messages import AIMessage, HumanMessage

    class BoundedSteps(AgentMiddleware):  # type: ignore[misc, type-arg]
        """Counts model calls; the last allowed one runs without tools and may not call any."""

        def __init__(self) -> None:
            super().__init__()
            self.calls = 0

        def wrap_model_call(self, request: Any, handler: Any) -> Any:
            self.calls += 1
            if self.calls < max_steps:
                return handler(request)
            final = request.override(tools=[], messages=[*request.messages, HumanMessage(content=ANSWER_NOW)])
            response = handler(final)
            messages = []
            for message in response.result:
                if isinstance(message, AIMessage) and message.tool_calls:
                    message = AIMessage(content=message.content or "", id=message.id)
                messages.append(message)
            return ModelResponse(result=messages, structured_response=response.structured_response)

    return BoundedSteps()


def run_loop(model: Any, toolbox: Toolbox, messages: list[dict[str, str]], max_steps: int, on_event: EventSink) -> LoopResult:
    from langchain.agents import create_agent
    from langchain_core.messages import AIMessage, AIMessageChunk

    bounded = _bounded_steps(max_steps)
    agent = create_agent(model, tools=toolbox.langchain_tools(), system_prompt=system_prompt(), middleware=[bounded])
    final_text = ""
    malformed: list[str] = []
    streamed_any = False
    stream: Any = agent.stream(  # type: ignore[call-overload]
        {"messages": messages},  # type: ignore[arg-type]
        stream_mode=["messages", "updates"],
        config={"recursion_limit": 4 * max_steps + 4},
    )
    for mode, payload in stream:
        if mode == "messages":
            chunk, meta = payload
            if isinstance(chunk, AIMessageChunk) and isinstance(chunk.content, str) and chunk.content \
                    and meta.get("langgraph_node") == "model":
                streamed_any = True
                on_event(Token(toolbox.redactor.restore(chunk.content)))
        elif mode == "updates":
            for update in payload.values():
                for message in (update or {}).get("messages", []) if isinstance(update, dict) else []:
                    if isinstance(message, AIMessage) and not message.tool_calls:
                        final_text = _text(message.content)
                        malformed = [f"{c.get('name')}({c.get('args')!r})" for c in message.invalid_tool_calls]
    if not streamed_any and final_text:
        on_event(Token(toolbox.redactor.restore(final_text)))
    return LoopResult(final_text, bounded.calls, malformed)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") if isinstance(part, dict) else str(part) for part in content)
    return str(content)
