"""The guard as a pydantic-ai capability: ``Agent(..., capabilities=[GuardCapability(guard)])``.

It wraps each tool's execution (``wrap_tool_execute``: after pydantic-ai validated the arguments against the tool's
schema, before the tool function runs). The guard judges the model's own arguments (``ToolCallPart.args``), not the
validated ones. A stopped call raises ``ToolFailed``: the model gets a failed tool result with the guard's message
and can adapt, and the tool's retry budget is left alone. With ``ask="defer"``, an ``ask`` decision raises
``ApprovalRequired`` instead, pydantic-ai's own human-in-the-loop deferral (the agent's output type must then
accept ``DeferredToolRequests``).

History: the explicit ``scope``, else the current OpenTelemetry trace (an instrumented run has one), else the run
(``RunContext.run_id``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from opentelemetry import trace as trace_api
from pydantic_ai import RunContext
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.capabilities.abstract import ValidatedToolArgs, WrapToolExecuteHandler
from pydantic_ai.exceptions import ApprovalRequired, ToolFailed
from pydantic_ai.messages import ToolCallPart
from pydantic_ai.tools import ToolDefinition as PydanticToolDefinition

from otel_toolcall_eval.engine.guard import Action
from otel_toolcall_eval.guard.guard import Guard, definitions
from otel_toolcall_eval.records import ToolDefinition


@dataclass
class GuardCapability(AbstractCapability[Any]):
    """Decides every tool call of the agent before the tool runs; records how it ended."""

    guard: Guard
    scope: str | None = None
    ask: Literal["fail", "defer"] = "fail"
    _offered: dict[str, tuple[PydanticToolDefinition, dict[str, ToolDefinition]]] = field(default_factory=dict)

    def _tools(self, tool_def: PydanticToolDefinition) -> dict[str, ToolDefinition]:
        hit = self._offered.get(tool_def.name)
        if hit is None or hit[0] is not tool_def:
            hit = self._offered[tool_def.name] = (
                tool_def,
                definitions({tool_def.name: tool_def.parameters_json_schema}),
            )
        return hit[1]

    def _scope(self, ctx: RunContext[Any]) -> str | None:
        if self.scope is not None or trace_api.get_current_span().get_span_context().is_valid:
            return self.scope
        return None if ctx.run_id is None else f"pydantic-ai-run:{ctx.run_id}"

    async def wrap_tool_execute(
        self,
        ctx: RunContext[Any],
        *,
        call: ToolCallPart,
        tool_def: PydanticToolDefinition,
        args: ValidatedToolArgs,
        handler: WrapToolExecuteHandler,
    ) -> Any:
        scope = self._scope(ctx)
        raw = call.args
        decision = self.guard.check(call.tool_name, raw, scope=scope, tools=self._tools(tool_def),
                                    call_id=call.tool_call_id)  # fmt: skip
        if decision.stops:
            if decision.action is Action.ASK and self.ask == "defer":
                raise ApprovalRequired(metadata={"guard": decision.message})
            raise ToolFailed(decision.message)
        try:
            result = await handler(args)
        except Exception as exc:
            self.guard.record_result(call.tool_name, raw, error=exc, scope=scope, call_id=call.tool_call_id)
            raise
        self.guard.record_result(call.tool_name, raw, result=result, scope=scope, call_id=call.tool_call_id)
        return result
