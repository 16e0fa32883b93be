"""Span typing: each convention's recorded shape becomes the same plain record."""

from __future__ import annotations

import json
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, Status, StatusCode

from otel_toolcall_eval.conventions import default_registry
from otel_toolcall_eval.conventions.llm_spans import DefinitionCache, is_llm_span, requested_calls, tool_definitions
from otel_toolcall_eval.records import ToolCallRecord
from tests.helpers import WEATHER_SCHEMA, WEATHER_TOOL, chat_span, make_pipeline, scores


def _span(name: str, attrs: dict[str, Any], *, error: str | None = None, exc_type: str | None = None) -> ReadableSpan:
    from opentelemetry.sdk.trace import Event

    events = []
    if exc_type:
        events.append(Event("exception", {"exception.type": exc_type, "exception.message": error or ""}))
    return ReadableSpan(
        name=name,
        context=SpanContext(0x1234, 0x99, False),
        attributes=attrs,
        events=events,
        status=Status(StatusCode.ERROR, error) if error else Status(StatusCode.UNSET),
        instrumentation_scope=InstrumentationScope("x"),
    )


def _extract(span: ReadableSpan) -> ToolCallRecord | None:
    registry = default_registry()
    attrs = span.attributes
    convention = registry.recognise(span, attrs)
    return convention.extract(span, attrs) if convention else None


CASES: list[tuple[str, str, dict[str, Any], dict[str, Any]]] = [
    (
        "genai",
        "execute_tool get_weather",
        {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "get_weather",
            "gen_ai.tool.call.id": "call_1",
            "gen_ai.tool.call.arguments": '{"city":"Paris"}',
            "gen_ai.tool.call.result": "sunny",
        },
        {"name": "get_weather", "raw_arguments": '{"city":"Paris"}', "result": "sunny", "call_id": "call_1"},
    ),
    (
        "mcp",
        "tools/call get_weather",
        {
            "mcp.method.name": "tools/call",
            "gen_ai.tool.name": "get_weather",
            "jsonrpc.request.id": "7",
            "gen_ai.tool.call.arguments": '{"city":"Paris"}',
            "error.type": "tool_error",
        },
        {"name": "get_weather", "call_id": "7", "raw_arguments": '{"city":"Paris"}'},
    ),
    (
        "genai",  # pydantic-ai's older format keeps the operation name, records tool_arguments/tool_response
        "running tool",
        {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "get_weather",
            "gen_ai.tool.call.id": "c1",
            "tool_arguments": '{"city":"Paris"}',
            "tool_response": "sunny",
        },
        {"name": "get_weather", "raw_arguments": '{"city":"Paris"}', "result": "sunny"},
    ),
    (
        "pydantic_ai",  # even older: only the span name says it is a tool
        "running tool",
        {"gen_ai.tool.name": "get_weather", "tool_arguments": '{"city":"Paris"}', "tool_response": "sunny"},
        {"name": "get_weather", "raw_arguments": '{"city":"Paris"}'},
    ),
    (
        "openinference",
        "get_weather",
        {
            "openinference.span.kind": "TOOL",
            "tool.name": "get_weather",
            "input.value": '{"city":"Paris"}',
            # one openinference release wrote the SCHEMA here: input.value must win
            "gen_ai.tool.call.arguments": json.dumps(WEATHER_SCHEMA),
            "output.value": "sunny",
            "tool.parameters": json.dumps(WEATHER_SCHEMA),
        },
        {"name": "get_weather", "raw_arguments": '{"city":"Paris"}', "span_schema": WEATHER_SCHEMA},
    ),
    (
        "traceloop",
        "get_weather.tool",
        {
            "traceloop.span.kind": "tool",
            "traceloop.entity.name": "get_weather",
            "traceloop.entity.input": json.dumps({"args": [], "kwargs": {"city": "Paris"}}),
            "traceloop.entity.output": '"sunny"',
        },
        {"name": "get_weather", "raw_arguments": {"city": "Paris"}, "result": '"sunny"'},
    ),
    (
        "laminar",
        "get_weather",
        {"lmnr.span.type": "TOOL", "lmnr.span.input": '{"city":"Paris"}', "lmnr.span.output": "sunny"},
        {"name": "get_weather", "raw_arguments": '{"city":"Paris"}', "result": "sunny"},
    ),
    (
        "langfuse",
        "get_weather",
        {
            "langfuse.observation.type": "tool",
            "langfuse.observation.input": json.dumps({"args": ["Paris"], "kwargs": {}}),
            "langfuse.observation.output": "sunny",
        },
        {"name": "get_weather", "raw_arguments": "Paris"},
    ),
]


