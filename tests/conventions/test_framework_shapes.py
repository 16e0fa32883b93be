"""Span shapes of real frameworks that were scored wrongly (issue 13), one rule at a time.

The recorded end-to-end runs are in ``conventions/test_framework_fixtures.py``; these pin each rule on its own, including the
cases where a rule must NOT apply (a wrapper is unwrapped only for the instrumentation known to write it).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, Status, StatusCode, TraceFlags

from otel_toolcall_eval.checks.outcome import reports_input_rejected, reports_unknown_tool
from otel_toolcall_eval.conventions import default_registry
from otel_toolcall_eval.conventions.base import is_json_schema
from otel_toolcall_eval.conventions.llm_spans import DefinitionCache, tool_definitions, unknown_tool_replies
from otel_toolcall_eval.records import ErrorEvidence, ToolCallRecord
from tests.helpers import WEATHER_SCHEMA, WEATHER_TOOL, chat_span, make_pipeline, scores, tool_span

LLAMA = "openinference.instrumentation.llama_index"
SMOL = "openinference.instrumentation.smolagents"


def _span(
    attrs: dict[str, Any],
    scope: str = "x",
    *,
    name: str = "tool",
    events: list[Event] | None = None,
    error: str | None = None,
) -> ReadableSpan:
    return ReadableSpan(
        name=name,
        context=SpanContext(0x1234, 0x99, False, trace_flags=TraceFlags(TraceFlags.SAMPLED)),
        attributes=attrs,
        events=events or [],
        status=Status(StatusCode.ERROR, error) if error else Status(StatusCode.UNSET),
        instrumentation_scope=InstrumentationScope(scope),
    )


def _extract(span: ReadableSpan) -> ToolCallRecord:
    convention = default_registry().recognise(span, span.attributes or {})
    assert convention is not None
    record = convention.extract(span, span.attributes or {})
    assert record is not None
    return record


def _oi_tool(input_value: str, **extra: Any) -> dict[str, Any]:
    return {"openinference.span.kind": "TOOL", "tool.name": "get_weather", "input.value": input_value, **extra}


# --- wrappers, by instrumentation scope only ----------------------------------------------------------


def test_llama_index_kwargs_wrapper_is_unwrapped() -> None:
    record = _extract(_span(_oi_tool('{"kwargs": {"city": "Paris"}}'), LLAMA))
    assert record.raw_arguments == {"city": "Paris"}


def test_smolagents_wrapper_is_unwrapped_and_its_inputs_map_is_not_a_schema() -> None:
    inputs_map = {"city": {"type": "string", "description": "the city"}}
    raw = '{"args": [], "sanitize_inputs_outputs": true, "kwargs": {"city": "Paris"}}'
    record = _extract(_span(_oi_tool(raw, **{"tool.parameters": json.dumps(inputs_map)}), SMOL))
    assert record.raw_arguments == {"city": "Paris"}
    assert record.span_schema is None


@pytest.mark.parametrize("scope", ["openinference.instrumentation.openai", "x"])
def test_a_kwargs_argument_of_another_instrumentation_is_the_argument(scope: str) -> None:
    """A tool may take a parameter named ``kwargs``: only the instrumentations known to wrap are unwrapped."""
    record = _extract(_span(_oi_tool('{"kwargs": {"city": "Paris"}}'), scope))
    assert record.raw_arguments == '{"kwargs": {"city": "Paris"}}'


def test_positional_arguments_in_a_wrapper_stay_as_recorded() -> None:
    raw = '{"args": ["Paris"], "sanitize_inputs_outputs": true, "kwargs": {}}'
    assert _extract(_span(_oi_tool(raw), SMOL)).raw_arguments == raw


def test_openinference_redacted_values_are_no_evidence() -> None:
    record = _extract(_span(_oi_tool("__REDACTED__", **{"output.value": "__REDACTED__"}), LLAMA))
    assert record.raw_arguments is None
    assert record.result_recorded is False


@pytest.mark.parametrize(
    ("schema", "is_schema"),
    [
        (WEATHER_SCHEMA, True),
        ({"type": ["object", "null"]}, True),
        ({"anyOf": [{"type": "object"}]}, True),
        ({"city": {"type": "string"}, "unit": {"type": "string", "enum": ["c"]}}, False),  # smolagents' inputs
        ({"type": {"type": "string"}}, False),  # an inputs map with a parameter named "type"
        ({}, False),
        ("not a dict", False),
    ],
)
def test_only_a_json_schema_counts_as_a_tool_span_schema(schema: Any, is_schema: bool) -> None:
    assert is_json_schema(schema) is is_schema


def test_a_tool_span_parameter_map_never_beats_the_llm_spans_schema() -> None:
    """Any instrumentation: a ``tool.parameters`` that is not a JSON Schema is ignored, so the definitions win."""
    p = make_pipeline()
    schema = {**WEATHER_SCHEMA, "properties": {"city": {"type": "string", "enum": ["Paris"]}}}
    with p.tracer.start_as_current_span("agent"):
        chat_span(p.tracer, [{**WEATHER_TOOL, "parameters": schema}])
        attrs = _oi_tool('{"city": "Oslo"}', **{"tool.parameters": json.dumps({"city": {"type": "string"}})})
        with p.tracer.start_as_current_span("get_weather", attributes=attrs):
            pass
    s = scores(p.one("get_weather"))
    assert s["schema_valid"] is False and s["outcome"] == "malformed_call"


# --- the shape table: rows keyed by scope (and version), whichever convention claims the span ----------

OPENLLMETRY_LC = "opentelemetry.instrumentation.langchain"


def _openllmetry_tool(arguments: dict[str, Any], result: Any = None) -> dict[str, Any]:
    attrs: dict[str, Any] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "get_weather",
        "traceloop.span.kind": "tool",
        "gen_ai.tool.call.arguments": json.dumps(arguments),
    }
    if result is not None:
        attrs["gen_ai.tool.call.result"] = json.dumps(result)
    return attrs


def test_openllmetry_langchain_wrapper_under_genai_keys_is_unwrapped_with_its_call_id() -> None:
    wrapper = {
        "input_str": "{'city': 'Paris'}",
        "tags": [],
        "metadata": {},
        "inputs": {"city": "Paris"},
        "kwargs": {"color": "green", "name": None, "tool_call_id": "call_1"},
    }
    result = {"output": "sunny", "kwargs": {"tags": []}}
    record = _extract(_span(_openllmetry_tool(wrapper, result), OPENLLMETRY_LC))
    assert record.convention == "genai"
    assert record.raw_arguments == {"city": "Paris"}
    assert record.call_id == "call_1"
    assert record.result == "sunny"


@pytest.mark.parametrize("scope", [OPENLLMETRY_LC, "opentelemetry.instrumentation.openai_v2", "x"])
def test_a_parameter_called_inputs_is_never_a_wrapper(scope: str) -> None:
    """A tool taking ``inputs`` and ``tags``: the keys are not all the wrapper's, or the scope wraps nothing."""
    arguments = {"inputs": {"city": "Paris"}, "tags": ["x"], "limit": 3}
    record = _extract(_span(_openllmetry_tool(arguments), scope))
    assert json.loads(record.raw_arguments) == arguments


