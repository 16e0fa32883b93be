"""The guard in LangGraph's tool node: ``guarded_tool_node(tools, guard)`` is a ``ToolNode`` whose tool-call wrapper
(``wrap_tool_call`` / ``awrap_tool_call``) decides before each tool runs.

A stopped call is answered with a ``ToolMessage`` of status ``error`` carrying the guard's message (the model reads it
as the tool's answer and the graph goes on); the tool never runs. A call that ran is scored from the message the tool
node produced (status ``error``: the call failed). The tools offered are the node's own, as the model sees them.

History: the explicit ``scope``, else the current OpenTelemetry trace (an instrumented graph run has one).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from langchain_core.messages import ToolMessage
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.prebuilt import ToolNode
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command

from otel_toolcall_eval.guard.guard import Guard, definitions

Result = ToolMessage | Command[Any]


def guarded_tool_node(tools: Sequence[Any], guard: Guard, *, scope: str | None = None, **kwargs: Any) -> ToolNode:
    """A ``ToolNode`` over ``tools`` (``kwargs`` go to it) with the guard in front of every call."""
    holder: list[dict[str, Any]] = []

    def stopped(request: ToolCallRequest) -> tuple[ToolMessage | None, str, Any, str | None]:
        call = request.tool_call
        name, arguments, call_id = call["name"], call.get("args", {}), call.get("id")
        decision = guard.check(name, arguments, scope=scope, tools=holder[0], call_id=call_id)
        if decision.stops:
            return (
                ToolMessage(decision.message, tool_call_id=call_id or "", name=name, status="error"),
                name,
                arguments,
                call_id,
            )
        return None, name, arguments, call_id

    def record(name: str, arguments: Any, call_id: str | None, out: Result) -> None:
        if isinstance(out, ToolMessage) and out.status == "error":
            guard.record_result(name, arguments, error=str(out.content), scope=scope, call_id=call_id)
        else:
            content = out.content if isinstance(out, ToolMessage) else None
            guard.record_result(name, arguments, result=content, scope=scope, call_id=call_id)

    def wrap(request: ToolCallRequest, execute: Callable[[ToolCallRequest], Result]) -> Result:
        answer, name, arguments, call_id = stopped(request)
        if answer is not None:
            return answer
        try:
            out = execute(request)
        except Exception as exc:
            guard.record_result(name, arguments, error=exc, scope=scope, call_id=call_id)
            raise
        record(name, arguments, call_id, out)
        return out

    async def awrap(request: ToolCallRequest, execute: Callable[[ToolCallRequest], Awaitable[Result]]) -> Result:
        answer, name, arguments, call_id = stopped(request)
        if answer is not None:
            return answer
        try:
            out = await execute(request)
        except Exception as exc:
            guard.record_result(name, arguments, error=exc, scope=scope, call_id=call_id)
            raise
        record(name, arguments, call_id, out)
        return out

    node = ToolNode(tools, wrap_tool_call=wrap, awrap_tool_call=awrap, **kwargs)
    holder.append(definitions({name: convert_to_openai_tool(t)["function"].get("parameters") for name, t in
                               node.tools_by_name.items()}))  # fmt: skip
    return node