@pytest.mark.parametrize(
    ("convention", "span_name", "attrs", "expected"), CASES, ids=[c[0] + ":" + c[1] for c in CASES]
)
def test_convention_extracts_the_record(
    convention: str, span_name: str, attrs: dict[str, Any], expected: dict[str, Any]
) -> None:
    record = _extract(_span(span_name, attrs))
    assert record is not None
    assert record.convention == convention
    for key, value in expected.items():
        assert getattr(record, key) == value, key
    assert record.trace_id == f"{0x1234:032x}" and record.span_id == f"{0x99:016x}"


@pytest.mark.parametrize(
    ("trace_id", "span_id", "parent_id"),
    [(1, 1, 2), (2**128 - 1, 2**64 - 1, 2**64 - 1), (0x0ABC << 100, 0xF, None), (2**130, -5, 2**70)],
    ids=["small", "widest", "no-parent", "not-otlp-ids"],
)
def test_a_record_carries_the_span_ids_as_zero_padded_hex(trace_id: int, span_id: int, parent_id: int | None) -> None:
    """The ids are the f-string's ``032x`` / ``016x`` digits, whatever the int (an id wider than its OTLP field, or
    negative, from a span built by hand, is printed as it is instead of failing the extraction)."""
    span = ReadableSpan(
        name="execute_tool get_weather",
        context=SpanContext(trace_id, span_id, False),
        parent=None if parent_id is None else SpanContext(trace_id, parent_id, False),
        attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "get_weather"},
    )
    record = _extract(span)
    assert record is not None
    assert (record.trace_id, record.span_id) == (f"{trace_id:032x}", f"{span_id:016x}")
    assert record.parent_span_id == (None if parent_id is None else f"{parent_id:016x}")


def test_a_user_subclass_declaring_slots_and_fields_of_its_own_keeps_them_and_its_overrides() -> None:
    """Users subclass ``AttributeConvention`` as the built-ins do (a frozen slots dataclass, fields of its own, an
    overridden ``tool_name``): in both builds the registry recognises it, and ``extract`` reads every inherited
    field and calls the subclass's ``tool_name`` (the compiled build reads the rest in compiled code)."""
    from dataclasses import dataclass, fields

    from otel_toolcall_eval import AttributeConvention, Convention, ConventionRegistry
    from otel_toolcall_eval.conventions.builtin import GenAIConvention

    @dataclass(frozen=True, slots=True)
    class Acme(AttributeConvention):
        tool_prefix: str = ""

        def tool_name(self, span: Any, attrs: Any) -> Any:
            return self.tool_prefix + str(attrs.get("acme.tool", ""))

    @dataclass(frozen=True, slots=True)
    class Shouting(GenAIConvention):
        def tool_name(self, span: Any, attrs: Any) -> Any:
            return str(GenAIConvention.tool_name(self, span, attrs)).upper()

    acme = Acme("acme", "acme.kind", frozenset({"tool"}), argument_keys=("acme.args",), tool_prefix="x_")
    shouting = Shouting(
        "shouting", "gen_ai.operation.name", frozenset({"execute_tool"}), name_keys=("gen_ai.tool.name",)
    )
    assert [f.name for f in fields(acme)][-1] == "tool_prefix" and isinstance(acme, Convention)
    registry = ConventionRegistry([acme, shouting])
    for attrs, convention, name, raw in [
        ({"acme.kind": "tool", "acme.tool": "get", "acme.args": "{}"}, acme, "x_get", "{}"),
        ({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "get"}, shouting, "GET", None),
    ]:
        span = _span("s", attrs)
        assert registry.recognise(span, attrs) is convention
        record = convention.extract(span, attrs)
        assert record is not None
        assert (record.name, record.raw_arguments, record.convention) == (name, raw, convention.name)
    plain = AttributeConvention("plain", "acme.kind", frozenset({"tool"}), name_keys=("acme.tool",))
    record = plain.extract(
        _span("s", {"acme.kind": "tool", "acme.tool": "get"}), {"acme.kind": "tool", "acme.tool": "get"}
    )
    assert record is not None and record.name == "get"