def test_a_shape_row_applies_only_within_its_version_range() -> None:
    from otel_toolcall_eval.conventions.shapes import Shape

    row = Shape("s", "p", versions=">=0.40,<1")
    assert row.covers("0.62.4") and row.covers("0.40") and not row.covers("1.0") and not row.covers("0.39.9")
    assert not row.covers(None)
    assert Shape("s", "p").covers(None)


def test_every_shape_row_names_its_content_switch() -> None:
    from otel_toolcall_eval.conventions.shapes import SHAPES

    assert all(row.content_switch for row in SHAPES), [row.scope for row in SHAPES if not row.content_switch]
    assert len({(row.scope, row.versions) for row in SHAPES}) == len(SHAPES)


# --- Strands -----------------------------------------------------------------------------------------

STRANDS = "strands.telemetry.tracer"


def _strands_tool(scope: str = STRANDS) -> ReadableSpan:
    attrs = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "get_weather",
        "gen_ai.tool.json_schema": json.dumps(WEATHER_SCHEMA),
    }
    events = [
        Event("gen_ai.tool.message", {"role": "tool", "content": '{"city": "Paris"}', "id": "c1"}),
        Event("gen_ai.choice", {"message": '[{"text": "sunny"}]', "id": "c1"}),
    ]
    return _span(attrs, scope, name="execute_tool get_weather", events=events)


