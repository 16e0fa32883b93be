"""The shape table: where each instrumentation that writes tool spans puts each part of a call, as data.

A convention decides *that* a span is a tool call (by its detection attribute: ``gen_ai.operation.name``,
``openinference.span.kind``, ...). Where the call's parts sit on it is decided by the instrumentation that wrote
the span, which its instrumentation scope names: OpenLLMetry's LangChain instrumentation writes GenAI keys but puts
its own wrapper object under ``gen_ai.tool.call.arguments``; OpenInference's smolagents instrumentation writes an
inputs map where a schema belongs. So every built-in convention reads a span through the row of its scope
(``spans.attribute_record`` applies it), whichever convention claims the span; a scope without a row is read as
its convention says.

A wrapper is never guessed from the value alone (a tool may take a parameter called ``inputs`` or ``kwargs``): it
is stripped only for a scope whose row names it, and only when the value has that wrapper's keys and no others.

Adding an instrumentation is a row here plus a recorded fixture (``tests/fixtures/frameworks/``). The rows also
say which switch turns the instrumentation's content capture on (what ``doctor`` advises, never a generic one),
where it records the definitions, and what it cannot record; ``docs/frameworks.md`` is generated from them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope

from otel_toolcall_eval import _json
from otel_toolcall_eval._sdk import span_events
from otel_toolcall_eval.records import ToolCallRecord


@dataclass(frozen=True, slots=True)
class Wrapper:
    """An object an instrumentation records around a value of the call (its arguments, or its result).

    ``keys``: every key the wrapper may have; a value with any other key is not this wrapper and is kept as
    recorded. ``value``: the keys that hold the wrapped value, the first one present and not null wins.
    ``positional``: the key of positional arguments; when it holds any, the value is kept as recorded (positional
    arguments cannot be named without the tool's signature). ``call_id``: the path to the call id inside it.
    """

    keys: frozenset[str]
    value: tuple[str, ...]
    positional: str = ""
    call_id: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ReprSlice:
    """Where an instrumentation records a part of the conversation as Python reprs instead of JSON (Haystack's
    ``Tool(...)``, ``ChatMessage(...)``): ``attribute`` holds a JSON object whose ``key`` is a list of repr strings,
    of which those of class ``cls`` are read (``conventions.reprs``: bounded, nothing evaluated)."""

    attribute: str
    key: str
    cls: str


@dataclass(frozen=True, slots=True)
class Shape:
    """One instrumentation scope: where its tool spans keep each part of a call, and how to get more of them.

    The key tuples are read before the claiming convention's own keys; an empty one leaves the convention's.
    """

    scope: str  # the instrumentation scope name the spans carry, exactly
    instrumentation: str  # the package (and the version its fixture was recorded with)
    versions: str = ""  # a range of the scope's version (">=0.40,<1"); "" for any
    name_keys: tuple[str, ...] = ()
    # the tool name inside the span name, for spans that record it nowhere else (DSPy: ``get_weather.__call__``):
    # a regular expression whose first group is the name, used only when the attributes give no name
    name_in_span_name: str = ""
    argument_keys: tuple[str, ...] = ()
    result_keys: tuple[str, ...] = ()
    call_id_keys: tuple[str, ...] = ()
    arguments_wrapper: Wrapper | None = None
    result_wrapper: Wrapper | None = None
    # False: the tool span's "schema" attribute holds something else (smolagents' inputs map, Agno's arguments)
    schema_on_span: bool = True
    # arguments and result as span events (Strands' default mode): ``gen_ai.tool.message`` / ``gen_ai.choice``
    content_in_events: bool = False
    # its LLM spans' ``input.value`` is the Anthropic Messages request as sent: the ``is_error`` flag of each tool
    # result there (``llm_spans.tool_replies``), for calls scored from the requests (``engine.requested``)
    anthropic_request_body: bool = False
    # False: its spans cannot record a tool's error flag (OpenLLMetry's Anthropic instrumentation drops a
    # ``tool_result``'s ``is_error``; the MCP SDK's client span has no ``isError``), so a failed call reads as a
    # success there: its outcome is read from the reply the next model request carries back for its call id
    # (``checks.outcome.error_reply``, then the unknown-tool and rejection texts), for this scope only
    records_error_flag: bool = True
    # its requests and replies carry no call ids (Haystack): a request's calls and the next requests' tool messages
    # are matched by position, the k-th tool message of a conversation answering the k-th call it requested (both
    # get the id ``@<conversation>.<epoch>.<k>``: ``engine.requested.Conversations``), within one conversation
    # (``conversation``); a request whose messages do not extend the previous one's (a trimmed or rewritten history:
    # Haystack's ``CompactionHook``) starts a new epoch, and the calls waiting before it stay unmatched
    # (``trace.unmatched_requests``), never matched across the break
    positional_calls: bool = False
    # with ``positional_calls``, what one conversation is: "parent", the model spans of this scope under one parent
    # span (Haystack's ``Agent.run``: one per run of an agent, however many agents a trace holds); "trace", the whole
    # trace (where each request has a parent of its own, LangGraph's per-step node spans: two agents in one trace
    # would share the positions, and break each other's history)
    conversation: str = "trace"
    # the tool definitions offered, as reprs on its LLM spans (Haystack's ``Tool(name=, description=, parameters=)``)
    definitions_repr: ReprSlice | None = None
    # the replies a request carries back, as reprs of its messages whose content holds ``ToolCallResult(result=,
    # error=)`` (Haystack): each reply's text and error flag, in position order
    replies_repr: ReprSlice | None = None
    # an attribute listing the names of the tools offered, comma-separated, on a span that is no model request
    # (Semantic Kernel's ``AutoFunctionInvocationLoop``: ``sk.available_functions``): names only, no schema
    definitions_names: str = ""
    # what a tool span of this scope without a tool name is, when it is not a call (BeeAI: an event of the call
    # above it); "" reads such a span as a call, whose empty name ``doctor`` reports
    nameless_spans: str = ""
    # the names of its model-kind spans that are no model request, as a regular expression (LlamaIndex marks its
    # ``_prepare_chat_with_tools`` step ``LLM`` beside each request): neither a model call nor a turn
    not_requests: str = ""
    definitions: str = ""  # where the tool definitions the model saw are recorded
    content_switch: str = ""  # the exact environment variable or SDK option that records arguments and results
    cannot_record: str = ""  # what no setting of this instrumentation records
    _pattern: re.Pattern[str] | None = field(default=None, init=False, repr=False, compare=False)
    _not_requests: re.Pattern[str] | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.name_in_span_name:
            object.__setattr__(self, "_pattern", re.compile(self.name_in_span_name))
        if self.not_requests:
            object.__setattr__(self, "_not_requests", re.compile(self.not_requests))

    def is_request(self, span_name: str) -> bool:
        """Whether a model-kind span of this scope named ``span_name`` is a model request (by its name only)."""
        return self._not_requests is None or self._not_requests.search(span_name) is None

    def covers(self, version: str | None) -> bool:
        """Whether the scope's version is in this row's range (a scope without a version is, when a range is set,
        read by the row whose range is empty)."""
        if not self.versions:
            return True
        if not version:
            return False
        have = _version(version)
        for bound in self.versions.split(","):
            bound = bound.strip()
            op = bound[:2] if bound[:2] in (">=", "<=", "==") else bound[:1]
            want = _version(bound[len(op) :])
            ok = {
                ">=": have >= want,
                "<=": have <= want,
                "==": have == want,
                ">": have > want,
                "<": have < want,
            }.get(op, False)
            if not ok:
                return False
        return True


def _version(text: str) -> tuple[int, ...]:
    """``"0.62.4"`` -> ``(0, 62, 4)``; a part's leading digits only (``"3b0"`` -> 3)."""
    out = []
    for part in text.strip().split("."):
        digits = re.match(r"\d*", part)
        out.append(int(digits.group(0)) if digits and digits.group(0) else 0)
    return tuple(out)


OI_SWITCH = (
    "unset `OPENINFERENCE_HIDE_INPUTS` / `OPENINFERENCE_HIDE_OUTPUTS` "
    "(or `TraceConfig(hide_inputs=False, hide_outputs=False)`)"
)
OI_JS_SWITCH = (
    "unset `OPENINFERENCE_HIDE_INPUTS` / `OPENINFERENCE_HIDE_OUTPUTS` (or `traceConfig: {hideInputs: false}`)"
)
GENAI_SWITCH = (
    "`OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental` + "
    "`OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=SPAN_ONLY`"
)
TRACELOOP_SWITCH = "`TRACELOOP_TRACE_CONTENT=true` (OpenLLMetry's default; `false` records no content)"
OI_LLM_TOOLS = "the LLM spans' `llm.tools.N.tool.json_schema`"

SHAPES: tuple[Shape, ...] = (
    Shape(
        "openinference.instrumentation.llama_index",
        "openinference-instrumentation-llama-index 4.6",
        arguments_wrapper=Wrapper(frozenset({"kwargs"}), ("kwargs",)),
        not_requests=r"\._prepare_chat_with_tools$",
        definitions="the tool span's `tool.parameters` (its `llm.tools` holds object reprs)",
        content_switch=OI_SWITCH,
    ),
    Shape(
        "openinference.instrumentation.smolagents",
        "openinference-instrumentation-smolagents 0.1.43",
        arguments_wrapper=Wrapper(frozenset({"args", "kwargs", "sanitize_inputs_outputs"}), ("kwargs",), "args"),
        schema_on_span=False,  # its ``tool.parameters`` is the tool's ``inputs`` map, not a JSON Schema
        definitions=OI_LLM_TOOLS,
        content_switch=OI_SWITCH,
        cannot_record="the call id of the reply to a call of a tool the agent lacks (a tool message without one): "
        "that request counts only in `trace.unknown_tool_requests`",
    ),
    Shape(
        "openinference.instrumentation.openai_agents",
        "openinference-instrumentation-openai-agents 2.6",
        definitions="the response spans' `llm.tools`",
        content_switch=OI_SWITCH,
        cannot_record="the SDK's own rejection of invalid arguments (redacted: an execution failure); a reply to a "
        "call of a tool the agent lacks (the SDK ends the run: that request counts only in "
        "`trace.unknown_tool_requests`)",
    ),
    Shape(
        "openinference.instrumentation.langchain",
        "openinference-instrumentation-langchain 0.1.80",
        definitions=OI_LLM_TOOLS,
        content_switch=OI_SWITCH,
        cannot_record="call ids on tool spans (batches are matched by name)",
    ),
    Shape(
        "openinference.instrumentation.crewai",
        "openinference-instrumentation-crewai 1.1 (wrapper mode)",
        definitions="the OpenAI instrumentation's chat spans (`llm.tools`)",
        content_switch=OI_SWITCH,
    ),
    Shape(
        "openinference.instrumentation.crewai._event_listener",
        "openinference-instrumentation-crewai 1.1 (`use_event_listener=True`)",
        definitions="CrewAI's own `llm.tools`, whose parameters are Python reprs (names only)",
        content_switch="the instrumentor's default (wrapper) mode, `CrewAIInstrumentor().instrument()` without "
        "`use_event_listener`, plus `OpenAIInstrumentor().instrument()` on its LLM: the chat spans carry the "
        "schemas; " + OI_SWITCH,
        cannot_record="JSON Schemas of the tools",
    ),
    Shape(
        "@arizeai/openinference-instrumentation-langchain",
        "@arizeai/openinference-instrumentation-langchain 4.1",
        # no call ids on its LLM spans' requested calls or tool messages: matched by position
        positional_calls=True,
        definitions=OI_LLM_TOOLS,
        content_switch=OI_JS_SWITCH,
        cannot_record="call ids (a request and its reply are matched by position: the k-th tool message of a "
        "conversation answers its k-th call; one conversation per trace)",
    ),
    Shape(
        "@arizeai/openinference-instrumentation-openai-agents",
        "@arizeai/openinference-instrumentation-openai-agents 0.2",
        definitions="the response spans' `llm.tools`",
        content_switch=OI_JS_SWITCH,
    ),
    Shape(
        "strands.telemetry.tracer",
        "strands-agents 1.62 (native)",
        # elsewhere ``gen_ai.tool.message`` is a tool *result* message: read as the arguments for this scope only
        content_in_events=True,
        definitions="the root `invoke_agent` span: `gen_ai.agent.tools` (names), or `gen_ai.tool.definitions` "
        "with `gen_ai_tool_definitions` opted in; each tool span's `gen_ai.tool.json_schema`",
        content_switch="arguments and results are recorded by default (span events); "
        "`OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental,gen_ai_tool_definitions` puts them and the "
        "definitions on attributes",
    ),
    Shape(
        "autogen-core",
        "autogen-core 0.7.5 (native tool spans)",
        definitions="none (the model client's chat spans, through opentelemetry-instrumentation-openai-v2, carry "
        "the requested calls)",
        content_switch=f"{GENAI_SWITCH} with opentelemetry-instrumentation-openai-v2 on the model client "
        "(arguments by call id; AutoGen records no schema)",
        cannot_record="arguments, results or definitions on its own spans",
    ),
    Shape(
        "opentelemetry.util.genai.handler",
        "opentelemetry-util-genai 1.1b0 (`TelemetryHandler.tool`)",
        definitions="the model instrumentation's chat spans, where it records them (openai-v2 2.4b0 records none)",
        content_switch=f"{GENAI_SWITCH}; the tools' schemas: list them under `tools:` in the config",
        cannot_record="the request's tool definitions",
    ),
    Shape(
        "gcp.vertex.agent",
        "google-adk 2.13 (native)",
        definitions="every `generate_content` span's `gen_ai.tool.definitions`; legacy: `call_llm`'s "
        "`gcp.vertex.agent.llm_request`",
        content_switch=GENAI_SWITCH,
    ),
    Shape(
        "openinference.instrumentation.dspy",
        "openinference-instrumentation-dspy 0.1.48",
        # ``Tool.__call__(**kwargs)`` bound by name: ``{"kwargs": {...}}``; no ``tool.name``, the span is
        # ``<tool>.__call__`` (``<tool>.acall``)
        name_in_span_name=r"^(.+)\.(?:__call__|acall)$",
        arguments_wrapper=Wrapper(frozenset({"kwargs"}), ("kwargs",)),
        definitions="none: ReAct lists the tools in its prompt text, not as definitions",
        content_switch=OI_SWITCH,
        cannot_record="tool definitions or requested calls (ReAct parses them from text): no schema, tool-list or "
        "unknown-tool verdict",
    ),
    Shape(
        "com.anthropic.sdk.python",
        "anthropic 2.10 (the SDK's own tracing)",
        # the tool's result as content blocks (``[{"type": "text", "text": ...}]``), its error text among them
        result_keys=("anthropic.tool_result.content",),
        definitions="none: the SDK records no tool definitions",
        content_switch="`ANTHROPIC_OPEN_TELEMETRY_TRACES_CONTENT_MODE=content` (or the client option "
        '`open_telemetry={"traces": {"content_mode": "content"}}`)',
        cannot_record="tool definitions (no schema or tool-list verdict); by default any error text (a rejected "
        "input and a raising tool are both `tool_error`)",
    ),
    Shape(
        "openinference.instrumentation.anthropic",
        "openinference-instrumentation-anthropic 3.1",
        anthropic_request_body=True,
        definitions=OI_LLM_TOOLS + " (the first request of a message thread only)",
        content_switch=OI_SWITCH,
        cannot_record="tool runs (model calls only): requested calls are scored from the requests, each outcome "
        "from the next request's `tool_result` (its `is_error` read from the request body in `input.value`)",
    ),
    Shape(
        "opentelemetry.instrumentation.anthropic",
        "opentelemetry-instrumentation-anthropic 0.62 (OpenLLMetry)",
        definitions="the chat spans' `gen_ai.tool.definitions` (the first request of a message thread only)",
        content_switch=TRACELOOP_SWITCH,
        records_error_flag=False,
        cannot_record="tool runs (model calls only): requested calls are scored from the requests; a tool "
        "result's `is_error` (its GenAI `tool_call_response` part has none): a call's error is read from the reply "
        "text instead (the tool runner's `repr` of the exception)",
    ),
    Shape(
        "opentelemetry.instrumentation.google_genai",
        "opentelemetry-instrumentation-google-genai 1.3b0 (google-genai 2.x)",
        definitions="the `generate_content` span's `gen_ai.tool.definitions` (`parameters` null), which wraps the "
        "whole automatic-function-calling loop and ends after its tool spans (checked on the root)",
        content_switch=GENAI_SWITCH,
        cannot_record="tool schemas (parameters null); each model request of an automatic-function-calling loop "
        "(one span for the loop)",
    ),
    Shape(
        "openinference.instrumentation.agno",
        "openinference-instrumentation-agno 1.0.15",
        # it writes the call's arguments to ``tool.parameters`` too (OpenInference's place for the tool's schema),
        # where ``hide_inputs`` leaves them: neither a schema nor, when inputs are hidden, evidence a user allowed
        schema_on_span=False,
        definitions=OI_LLM_TOOLS,
        content_switch=OI_SWITCH,
        cannot_record="the unknown tool's call (no span; its request is on the LLM span with content only)",
    ),
    Shape(
        "opentelemetry.instrumentation.mcp.instrumentation",
        "opentelemetry-instrumentation-mcp 0.62 (OpenLLMetry; MCP 1.x client sessions)",
        # ``traceloop.entity.input`` = ``{"tool_name", "arguments"}``; output ``{"result", "is_error"}``
        arguments_wrapper=Wrapper(frozenset({"tool_name", "arguments"}), ("arguments",)),
        result_wrapper=Wrapper(frozenset({"result", "is_error"}), ("result",)),
        definitions="only in the `tools/list.mcp` span's output (not read): the model client's spans, when it is "
        "instrumented too",
        content_switch=TRACELOOP_SWITCH,
        cannot_record="the error text without content (a rejected input, an unknown tool and a raising tool are all "
        "`tool_error`)",
    ),
    Shape(
        "mcp-python-sdk",
        "mcp 2.3 (the MCP Python SDK's own spans: server `tools/call <tool>`, client `MCP send tools/call <tool>`)",
        definitions="none on its spans (the `tools/list` result is not recorded): the model client's chat spans, "
        "when it is instrumented",
        content_switch="none in the SDK: instrument the agent's model client with its content on (OpenInference's "
        "or OpenLLMetry's); a server span borrows the arguments of the one waiting request of its tool's name",
        cannot_record="arguments, results and error texts (a rejected input, an unknown tool and a raising tool are "
        "all `error.type = tool_error` on the server span); the model's call id; on the client span any error of an "
        "`isError` result: a span that reads as a success is held until the reply the model's next request carries "
        "back for the call, which gives it its outcome (`late_outcome.read`; the root: `trace.late_outcome.*`), or "
        "goes out as read when a bound releases it first (a server in its own process: its failures are on its own "
        "spans, export those too)",
        records_error_flag=False,
    ),
    Shape(
        "opentelemetry.instrumentation.langchain",
        "opentelemetry-instrumentation-langchain 0.62 (OpenLLMetry)",
        # ``{"input_str", "tags", "metadata", "inputs", "kwargs": {"tool_call_id", ...}}`` under both
        # ``traceloop.entity.input`` and ``gen_ai.tool.call.arguments``; the result as ``{"output", "kwargs"}``
        arguments_wrapper=Wrapper(
            frozenset({"input_str", "tags", "metadata", "inputs", "kwargs"}),
            ("inputs", "input_str"),
            call_id=("kwargs", "tool_call_id"),
        ),
        result_wrapper=Wrapper(frozenset({"output", "kwargs"}), ("output",)),
        definitions="the chat spans' `gen_ai.tool.definitions`",
        content_switch=TRACELOOP_SWITCH,
    ),
    Shape(
        "semantic_kernel.functions.kernel_function",
        "semantic-kernel 1.45 (its own GenAI diagnostics)",
        definitions="the root `invoke_agent` span's `gen_ai.tool.definitions` (an agent whose kernel has plugins), "
        "which ends after every tool span: names checked there (`trace.unlisted_calls`), the recorded arguments "
        "validated against its schemas then (`trace.late_schema.*`)",
        content_switch="`SEMANTICKERNEL_EXPERIMENTAL_GENAI_ENABLE_OTEL_DIAGNOSTICS_SENSITIVE=true` (read when SK is "
        "imported; `SEMANTICKERNEL_EXPERIMENTAL_GENAI_ENABLE_OTEL_DIAGNOSTICS=true` traces without content)",
        cannot_record="requested calls and the replies to them (SK writes chat messages as log records, not on "
        "spans): the call of a tool the agent does not have runs no span and is unseen; without an agent "
        "(`Kernel` with automatic function calling) no schemas, only the names in "
        "`AutoFunctionInvocationLoop`'s `sk.available_functions` (its own row)",
    ),
    Shape(
        "semantic_kernel.connectors.ai.chat_completion_client_base",
        "semantic-kernel 1.45 (its `AutoFunctionInvocationLoop` span, written with or without its diagnostics)",
        definitions_names="sk.available_functions",
        definitions="the `AutoFunctionInvocationLoop` span's `sk.available_functions`: the names of the functions "
        "offered (a `Kernel` with automatic function calling, no agent), no schemas; it ends after the loop's tool "
        "spans (names checked then: `trace.unlisted_calls`)",
        content_switch="none: written whatever the diagnostics switches say",
        cannot_record="the functions' schemas (names only)",
    ),
    Shape(
        "openinference.instrumentation.haystack",
        "openinference-instrumentation-haystack 0.1.46 (haystack-ai 3.4)",
        positional_calls=True,
        conversation="parent",
        definitions_repr=ReprSlice("input.value", "tools", "Tool"),
        replies_repr=ReprSlice("input.value", "messages", "ToolCallResult"),
        definitions="the LLM spans' `input.value`: its `tools`, each a `Tool(name=, description=, parameters=)` "
        "Python repr, read bounded and never evaluated (`conventions.reprs`)",
        content_switch=OI_SWITCH,
        cannot_record="tool runs (its `Agent` invokes the tools outside any component span) and call ids: each "
        "requested call is scored from the requests, matched to the next request's tool message by position (the "
        "k-th tool message of a conversation answers its k-th call; a conversation is one `Agent.run`, the parent "
        "of its model spans, so two agents in a trace count apart), its outcome from that message's "
        "`ToolCallResult(result=, error=)` repr in `input.value`. A request whose messages do not extend the "
        "previous one's (a trimmed history: its `CompactionHook`, or one rewritten) breaks the count: the calls "
        "still waiting there are not matched across it but counted (`trace.unmatched_requests`, "
        "`toolcall_eval.coverage.suspect{reason=position_unmatched}`, `doctor`); messages are compared by their "
        "reprs, or by what the indexed messages record where the reprs are not (hidden, or over 1 MiB)",
    ),
    Shape(
        "openinference.instrumentation.beeai",
        "openinference-instrumentation-beeai 0.1.30 (beeai-framework 0.1.85)",
        # ``input.value`` is the tool run's start event: ``{"input": {...arguments}, "options": ...}``
        arguments_wrapper=Wrapper(frozenset({"input", "options"}), ("input",)),
        # each ``ToolErrorEvent`` / ``ToolRetryEvent`` of a run becomes a child span of the same kind (TOOL), named
        # after the event (``error``, ``retry``), with no ``tool.name`` and the event as its input: a record of the
        # call above it, which carries the same exception itself, so counting it would count one call twice
        nameless_spans="a tool run's error or retry event (a child span named `error` / `retry`), not a call",
        definitions=OI_LLM_TOOLS + "; each tool span's `tool.json_schema`",
        content_switch=OI_SWITCH,
        cannot_record="the request of a tool the agent does not have: its chat model rejects it and asks again "
        "inside one model run, whose span records the second answer only (the call unseen, one model call fewer)",
    ),
    Shape(
        "pydantic-ai",
        "pydantic-ai-slim 2.68 (native; also through `logfire.instrument_pydantic_ai()`)",
        definitions="the `invoke_agent` / chat spans' `gen_ai.tool.definitions`",
        content_switch="`InstrumentationSettings(include_content=True)` (the default; through Logfire "
        "`logfire.instrument_pydantic_ai(include_content=True)`)",
        cannot_record="requests of a tool the agent does not have as spans (its request on the chat span is the "
        "evidence)",
    ),
    Shape(
        "litellm",
        'litellm 1.110 (its OTel callback, `litellm.callbacks = ["otel"]`)',
        definitions="`llm.request.functions.N.*` where it writes each request's chat attributes: onto the span "
        "current at the call (an application's root: the last request logged overwrites the others, and the root "
        "ends after every tool span), or with `USE_OTEL_LITELLM_REQUEST_SPAN=true` a `litellm_request` span per "
        "request",
        content_switch="recorded by default; `litellm.turn_off_message_logging = True` (or "
        "`OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=NO_CONTENT`) hides messages and tools",
        cannot_record="tool runs (model calls only: the application's own tool spans carry the calls); inside an "
        "application span, every request but the last one logged (one model call, its tokens, and schemas checked "
        "on the root only: set `USE_OTEL_LITELLM_REQUEST_SPAN=true`)",
    ),
)

_BY_SCOPE: dict[str, tuple[Shape, ...]] = {}
for _row in SHAPES:
    _BY_SCOPE[_row.scope] = (*_BY_SCOPE.get(_row.scope, ()), _row)


def shape_for(scope: InstrumentationScope | None) -> Shape | None:
    """The row of the instrumentation scope that wrote a span (by name, then version), or None."""
    if scope is None:
        return None
    rows = _BY_SCOPE.get(scope.name)
    if rows is None:
        return None
    for row in rows:
        if row.covers(scope.version):
            return row
    return None


def shape_named(scope: str) -> Shape | None:
    """The first row of a scope name (what ``doctor`` and the docs look up)."""
    rows = _BY_SCOPE.get(scope)
    return rows[0] if rows else None


def apply(shape: Shape, record: ToolCallRecord, span: ReadableSpan, attrs: Mapping[str, Any]) -> bool:
    """Read ``record`` again where ``shape`` says its instrumentation put each part; False when the span is not a
    call at all (a nameless span of a scope whose row says what those are)."""
    for key in shape.argument_keys:
        if key in attrs:
            record.raw_arguments = attrs[key]
            break
    for key in shape.result_keys:
        if key in attrs:
            record.result, record.result_recorded = attrs[key], True
            break
    for key in shape.call_id_keys:
        if key in attrs and attrs[key] is not None:
            record.call_id = str(attrs[key])
            break
    if not record.name and shape._pattern is not None:
        match = shape._pattern.search(span.name or "")
        if match:
            record.name = match.group(1)
    if not record.name and shape.nameless_spans:
        return False
    if shape.content_in_events and record.raw_arguments is None:
        _content_from_events(span, record)
    wrapper = shape.arguments_wrapper
    if wrapper is not None and record.raw_arguments is not None:
        value, call_id = unwrap(record.raw_arguments, wrapper)
        if value is not _KEPT:
            record.raw_arguments = value
            if record.call_id is None and call_id is not None:
                record.call_id = call_id
    wrapper = shape.result_wrapper
    if wrapper is not None and record.result_recorded and record.result is not None:
        value, _ = unwrap(record.result, wrapper)
        if value is not _KEPT:
            record.result = value
    if not shape.schema_on_span:
        record.span_schema = None
    return True


_KEPT: Any = object()


def unwrap(raw: Any, wrapper: Wrapper) -> tuple[Any, str | None]:
    """The wrapped value and the call id inside it; ``_KEPT`` when ``raw`` is not this wrapper (another key, none
    of its value keys, or positional arguments present)."""
    value = _json.try_loads(raw)
    if not isinstance(value, dict) or not value or not set(value) <= wrapper.keys:
        return _KEPT, None
    if wrapper.positional and value.get(wrapper.positional):
        return _KEPT, None
    inner: Any = _KEPT
    for key in wrapper.value:
        if value.get(key) is not None:
            inner = value[key]
            break
    if inner is _KEPT:
        return _KEPT, None
    node: Any = value
    for step in wrapper.call_id:
        node = node.get(step) if isinstance(node, dict) else None
    call_id = None if not wrapper.call_id or node is None or isinstance(node, (dict, list)) else str(node)
    return inner, call_id


def _content_from_events(span: ReadableSpan, record: ToolCallRecord) -> None:
    for event in span_events(span):
        ev = event.attributes or {}
        if event.name == "gen_ai.tool.message" and record.raw_arguments is None and "content" in ev:
            record.raw_arguments = ev["content"]
        elif event.name == "gen_ai.choice" and not record.result_recorded and "message" in ev:
            record.result, record.result_recorded = ev["message"], True
