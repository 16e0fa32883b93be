"""The built-in conventions, each checked against the instrumentation's real output (see tests)."""

from __future__ import annotations

from dataclasses import dataclass

from opentelemetry.sdk.trace import ReadableSpan

from otel_toolcall_eval import _json
from otel_toolcall_eval import attributes as A
from otel_toolcall_eval.conventions.base import AttributeConvention, Attrs
from otel_toolcall_eval.conventions.spans import attribute_record
from otel_toolcall_eval.records import ToolCallRecord

# OpenInference: `input.value` is preferred over `gen_ai.tool.call.arguments`, which one release
# (openinference-instrumentation 0.1.72 with its GenAI option) fills with the tool's schema.


# What OpenInference writes in place of a value its TraceConfig hides (``hide_inputs``/``hide_outputs``).
REDACTED = "__REDACTED__"


@dataclass(frozen=True, slots=True)
class OpenInferenceConvention(AttributeConvention):
    def extract(self, span: ReadableSpan, attrs: Attrs) -> ToolCallRecord | None:
        # OpenAI Agents handoffs are TOOL spans named "handoff to <agent>" with no tool.name: not tool calls.
        if A.OPENINFERENCE_TOOL_NAME not in attrs and (span.name or "").startswith("handoff"):
            return None
        record = attribute_record(self, span, attrs)  # ``AttributeConvention.extract``'s body, compiled
        if record is not None and record.raw_arguments == REDACTED:
            record.raw_arguments = None  # hidden inputs: no evidence, not an unparseable call
        if record is not None and record.result_recorded and record.result == REDACTED:
            record.result, record.result_recorded = None, False
        return record


OPENINFERENCE = OpenInferenceConvention(
    name="openinference",
    detect_key=A.OPENINFERENCE_SPAN_KIND,
    detect_values=frozenset({"TOOL", "tool"}),
    name_keys=(A.OPENINFERENCE_TOOL_NAME, A.GEN_AI_TOOL_NAME),
    argument_keys=(A.INPUT_VALUE, A.GEN_AI_TOOL_CALL_ARGUMENTS),
    result_keys=(A.OUTPUT_VALUE, A.GEN_AI_TOOL_CALL_RESULT),
    call_id_keys=("tool_call.id", A.GEN_AI_TOOL_CALL_ID),
    schema_keys=(A.OPENINFERENCE_TOOL_PARAMETERS,),
)

MCP = AttributeConvention(
    name="mcp",
    detect_key=A.MCP_METHOD_NAME,
    detect_values=frozenset({"tools/call"}),
    name_keys=(A.GEN_AI_TOOL_NAME,),
    argument_keys=(A.GEN_AI_TOOL_CALL_ARGUMENTS,),
    result_keys=(A.GEN_AI_TOOL_CALL_RESULT,),
    call_id_keys=(A.GEN_AI_TOOL_CALL_ID, "jsonrpc.request.id"),
    # the semconv span name, and the MCP Python SDK's transport span (no gen_ai.tool.name on it)
    span_name_prefixes=("tools/call ", "MCP send tools/call "),
)


@dataclass(frozen=True, slots=True)
class GenAIConvention(AttributeConvention):
    """pydantic-ai records arguments it could not parse as ``{"INVALID_JSON": "<raw>"}``: a parse failure."""

    def extract(self, span: ReadableSpan, attrs: Attrs) -> ToolCallRecord | None:
        record = attribute_record(self, span, attrs)  # ``AttributeConvention.extract``'s body, compiled
        raw = record.raw_arguments if record is not None else None
        if record is not None and isinstance(raw, str) and raw.startswith('{"INVALID_JSON"'):
            value = _json.try_loads(raw)
            if isinstance(value, dict) and set(value) == {"INVALID_JSON"}:
                record.raw_arguments = value["INVALID_JSON"]
                record.arguments_unparseable = True
        return record