def test_strands_arguments_and_result_come_from_span_events() -> None:
    record = _extract(_strands_tool())
    assert record.raw_arguments == '{"city": "Paris"}'
    assert (record.result, record.result_recorded) == ('[{"text": "sunny"}]', True)
    assert record.span_schema == WEATHER_SCHEMA  # gen_ai.tool.json_schema


def test_span_events_are_read_only_for_the_instrumentation_that_writes_content_there() -> None:
    record = _extract(_strands_tool(scope="some.other.genai.instrumentation"))
    assert record.raw_arguments is None and record.result_recorded is False


def test_strands_definition_shape_and_agent_tool_names() -> None:
    attrs = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.tool.definitions": json.dumps(
            [{"name": "get_weather", "description": "w", "inputSchema": {"json": WEATHER_SCHEMA}, "outputSchema": None}]
        ),
        "gen_ai.agent.tools": json.dumps(["get_weather", "get_population"]),
    }
    defs = tool_definitions(attrs, DefinitionCache())
    assert [(d.name, d.parameters) for d in defs] == [
        ("get_weather", WEATHER_SCHEMA),
        ("get_weather", None),
        ("get_population", None),
    ]
    p = make_pipeline()
    with p.tracer.start_as_current_span("invoke_agent", attributes=attrs):
        pass  # the processor keeps the schema: a bare name from gen_ai.agent.tools does not replace it


def test_tool_list_on_a_root_that_ends_after_the_tool_spans_completes_the_verdict() -> None:
    """Strands lists the agent's tools only on the root ``invoke_agent`` span, which ends last: the calls are scored
    at once (``tool_known`` absent), and the root counts those of tools not on its list."""
    for tools, unlisted in ((["get_weather"], 0), (["get_population"], 1)):
        p = make_pipeline()
        root_attrs = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.tools": json.dumps(tools)}
        with p.tracer.start_as_current_span("invoke_agent", attributes=root_attrs):
            tool_span(p.tracer, "get_weather", {"city": "Paris"}, result="sunny")
        assert "tool_known" not in scores(p.one("execute_tool get_weather"))
        root = scores(p.one("invoke_agent"))
        assert root["trace.unlisted_calls"] == unlisted
        assert root["trace.correct"] is (unlisted == 0)


# --- error classification across frameworks -----------------------------------------------------------


@pytest.mark.parametrize(
    "message",
    [
        "Validation failed for input parameters: 1 validation error for Get_weatherTool",  # Strands
        "Arguments validation failed: unit must be one of celsius, fahrenheit",  # CrewAI
        "1 validation error for get_weatherArguments\nunit\n  Input should be 'celsius'",  # pydantic
        "Arg unit is invalid: 'kelvin' is not one of ['celsius', 'fahrenheit']",  # DSPy's Tool
        "Error: Invalid arguments for function get_weather: unit",  # anywhere in the text
        "Parameter unit is expected to be parsed to <enum 'Unit'> but is not.",  # Semantic Kernel
        "Tool input validation error",  # BeeAI's ToolInputValidationError, all that is left with outputs hidden
    ],
)
def test_a_framework_rejection_of_the_arguments_is_a_malformed_call(message: str) -> None:
    assert reports_input_rejected(ErrorEvidence(status_error=True, status_description=message), None, False)
    p = make_pipeline()
    with p.tracer.start_as_current_span("agent"):
        tool_span(p.tracer, "get_weather", None, error=ValueError(message))
    s = scores(p.one("execute_tool get_weather"))
    assert (s["outcome"], s["error_source"]) == ("malformed_call", "input_rejected")
    assert "parse_ok" not in s and "schema_valid" not in s  # no arguments recorded: no verdict on them
    assert scores(p.one("agent"))["trace.correct"] is False  # trace.correct follows the call verdicts


def test_mcp_is_error_result_of_invalid_params_is_a_rejection() -> None:
    result = "Error executing tool get_weather: 1 validation error for get_weatherArguments"
    evidence = ErrorEvidence(error_type="tool_error")
    assert reports_input_rejected(evidence, result, True)


def test_a_succeeding_tool_that_returns_the_words_is_not_a_rejection() -> None:
    assert not reports_input_rejected(ErrorEvidence(), "Validation failed for 3 of 10 rows", True)