def test_a_convention_given_sets_and_lists_instead_of_frozensets_and_tuples_matches_as_its_match_does() -> None:
    """The dataclass declares frozensets and tuples, but nothing checks them: a user's set of values and list of
    keys work, and the registry's own detection test (it skips the ``match`` call of a class that keeps
    ``AttributeConvention.match``) answers as ``match`` does, in both builds."""
    from otel_toolcall_eval import AttributeConvention, ConventionRegistry

    loose = AttributeConvention(
        "loose",
        "x.kind",
        {"tool", "call"},  # type: ignore[arg-type]
        name_keys=["x.name"],  # type: ignore[arg-type]
        argument_keys=["x.args"],  # type: ignore[arg-type]
        unwrap_args=1,  # type: ignore[arg-type]
    )
    registry = ConventionRegistry([loose])
    for attrs in [{"x.kind": "tool"}, {"x.kind": "call", "x.name": "n"}, {"x.kind": "other"}, {"x.kind": ("tool",)}]:
        span = _span("s", attrs)
        assert (registry.recognise(span, attrs) is loose) is loose.match(span, attrs)
    attrs = {"x.kind": "call", "x.name": "get", "x.args": '{"kwargs": {"a": 1}}'}
    record = loose.extract(_span("s", attrs), attrs)
    assert record is not None and (record.name, record.raw_arguments) == ("get", {"a": 1})


def test_the_registry_asks_only_conventions_whose_detect_keys_the_span_carries_in_order() -> None:
    """First match wins in registry order, whichever detect keys a span carries; a convention without detect keys
    makes every span ask every convention; spans without any detect key match nothing."""
    from otel_toolcall_eval.conventions.base import _CANDIDATE_SETS, AttributeConvention, ConventionRegistry

    asked: list[str] = []

    class Counting(AttributeConvention):
        def match(self, span: Any, attrs: Any) -> bool:
            asked.append(self.name)
            return AttributeConvention.match(self, span, attrs)

    a = Counting("a", "x.kind", frozenset({"tool"}))
    b = Counting("b", "y.kind", frozenset({"tool"}))
    c = Counting("c", "x.kind", frozenset({"call"}))
    registry = ConventionRegistry([a, b, c])
    for attrs, expected, offered in [
        ({"x.kind": "call"}, c, ["a", "c"]),
        ({"y.kind": "tool", "x.kind": "call"}, b, ["a", "b"]),
        ({"y.kind": "tool", "x.kind": "tool"}, a, ["a"]),
        ({"y.kind": "no"}, None, ["b"]),
        ({"z.kind": "tool"}, None, []),
        ({"x.kind": "call"}, c, ["a", "c"]),  # a remembered key set: the same answer
    ]:
        asked.clear()
        assert registry.recognise(_span("s", attrs), attrs) is expected
        assert asked == offered
    registry.register(Counting("d", "y.kind", frozenset({"call"})))  # registered first: asked, and matching, first
    asked.clear()
    attrs = {"y.kind": "call", "x.kind": "call"}
    assert registry.recognise(_span("s", attrs), attrs).name == "d"
    assert asked == ["d"]
    keys = [f"k{i}" for i in range(12)]  # 4096 key subsets: the remembered ones stay bounded
    wide = ConventionRegistry([Counting(f"c{i}", k, frozenset({"tool"})) for i, k in enumerate(keys)])
    for mask in range(1, 2**12, 3):
        attrs = {k: "tool" for i, k in enumerate(keys) if mask >> i & 1}
        found = wide.recognise(_span("s", attrs), attrs)
        assert found is not None and found.name == f"c{(mask & -mask).bit_length() - 1}"
    assert len(wide._index[2]) <= _CANDIDATE_SETS


def test_openinference_handoff_is_not_a_tool_call() -> None:
    span = _span("handoff to billing_agent", {"openinference.span.kind": "TOOL"})
    assert _extract(span) is None
    p = make_pipeline()
    with p.tracer.start_as_current_span("root"):
        with p.tracer.start_as_current_span("handoff to billing_agent", attributes={"openinference.span.kind": "TOOL"}):
            pass
    assert scores(p.one("handoff to billing_agent")) == {}
    assert p.metric_sum("toolcall_eval.tool_calls") == 0


def test_error_evidence_from_status_event_and_error_type() -> None:
    record = _extract(
        _span(
            "execute_tool x",
            {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "x", "error.type": "TimeoutError"},
            error="timed out",
            exc_type="builtins.TimeoutError",
        )
    )
    assert record is not None
    e = record.error
    assert (e.status_error, e.status_description, e.exception_type, e.error_type) == (
        True,
        "timed out",
        "builtins.TimeoutError",
        "TimeoutError",
    )


def test_pydantic_ai_retry_attributes_mean_input_rejected() -> None:
    p = make_pipeline()
    with p.tracer.start_as_current_span("root"):
        attrs = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "t",
            "tool_arguments": '{"x": 1}',
            "pydantic_ai.tool.retry.cause": "model_retry",
        }
        with p.tracer.start_as_current_span("running tool", attributes=attrs):
            pass
    s = scores(p.one("running tool"))
    assert s["outcome"] == "malformed_call" and s["error_source"] == "input_rejected"


