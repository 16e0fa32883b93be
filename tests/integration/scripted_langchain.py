"""A local fake of a LangChain chat model (the model API is what cannot run here): scripted AI messages, tools
accepted. Shared by the framework integration tests and the guard's LangGraph test."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.utils.function_calling import convert_to_openai_tool

LANGGRAPH_DEPRECATION = "ignore:create_react_agent has been moved"


class ScriptedChatModel(BaseChatModel):
    """Returns the scripted AI messages in order; accepts tools (unlike ``FakeMessagesListChatModel``)."""

    responses: list[AIMessage]
    index: int = 0

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        # the tools become invocation parameters, which OpenInference records as llm.tools.N.tool.json_schema
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None, **kwargs: Any) -> ChatResult:
        message = self.responses[self.index]
        self.index += 1
        return ChatResult(generations=[ChatGeneration(message=message)])


def calls(*items: tuple[str, str, dict[str, Any]]) -> AIMessage:
    return AIMessage(content="", tool_calls=[{"name": n, "args": a, "id": i, "type": "tool_call"} for i, n, a in items])