@pytest.mark.parametrize(
    ("status", "result"),
    [
        ("Unknown tool: book_flight", None),  # Strands, status ERROR
        (None, "Tool not found"),  # CrewAI, a span marked OK
        (None, "Tool book_flight not found. Please select a tool that is available."),  # LlamaIndex
        ("Tool 'book_flight' not found in any workbench", None),  # AutoGen
        (None, "Error: tool 'book_flight' not found"),  # a quoted name followed by a space, after "Error:"
        (None, "Error: book_flight is not a valid tool, try one of [get_weather]."),  # LangGraph's ToolNode
        (None, '[{"type": "text", "text": "Unknown tool: book_flight"}]'),  # content blocks (MCP, Anthropic)
    ],
)
def test_a_framework_saying_the_tool_does_not_exist_is_an_unknown_tool(status: str | None, result: str | None) -> None:
    evidence = ErrorEvidence(status_error=status is not None, status_description=status)
    assert reports_unknown_tool(evidence, result, result is not None)
    p = make_pipeline()
    with p.tracer.start_as_current_span("agent"):
        chat_span(p.tracer, [WEATHER_TOOL, {"name": "book_flight", "parameters": {"type": "object"}}])
        extra = {"gen_ai.tool.call.result": result} if result else {}
        tool_span(p.tracer, "book_flight", {"to": "Oslo"}, error=RuntimeError(status) if status else None, extra=extra)
    s = scores(p.one("execute_tool book_flight"))
    assert (s["tool_known"], s["outcome"], s["error_source"]) == (False, "malformed_call", "unknown_tool")
    assert scores(p.one("agent"))["trace.correct"] is False


def test_an_ordinary_not_found_result_is_not_an_unknown_tool() -> None:
    assert not reports_unknown_tool(ErrorEvidence(), "Customer not found", True)
    assert not reports_unknown_tool(ErrorEvidence(), "The tool shed was not found on the map", True)
    assert not reports_unknown_tool(ErrorEvidence(), '[{"type": "text", "text": "Customer not found"}]', True)


def test_the_dspy_tool_name_comes_from_its_span_name_and_its_kwargs_wrapper_is_unwrapped() -> None:
    attrs = {"openinference.span.kind": "TOOL", "input.value": '{"kwargs": {"city": "Paris"}}'}
    record = _extract(_span(attrs, "openinference.instrumentation.dspy", name="get_weather.__call__"))
    assert (record.name, record.raw_arguments) == ("get_weather", {"city": "Paris"})
    other = _extract(_span(attrs, "openinference.instrumentation.openai", name="get_weather.__call__"))
    assert (other.name, other.raw_arguments) == ("", '{"kwargs": {"city": "Paris"}}')  # no row: nothing guessed


BEEAI = "openinference.instrumentation.beeai"


def test_beeai_start_event_wrapper_is_unwrapped_for_its_scope_only() -> None:
    raw = '{"input": {"city": "Paris"}, "options": null}'
    assert _extract(_span(_oi_tool(raw), BEEAI)).raw_arguments == {"city": "Paris"}
    assert _extract(_span(_oi_tool(raw), "x")).raw_arguments == raw  # a tool may take ``input`` and ``options``
    taking_input = '{"input": "Paris", "verbose": true}'  # another key: not the wrapper
    assert _extract(_span(_oi_tool(taking_input), BEEAI)).raw_arguments == taking_input


def _beeai_error_child() -> dict[str, Any]:
    """What the BeeAI instrumentation writes for a tool run's ``ToolErrorEvent``: a TOOL span named ``error``."""
    return {
        "openinference.span.kind": "TOOL",
        "input.value": '{"error": "Tool Error", "input": {"city": "Paris"}, "options": null}',
        "output.value": "ToolError(beeai_framework.tools.errors): Tool Error",
    }


@pytest.mark.parametrize(("scope", "is_call"), [(BEEAI, False), ("x", True)])
def test_beeai_nameless_error_span_is_its_calls_event_not_a_call(scope: str, is_call: bool) -> None:
    """Decided by the scope's row (``nameless_spans``), not by the span's name or values: another instrumentation's
    nameless tool span stays a call (with an empty name, which ``doctor`` reports)."""
    span = _span(_beeai_error_child(), scope, name="error", error="Tool Error")
    convention = default_registry().recognise(span, span.attributes or {})
    assert convention is not None
    assert (convention.extract(span, span.attributes or {}) is not None) is is_call


