"""The built-in conventions, each checked against the instrumentation's real output (see tests)."""

from __future__ import annotations

from dataclasses import dataclass

from opentelemetry.sdk.trace import ReadableSpan

from otel_toolcall_eval import _json
from otel_toolcall_eval import attributes as A
from otel_toolcall_eval.conventions.base import AttributeConvention, Attrs
from otel_toolcall_eval.records import ToolCallRecord

# OpenInference: `input.value` is preferred over `gen_ai.tool.call.arguments`, which one release
# (openinference-instrumentation 0.1.72 with its GenAI option) fills with the tool's schema.


@dataclass(frozen=True, slots=True)
class OpenInferenceConvention(AttributeConvention):
    def extract(self, span: ReadableSpan, attrs: Attrs) -> ToolCallRecord | None:
        # OpenAI Agents handoffs are TOOL spans named "handoff to <agent>" with no tool.name: not tool calls.
        if A.OPENINFERENCE_TOOL_NAME not in attrs and (span.name or "").startswith("handoff"):
            return None
        return AttributeConvention.extract(self, span, attrs)


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
        record = AttributeConvention.extract(self, span, attrs)
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
    argument_keys=(A.GEN_AI_TOOL_CALL_ARGUMENTS, A.PYDANTIC_AI_TOOL_ARGUMENTS),
    result_keys=(A.GEN_AI_TOOL_CALL_RESULT, A.PYDANTIC_AI_TOOL_RESPONSE),
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

BUILTIN = (OPENINFERENCE, MCP, GENAI, PYDANTIC_AI_LEGACY, TRACELOOP, LAMINAR, LANGFUSE)
