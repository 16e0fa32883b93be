"""The guard as the OpenAI Agents SDK's own tool guardrails (a dedicated guardrail API, which the GenAI convention
counts as one): an input guardrail that decides before a function tool runs, an output guardrail that records how
it ended.

A stopped call is answered with ``reject_content``: the tool does not run, and the model reads the guard's message
as the tool's output and can correct itself (the run goes on). ``protect(agent, guard)`` attaches both guardrails to
every function tool of an agent; ``tool_guardrails(guard)`` returns them for ``function_tool(...,
tool_input_guardrails=[...], tool_output_guardrails=[...])``.

History: the explicit ``scope``, else the current OpenTelemetry trace (an instrumented SDK run has one), else the
run itself (the run's usage object, which every tool context of one run shares).
"""

from __future__ import annotations

from typing import Any

from agents import Agent, FunctionTool
from agents.tool import default_tool_error_function
from agents.tool_guardrails import (
    ToolGuardrailFunctionOutput,
    ToolInputGuardrail,
    ToolInputGuardrailData,
    ToolOutputGuardrail,
    ToolOutputGuardrailData,
)
from opentelemetry import trace as trace_api

from otel_toolcall_eval.guard.guard import Guard, definitions
from otel_toolcall_eval.records import ToolDefinition

NAME = "toolcall-eval guard"
# what the SDK sends the model when a tool raised and no ``failure_error_function`` was given: the only trace of the
# failure the output guardrail sees (a custom error function's text is recorded as a result)
_FAILED = default_tool_error_function(None, Exception())  # type: ignore[arg-type]


class _Offered:
    """The tools an agent offers, as definitions built once per tool list (the engine memoises per definition)."""

    def __init__(self) -> None:
        self._by_agent: dict[int, tuple[Any, dict[str, ToolDefinition]]] = {}

    def of(self, agent: Agent[Any]) -> dict[str, ToolDefinition]:
        tools = agent.tools
        hit = self._by_agent.get(id(agent))
        if hit is not None and hit[0] is tools:
            return hit[1]
        schemas = {t.name: t.params_json_schema for t in tools if isinstance(t, FunctionTool)}
        built = definitions(schemas)
        if len(self._by_agent) > 256:
            self._by_agent.clear()
        self._by_agent[id(agent)] = (tools, built)
        return built


def _scope(data: ToolInputGuardrailData, scope: str | None) -> str | None:
    if scope is not None or trace_api.get_current_span().get_span_context().is_valid:
        return scope
    return f"openai-agents-run:{id(data.context.usage)}"


def tool_guardrails(
    guard: Guard, *, scope: str | None = None
) -> tuple[ToolInputGuardrail[Any], ToolOutputGuardrail[Any]]:
    """The input and output tool guardrails that put ``guard`` in front of a function tool."""
    offered = _Offered()

    async def decide(data: ToolInputGuardrailData) -> ToolGuardrailFunctionOutput:
        tool = data.context
        decision = guard.check(tool.tool_name, tool.tool_arguments, scope=_scope(data, scope),
                               tools=offered.of(data.agent), call_id=tool.tool_call_id)  # fmt: skip
        if decision.stops:
            return ToolGuardrailFunctionOutput.reject_content(decision.message, output_info=decision)
        return ToolGuardrailFunctionOutput.allow(output_info=decision)

    async def record(data: ToolOutputGuardrailData) -> ToolGuardrailFunctionOutput:
        tool = data.context
        where = _scope(data, scope)
        if data.output == _FAILED:  # the SDK's own answer for a tool that raised (``default_tool_error_function``)
            guard.record_result(tool.tool_name, tool.tool_arguments, error=_FAILED, scope=where,
                                call_id=tool.tool_call_id)  # fmt: skip
        else:
            guard.record_result(tool.tool_name, tool.tool_arguments, result=data.output, scope=where,
                                call_id=tool.tool_call_id)  # fmt: skip
        return ToolGuardrailFunctionOutput.allow()

    return ToolInputGuardrail(decide, name=NAME), ToolOutputGuardrail(record, name=NAME)


def protect(agent: Agent[Any], guard: Guard, *, scope: str | None = None) -> Agent[Any]:
    """Attach the guard's tool guardrails to every function tool of ``agent`` (in place; returned for chaining)."""
    before, after = tool_guardrails(guard, scope=scope)
    for tool in agent.tools:
        if isinstance(tool, FunctionTool):
            tool.tool_input_guardrails = [*(tool.tool_input_guardrails or []), before]
            tool.tool_output_guardrails = [*(tool.tool_output_guardrails or []), after]
    return agent