def test_beeai_failed_call_is_counted_once_with_its_error_child() -> None:
    p = make_pipeline()
    with p.tracer.start_as_current_span("agent"):
        attrs = _oi_tool('{"input": {"city": "Paris"}, "options": null}')
        with p.provider.get_tracer(BEEAI).start_as_current_span("get_weather", attributes=attrs) as call:
            child = p.provider.get_tracer(BEEAI).start_span("error", attributes=_beeai_error_child())
            child.set_status(Status(StatusCode.ERROR, "Tool Error"))
            child.end()
            call.set_status(Status(StatusCode.ERROR, "Tool Error"))
    assert scores(p.one("error")) == {}  # no verdict of its own
    s = scores(p.one("get_weather"))
    assert (s["outcome"], s["parse_ok"]) == ("execution_failed", True)
    root = scores(p.one("agent"))
    assert (root["trace.tool_calls"], root["trace.errors"]) == (1, 1)


def test_crewai_listener_tool_list_names_its_tools_but_its_repr_parameters_are_no_schema() -> None:
    repr_params = {"properties": {"city": "{'title': 'City', 'type': 'string'}"}, "required": ["'city'"]}
    listed = [
        {"type": "function", "function": {"name": "get_population", "parameters": repr_params}},
        {"type": "function", "function": {"name": "get_weather", "parameters": WEATHER_SCHEMA}},
    ]
    defs = tool_definitions({"openinference.span.kind": "LLM", "llm.tools": json.dumps(listed)}, DefinitionCache())
    assert [(d.name, d.parameters) for d in defs] == [("get_population", None), ("get_weather", WEATHER_SCHEMA)]
    boolean_schemas = {"properties": {"city": True}}  # a boolean subschema is a JSON Schema
    defs = tool_definitions(
        {"llm.tools": json.dumps([{"name": "t", "parameters": boolean_schemas}])}, DefinitionCache()
    )
    assert defs[0].parameters == boolean_schemas


def test_unknown_tool_reply_in_the_next_turns_input_ties_to_the_request() -> None:
    attrs = {
        "openinference.span.kind": "LLM",
        "llm.input_messages.0.message.role": "tool",
        "llm.input_messages.0.message.tool_call_id": "c2",
        "llm.input_messages.0.message.content": "Tool book_flight not found. Please select a tool that is available.",
        "llm.input_messages.1.message.role": "tool",
        "llm.input_messages.1.message.tool_call_id": "c1",
        "llm.input_messages.1.message.content": "sunny",
    }
    assert unknown_tool_replies(attrs) == ["c2"]


# --- traces without tool activity ----------------------------------------------------------------------


def test_agent_creation_and_a_bare_client_root_get_no_verdict() -> None:
    p = make_pipeline()
    with p.tracer.start_as_current_span(
        "create_agent", attributes={"gen_ai.operation.name": "create_agent", "gen_ai.tool.definitions": "[]"}
    ):
        pass
    chat_attrs = {"gen_ai.operation.name": "chat", "gen_ai.tool.definitions": json.dumps([WEATHER_TOOL])}
    with p.tracer.start_as_current_span("ChatCompletion", attributes=chat_attrs):
        pass  # an instrumented client's own root span: the model was offered tools and called none
    assert scores(p.one("create_agent")) == {}
    assert scores(p.one("ChatCompletion")) == {}


def test_a_client_root_span_requesting_calls_gets_no_verdict_but_a_turn_inside_an_agent_does() -> None:
    """CrewAI's event listener leaves the OpenAI instrumentor's chat spans outside the crew's trace: each is a root
    of its own, requesting the call the crew's tool span answers; a verdict there would count the call twice."""
    p = make_pipeline()
    chat_span(p.tracer, [WEATHER_TOOL], [("c1", "book_flight")])
    assert scores(p.one("chat model")) == {}
    p = make_pipeline()
    with p.tracer.start_as_current_span("agent"):
        chat_span(p.tracer, [WEATHER_TOOL], [("c1", "book_flight")])
    root = scores(p.one("agent"))
    assert root["trace.unknown_tool_requests"] == 1
    assert root["trace.correct"] is False


# --- arguments from the requesting LLM span -------------------------------------------------------------


def _requesting_chat(p: Any, arguments: Any, calls: list[tuple[str, str, Any]] | None = None) -> None:
    """One turn requesting ``get_weather`` with ``arguments`` as call ``c1``, or the (id, name, arguments) ``calls``."""
    calls = calls if calls is not None else [("c1", "get_weather", arguments)]
    parts = [{"type": "tool_call", "id": cid, "name": name, "arguments": args} for cid, name, args in calls]
    attrs = {
        "gen_ai.operation.name": "chat",
        "gen_ai.tool.definitions": json.dumps([WEATHER_TOOL]),
        "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": parts}]),
    }
    with p.tracer.start_as_current_span("chat", attributes=attrs):
        pass


