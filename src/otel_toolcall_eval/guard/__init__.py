"""The pre-execution guard: the policies the processor scores, enforced before a tool runs (docs/guardrail.md).

``Guard`` decides (allow, warn, ask, block) and records by the GenAI guardrail convention; the plug-ins put it where
tools are called: ``guard.functions`` (plain Python functions), ``guard.mcp`` (an MCP proxy),
``guard.openai_agents`` (the OpenAI Agents SDK's tool guardrails), ``guard.pydantic_ai`` (a pydantic-ai capability),
``guard.langgraph`` (LangGraph's tool node).
Each plug-in imports its library; this package imports none of them.
"""

from otel_toolcall_eval.engine.guard import POLICIES, Action, Decision, Finding
from otel_toolcall_eval.guard.guard import Guard, ToolCallBlocked, definitions

__all__ = ["POLICIES", "Action", "Decision", "Finding", "Guard", "ToolCallBlocked", "definitions"]
