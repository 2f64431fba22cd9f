"""A scripted chat model (simonw/llm's mock model): replies come from a queue, tool calls included;
`bind_tools` is supported; everything it was sent is recorded."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from pydantic import Field


def tool_call(name: str, args: dict[str, Any] | None = None, call_id: str | None = None) -> dict[str, Any]:
    return {"name": name, "args": args or {}, "id": call_id or f"call_{name}_{abs(hash(str(args))) % 10_000}",
            "type": "tool_call"}


def reply(text: str = "", calls: Sequence[dict[str, Any]] = ()) -> AIMessage:
    return AIMessage(content=text, tool_calls=list(calls))


class ScriptedChatModel(BaseChatModel):
    script: list[Any] = Field(default_factory=list)  # AIMessage, or an Exception to raise
    sent: list[list[BaseMessage]] = Field(default_factory=list)
    bound_tools: list[list[str]] = Field(default_factory=list)
    fallback: str = "No further steps scripted."

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        names = [getattr(t, "name", None) or (t.get("name") if isinstance(t, dict) else str(t)) for t in tools]
        self.bound_tools.append(names)
        return self

    def _next(self, messages: list[BaseMessage]) -> AIMessage:
        self.sent.append(list(messages))
        item = self.script.pop(0) if self.script else AIMessage(content=self.fallback)
        if isinstance(item, BaseException):
            raise item
        return item

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self._next(messages))])

    def _stream(self, messages: list[BaseMessage], stop: list[str] | None = None,
                run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any) -> Iterator[ChatGenerationChunk]:
        message = self._next(messages)
        if message.tool_calls:
            chunk = AIMessageChunk(content=message.content, tool_call_chunks=[
                {"name": c["name"], "args": __import__("json").dumps(c["args"]), "id": c["id"], "index": i}
                for i, c in enumerate(message.tool_calls)])
            yield ChatGenerationChunk(message=chunk)
            return
        words = str(message.content).split(" ")
        for i, word in enumerate(words):
            piece = word if i == 0 else " " + word
            chunk = ChatGenerationChunk(message=AIMessageChunk(content=piece))
            if run_manager:
                run_manager.on_llm_new_token(piece, chunk=chunk)
            yield chunk

    def all_text_sent(self) -> str:
        return "\n".join(str(m.content) for batch in self.sent for m in batch)