def test_a_tool_span_without_arguments_is_scored_on_the_ones_the_model_sent_for_its_call_id() -> None:
    p = make_pipeline()
    with p.tracer.start_as_current_span("agent"):
        _requesting_chat(p, {"city": 3})
        tool_span(p.tracer, "get_weather", None, call_id="c1", result="sunny")
    s = scores(p.one("execute_tool get_weather"))
    assert (s["parse_ok"], s["schema_valid"], s["outcome"]) == (True, False, "malformed_call")


def test_the_tool_spans_own_arguments_win_and_oversized_requests_are_not_kept() -> None:
    p = make_pipeline()
    with p.tracer.start_as_current_span("agent"):
        _requesting_chat(p, {"city": 3})
        tool_span(p.tracer, "get_weather", {"city": "Paris"}, call_id="c1", result="sunny")
    assert scores(p.one("execute_tool get_weather"))["schema_valid"] is True

    from otel_toolcall_eval import EvalConfig

    p = make_pipeline(EvalConfig.from_dict({"limits": {"max_argument_bytes": 16}}))
    with p.tracer.start_as_current_span("agent"):
        _requesting_chat(p, {"city": "x" * 100})
        tool_span(p.tracer, "get_weather", None, call_id="c1", result="sunny")
    s = scores(p.one("execute_tool get_weather"))
    assert "parse_ok" not in s and "schema_valid" not in s


# --- Google ADK's legacy schema ------------------------------------------------------------------------------


def test_adk_legacy_attributes_and_its_llm_request_definitions() -> None:
    request = {
        "config": {
            "tools": [{"function_declarations": [{"name": "get_weather", "parameters_json_schema": WEATHER_SCHEMA}]}]
        }
    }
    defs = tool_definitions({"gcp.vertex.agent.llm_request": json.dumps(request)}, DefinitionCache())
    assert [(d.name, d.parameters) for d in defs] == [("get_weather", WEATHER_SCHEMA)]
    attrs = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "book_flight",
        "gcp.vertex.agent.tool_call_args": '{"to": "Oslo"}',
        "gcp.vertex.agent.tool_response": '{"error": "Invoking `book_flight()` failed as no tool with that name is available."}',
        "error.type": "ValueError",
    }
    record = _extract(_span(attrs, "gcp.vertex.agent", error="ValueError"))
    assert record.raw_arguments == '{"to": "Oslo"}' and record.result_recorded
    assert reports_unknown_tool(record.error, record.result, record.result_recorded)


# --- shapes nobody foresaw ---------------------------------------------------------------------------------

_ODD = [
    "",
    "null",
    "[]",
    "{}",
    '{"config": {"tools": [{"function_declarations": [1, null, {"name": 3}]}]}}',
    "[1, {}]",
    "{",
]


@pytest.mark.parametrize("odd", _ODD)
def test_odd_framework_values_are_forwarded_once_and_never_raise(odd: str) -> None:
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from otel_toolcall_eval import ToolCallEvalProcessor
    from otel_toolcall_eval.attributes import EVAL_ERROR

    exporter = InMemorySpanExporter()
    processor = ToolCallEvalProcessor(SimpleSpanProcessor(exporter))
    chat = {
        "gen_ai.operation.name": "chat",
        "gcp.vertex.agent.llm_request": odd,
        "gen_ai.agent.tools": odd,
        "gen_ai.tool.definitions": odd,
        "gen_ai.output.messages": odd,
        "llm.input_messages.0.message.role": "tool",
        "llm.input_messages.0.message.content": odd,
    }
    events = [Event("gen_ai.tool.message", {"content": odd}), Event("gen_ai.choice", {"message": odd})]
    tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "t", "gen_ai.tool.json_schema": odd}
    spans = [
        _span(chat, STRANDS, name="chat"),
        _span(tool, STRANDS, name="execute_tool t", events=events),
        _span(_oi_tool(odd, **{"tool.parameters": odd}), SMOL),
        _span(_oi_tool(odd), LLAMA),
    ]
    for span in spans:
        processor.on_end(span)
    processor.shutdown()
    out = exporter.get_finished_spans()
    assert len(out) == len(spans)
    assert not [s for s in out if EVAL_ERROR in (s.attributes or {})]


