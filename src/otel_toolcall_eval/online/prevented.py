"""Calls the pre-execution guard stopped (issue 31), as the processor learns of them: from the guard's
``apply_guardrail`` spans that say ``toolcall_eval.guard.prevented``.

A stopped call is not an executed one. Some frameworks still write their own span for it (pydantic-ai's
``execute_tool`` span of a call its capability failed, with the guard's span inside it): that span is claimed here,
by its span id (the guard span's parent) or its call id, and is not scored as a call; the others (an MCP proxy, a
decorated function, the OpenAI Agents SDK's rejected calls) have no tool span at all. Either way the trace's root
lists them: ``trace.prevented_calls`` and ``trace.prevented_tools``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from otel_toolcall_eval import attributes as A


def stopped_call(attrs: dict[str, Any]) -> tuple[str, str | None] | None:
    """(tool, call id) when ``attrs`` are those of the guard's span of a call it stopped, else None."""
    if (
        attrs.get(A.GUARD_PREVENTED) is not True
        or attrs.get(A.GEN_AI_OPERATION_NAME) != A.APPLY_GUARDRAIL
        or attrs.get(A.GEN_AI_GUARDRAIL_COMPONENT_NAME) != A.GUARD_COMPONENT
    ):
        return None
    tool, call_id = attrs.get(A.GEN_AI_TOOL_NAME), attrs.get(A.GEN_AI_TOOL_CALL_ID)
    if not isinstance(tool, str):
        return None
    return tool, call_id if isinstance(call_id, str) and call_id else None


@dataclass(slots=True)
class Prevented:
    """One trace's stopped calls (bounded like its call history)."""

    tools: list[str] = field(default_factory=list)  # in the order they were stopped
    spans: set[int] = field(default_factory=set)  # the guard spans' parents: a framework's span of the call
    call_ids: set[str] = field(default_factory=set)

    def note(self, tool: str, parent_span_id: int | None, call_id: str | None, max_entries: int) -> None:
        if len(self.tools) >= max_entries:
            return
        self.tools.append(tool)
        if parent_span_id is not None:
            self.spans.add(parent_span_id)
        if call_id is not None:
            self.call_ids.add(call_id)

    def claims(self, span_id: int, call_id: str | None) -> bool:
        """The tool span of a stopped call: claimed once (its call id cannot claim a later, executed call)."""
        if span_id in self.spans:
            self.spans.discard(span_id)
            if call_id is not None:
                self.call_ids.discard(call_id)
            return True
        if call_id is not None and call_id in self.call_ids:
            self.call_ids.discard(call_id)
            return True
        return False

    def attributes(self) -> dict[str, Any]:
        return {A.TRACE_PREVENTED_CALLS: len(self.tools), A.TRACE_PREVENTED_TOOLS: list(self.tools)}