def test_langchain_bare_value_maps_onto_the_only_parameter() -> None:
    p = make_pipeline()
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    with p.tracer.start_as_current_span("root", attributes={"openinference.span.kind": "CHAIN"}):
        llm = {
            "openinference.span.kind": "LLM",
            "llm.tools.0.tool.json_schema": json.dumps(
                {"type": "function", "function": {"name": "weather", "parameters": schema}}
            ),
        }
        with p.tracer.start_as_current_span("ChatModel", attributes=llm):
            pass
        with p.tracer.start_as_current_span(
            "weather", attributes={"openinference.span.kind": "TOOL", "tool.name": "weather", "input.value": "Paris"}
        ):
            pass
        with p.tracer.start_as_current_span(
            "weather", attributes={"openinference.span.kind": "TOOL", "tool.name": "weather", "input.value": "42"}
        ):
            pass
    first, second = (scores(s) for s in p.by_name("weather"))
    assert first["parse_ok"] is True and first["schema_valid"] is True
    assert second["parse_ok"] is True and second["schema_valid"] is True  # bare "42" for a string stays "42"


# --- LLM spans: definitions and requested calls ----------------------------------------------------
def test_definitions_in_every_shape() -> None:
    cache = DefinitionCache()
    flat = tool_definitions({"gen_ai.tool.definitions": json.dumps([WEATHER_TOOL])}, cache)
    nested = tool_definitions(
        {
            "gen_ai.tool.definitions": json.dumps(
                [{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER_SCHEMA}}]
            )
        },
        cache,
    )
    oi = tool_definitions(
        {
            "llm.tools.0.tool.json_schema": json.dumps(
                {"type": "function", "function": {"name": "a", "parameters": {"type": "object"}}}
            ),
            "llm.tools.1.tool.json_schema": json.dumps({"type": "function", "function": {"name": "b"}}),
        },
        cache,
    )
    traceloop = tool_definitions(
        {
            "llm.request.functions.0.name": "get_weather",
            "llm.request.functions.0.description": "Weather",
            "llm.request.functions.0.parameters": json.dumps(WEATHER_SCHEMA),
        },
        cache,
    )
    assert [d.name for d in flat] == [d.name for d in nested] == [d.name for d in traceloop] == ["get_weather"]
    assert flat[0].parameters == nested[0].parameters == traceloop[0].parameters == WEATHER_SCHEMA
    assert [(d.name, d.parameters) for d in oi] == [("a", {"type": "object"}), ("b", None)]
    assert flat[0].schema_key == traceloop[0].schema_key  # canonical: equal schemas compare equal


def test_requested_calls_genai_and_openinference_noncontiguous() -> None:
    genai = {
        "gen_ai.output.messages": json.dumps(
            [
                {
                    "role": "assistant",
                    "parts": [{"type": "text", "content": "x"}, {"type": "tool_call", "id": "c1", "name": "a"}],
                }
            ]
        )
    }
    assert requested_calls(genai) == [("c1", "a")]
    oi = {
        "llm.output_messages.0.message.tool_calls.3.tool_call.id": "z",
        "llm.output_messages.0.message.tool_calls.3.tool_call.function.name": "b",
        "llm.output_messages.0.message.tool_calls.1.tool_call.id": "y",
        "llm.output_messages.0.message.tool_calls.1.tool_call.function.name": "a",
    }
    assert requested_calls(oi) == [("y", "a"), ("z", "b")]


def test_is_llm_span() -> None:
    assert is_llm_span({"gen_ai.operation.name": "chat"})
    assert is_llm_span({"openinference.span.kind": "LLM"})
    assert not is_llm_span({"http.method": "GET"})
    assert not is_llm_span({"gen_ai.operation.name": "execute_tool"})


def test_batches_by_name_when_tool_spans_have_no_call_id() -> None:
    p = make_pipeline()
    with p.tracer.start_as_current_span("root"):
        chat_span(p.tracer, [WEATHER_TOOL], [("c1", "get_weather"), ("c2", "get_weather")])
        for city in ("A", "B"):
            with p.tracer.start_as_current_span(
                "w",
                attributes={
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": "get_weather",
                    "gen_ai.tool.call.arguments": json.dumps({"city": city}),
                },
            ):
                pass
        chat_span(p.tracer, [WEATHER_TOOL], [("c3", "get_weather")])
        with p.tracer.start_as_current_span(
            "w",
            attributes={
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "get_weather",
                "gen_ai.tool.call.arguments": '{"city": "C"}',
            },
        ):
            pass
    assert [scores(s)["batch"] for s in p.by_name("w")] == [1, 1, 2]