def test_agno_tool_parameters_are_its_arguments_not_a_schema() -> None:
    """A tool whose argument is called ``type`` would make Agno's ``tool.parameters`` look like a JSON Schema."""
    attrs = _oi_tool(
        '{"type": "object", "city": "Paris"}', **{"tool.parameters": '{"type": "object", "city": "Paris"}'}
    )
    assert _extract(_span(attrs, "openinference.instrumentation.agno")).span_schema is None
    assert _extract(_span(attrs, "x")).span_schema is not None  # another scope's schema is read as its convention says


# --- arguments recorded only on the model's request (issue 26) ----------------------------------------------


def test_arguments_are_borrowed_by_name_from_the_one_request_of_that_tool() -> None:
    """A tool span without arguments and without the model's call id (an MCP 2.x server's span: its id is the
    JSON-RPC one): the one pending request of its name lends its arguments, so parse and schema get a verdict."""
    p = make_pipeline()
    with p.tracer.start_as_current_span("agent"):
        _requesting_chat(p, {"city": "Oslo", "unit": "kelvin"})
        tool_span(p.tracer, "get_weather", call_id="rpc-7")  # an id no request named
    s = scores(p.one("execute_tool get_weather"))
    assert (s["parse_ok"], s["schema_valid"], s["outcome"]) == (True, False, "malformed_call")


def test_arguments_are_not_borrowed_when_two_requests_of_the_tool_wait() -> None:
    p = make_pipeline()
    with p.tracer.start_as_current_span("agent"):
        calls = [("c1", "get_weather", {"city": "Oslo", "unit": "kelvin"}), ("c2", "get_weather", {"city": "Rome"})]
        _requesting_chat(p, None, calls)
        tool_span(p.tracer, "get_weather")
    s = scores(p.one("execute_tool get_weather"))
    assert "parse_ok" not in s and "schema_valid" not in s  # which of the two ran is unknown: no evidence


def test_a_root_an_instrumentation_stamped_as_a_chat_span_still_gets_the_verdict() -> None:
    """LiteLLM's OTel callback writes chat attributes onto the application's own root span: with tool activity
    below it, the root is still the trace's root and carries the verdict (its usage counted as a model call)."""
    p = make_pipeline()
    stamped = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m", "gen_ai.usage.input_tokens": 5}
    with p.tracer.start_as_current_span("app", attributes=stamped):
        tool_span(p.tracer, "get_weather", {"city": "Paris"}, error=ConnectionError("down"))
    root = scores(p.one("app"))
    assert (root["trace.tool_calls"], root["trace.errors"], root["trace.model_calls"]) == (1, 1, 1)


@pytest.mark.parametrize(("scope", "model_calls"), [(LLAMA, 2), ("x", 4)])
def test_model_calls_are_an_instrumentations_requests_by_its_row_not_by_what_they_recorded(
    scope: str, model_calls: int
) -> None:
    """LlamaIndex marks its ``_prepare_chat_with_tools`` step ``LLM`` beside each real request: its scope's row
    names that span, so it is no model call; the request is one even when hidden inputs and outputs and a model
    that reports no usage leave it with neither tokens nor output messages (the recorded ``llama_index-hidden``).
    Another instrumentation's span of that name is a request like any LLM span."""
    p = make_pipeline()
    spans = p.provider.get_tracer(scope)
    llm = {"openinference.span.kind": "LLM", "llm.model_name": "m", "input.value": "__REDACTED__"}
    with p.tracer.start_as_current_span("agent"):
        for _ in range(2):
            with spans.start_as_current_span("MockLLM._prepare_chat_with_tools", attributes=llm):
                pass
            with spans.start_as_current_span("MockLLM.astream_chat", attributes=llm):
                pass
        tool_span(p.tracer, "get_weather", {"city": "Paris"})
    assert scores(p.one("agent"))["trace.model_calls"] == model_calls


# --- Python reprs where JSON belongs (Haystack's ``Tool(...)``, ``ToolCallResult(...)``): conventions.reprs ------

HAYSTACK = "openinference.instrumentation.haystack"
_TOOL_REPR = (
    "Tool(name='get_weather', description='Current weather in a city.', parameters={'properties': {'city': "
    "{'type': 'string'}, 'unit': {'enum': ['celsius', 'fahrenheit'], 'type': 'string'}}, 'required': ['city', "
    "'unit'], 'type': 'object'}, function=<function main.<locals>.get_weather at 0x7f207d5809a0>, "
    "outputs_to_string=None)"
)