# pydantic-ai's current spans use these keys; its older format ("running tool") keeps the GenAI operation
# name but records `tool_arguments` / `tool_response`.
GENAI = GenAIConvention(
    name="genai",
    detect_key=A.GEN_AI_OPERATION_NAME,
    detect_values=frozenset({"execute_tool"}),
    name_keys=(A.GEN_AI_TOOL_NAME,),
    # Google ADK's legacy schema (``ADK_TELEMETRY_SCHEMA_VERSION_OPT_IN``) keeps them under its own namespace; every
    # other instrumentation's own places are its row in ``shapes.py``
    argument_keys=(A.GEN_AI_TOOL_CALL_ARGUMENTS, A.PYDANTIC_AI_TOOL_ARGUMENTS, "gcp.vertex.agent.tool_call_args"),
    result_keys=(A.GEN_AI_TOOL_CALL_RESULT, A.PYDANTIC_AI_TOOL_RESPONSE, "gcp.vertex.agent.tool_response"),
    schema_keys=(A.GEN_AI_TOOL_JSON_SCHEMA,),  # Strands: the tool's JSON Schema on every tool span
    span_name_prefixes=("execute_tool ",),
)


@dataclass(frozen=True, slots=True)
class SpanNameConvention(AttributeConvention):
    """Detected by span name: pydantic-ai releases older than its GenAI operation name."""

    @property
    def detect_keys(self) -> tuple[str, ...]:
        return (A.GEN_AI_TOOL_NAME,)

    def match(self, span: ReadableSpan, attrs: Attrs) -> bool:
        return span.name in self.detect_values and A.GEN_AI_TOOL_NAME in attrs


@dataclass(frozen=True, slots=True)
class PydanticAILegacyConvention(SpanNameConvention, GenAIConvention):
    pass


PYDANTIC_AI_LEGACY = PydanticAILegacyConvention(
    name="pydantic_ai",
    detect_key="",
    detect_values=frozenset({"running tool"}),
    name_keys=(A.GEN_AI_TOOL_NAME,),
    argument_keys=(A.PYDANTIC_AI_TOOL_ARGUMENTS, A.GEN_AI_TOOL_CALL_ARGUMENTS),
    result_keys=(A.PYDANTIC_AI_TOOL_RESPONSE, A.GEN_AI_TOOL_CALL_RESULT),
)

TRACELOOP = AttributeConvention(
    name="traceloop",
    detect_key=A.TRACELOOP_SPAN_KIND,
    detect_values=frozenset({"tool"}),
    name_keys=(A.TRACELOOP_ENTITY_NAME,),
    argument_keys=(A.TRACELOOP_ENTITY_INPUT,),
    result_keys=(A.TRACELOOP_ENTITY_OUTPUT,),
    unwrap_args=True,
    span_name_prefixes=(),
)

LAMINAR = AttributeConvention(
    name="laminar",
    detect_key=A.LMNR_SPAN_TYPE,
    detect_values=frozenset({"TOOL"}),
    argument_keys=(A.LMNR_SPAN_INPUT,),
    result_keys=(A.LMNR_SPAN_OUTPUT,),
    unwrap_args=True,
)

LANGFUSE = AttributeConvention(
    name="langfuse",
    detect_key=A.LANGFUSE_OBSERVATION_TYPE,
    detect_values=frozenset({"tool"}),
    argument_keys=(A.LANGFUSE_OBSERVATION_INPUT,),
    result_keys=(A.LANGFUSE_OBSERVATION_OUTPUT,),
    unwrap_args=True,
)

# The Vercel AI SDK's legacy spans (``ai.toolCall``, checked against ai 7.0 + @ai-sdk/otel 1.0 under Node in
# tests/integration/test_serve_node.py); the tool definitions and requested calls sit on its
# ``ai.generateText.doGenerate`` / ``ai.streamText.doStream`` spans (``llm_spans``).
VERCEL_AI = AttributeConvention(
    name="vercel_ai",
    detect_key=A.VERCEL_AI_OPERATION_ID,
    detect_values=frozenset({"ai.toolCall"}),
    name_keys=(A.VERCEL_AI_TOOL_CALL_NAME,),
    argument_keys=(A.VERCEL_AI_TOOL_CALL_ARGS,),
    result_keys=(A.VERCEL_AI_TOOL_CALL_RESULT, A.GEN_AI_TOOL_CALL_RESULT),
    call_id_keys=(A.VERCEL_AI_TOOL_CALL_ID,),
)

BUILTIN = (OPENINFERENCE, MCP, GENAI, PYDANTIC_AI_LEGACY, TRACELOOP, LAMINAR, LANGFUSE, VERCEL_AI)

# Conventions whose model-call span (carrying the requested calls) always ends after the tool spans it caused: a
# tool span whose id no request named claims no request by name (``online.call.claim_request``). In every convention a
# request arriving after the call it names ran is answered, not unexecuted.
LATE_REQUEST_CONVENTIONS = frozenset({VERCEL_AI.name})