def test_haystack_tool_reprs_are_read_as_definitions_only_for_its_scope() -> None:
    from otel_toolcall_eval.conventions.shapes import shape_named

    attrs = {"openinference.span.kind": "LLM", "input.value": json.dumps({"messages": [], "tools": [_TOOL_REPR]})}
    (tool,) = tool_definitions(attrs, DefinitionCache(), shape_named(HAYSTACK))
    unit = {"enum": ["celsius", "fahrenheit"], "type": "string"}
    schema = {"type": "object", "properties": {"city": {"type": "string"}, "unit": unit}, "required": ["city", "unit"]}
    assert (tool.name, tool.description, tool.parameters) == ("get_weather", "Current weather in a city.", schema)
    assert tool_definitions(attrs, DefinitionCache()) == []  # another scope: never guessed from the value
    assert tool_definitions(attrs, DefinitionCache(), shape_named(LLAMA)) == []


@pytest.mark.parametrize(
    "text",
    [
        "__import__('os').system('touch /tmp/toolcall-eval-repr-ran')",  # a call is a record, never run
        "Tool(name=(lambda: open('/tmp/toolcall-eval-repr-ran', 'w'))())",
        "Tool(name='a' * 10**9)",  # an operator has no value: nothing is computed
        "Tool(name='x', parameters=" + "[" * 500 + "]" * 500 + ")",  # deeper than the parser allows
        "Tool(name='x', parameters='" + "a" * (64 * 1024) + "')",  # longer than one repr may be
        "Tool(name='open, description=<function>)",  # a string left open
        "Tool(name=<ChatRole.TOOL: 'tool'>",  # a bracket left open
        "Tool(name='x', n=" + "9" * 5000 + ")",  # an integer longer than Python converts
    ],
)
def test_a_repr_is_read_bounded_and_never_evaluated(text: str) -> None:
    from pathlib import Path

    from otel_toolcall_eval.conventions import reprs

    value = reprs.read(text)
    assert not Path("/tmp/toolcall-eval-repr-ran").exists()
    assert value is None or (isinstance(value, dict) and value.get("name") in (None, "x"))
    assert list(reprs.calls_of([text], "Tool")) in ([], [value])


def test_a_repr_reads_literals_calls_and_objects_in_angle_brackets() -> None:
    from otel_toolcall_eval.conventions import reprs

    text = "ChatMessage(_role=<ChatRole.TOOL: 'tool'>, _content=[ToolCallResult(result=\"it's <down>\", error=True)])"
    assert reprs.read(text) == {
        reprs.CLASS_KEY: "ChatMessage",
        "_role": None,
        "_content": [{reprs.CLASS_KEY: "ToolCallResult", "result": "it's <down>", "error": True}],
    }
    assert list(reprs.calls_of([text, "TextContent(text='ToolCallResult(')"], "ToolCallResult")) == [
        {reprs.CLASS_KEY: "ToolCallResult", "result": "it's <down>", "error": True}
    ]
    assert reprs.read("{'a': (1, -2.5, None), 'b': b'x', 'c': 1j, 'd': ...}") == {
        "a": [1, -2.5, None],
        "b": None,
        "c": None,
        "d": None,
    }


def test_semantic_kernels_available_functions_are_read_as_names_only_for_its_scope() -> None:
    """SK's ``AutoFunctionInvocationLoop`` span (a ``Kernel`` with automatic function calling, no agent) names the
    functions offered; its scope's row reads them, names only; the same key on a span of another scope is not."""
    from otel_toolcall_eval.conventions.llm_spans import is_llm_span
    from otel_toolcall_eval.conventions.shapes import shape_named

    attrs = {"sk.available_functions": "Weather-get_weather, Weather-get_population,"}
    assert is_llm_span(attrs)
    loop = shape_named("semantic_kernel.connectors.ai.chat_completion_client_base")
    defs = tool_definitions(attrs, DefinitionCache(), loop)
    assert [(d.name, d.parameters) for d in defs] == [("Weather-get_weather", None), ("Weather-get_population", None)]
    assert tool_definitions(attrs, DefinitionCache(), shape_named(LLAMA)) == []
    assert tool_definitions(attrs, DefinitionCache()) == []
