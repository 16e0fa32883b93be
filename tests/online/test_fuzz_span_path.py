"""Fuzz target for the span path: random span shapes and attributes through the real SDK ``TracerProvider`` and
``ToolCallEvalProcessor``, inline and background. Whatever the spans hold, ``end()`` never raises and every span
reaches the downstream processor exactly once. Bounded (a fixed number of examples per mode, a few seconds).
"""

from __future__ import annotations

import collections
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.trace import NonRecordingSpan, SpanContext, Status, StatusCode, TraceFlags, set_span_in_context

from otel_toolcall_eval import EvalConfig, ToolCallEvalProcessor


class Counting(SpanProcessor):
    def __init__(self) -> None:
        self.seen: collections.Counter[int] = collections.Counter()

    def on_end(self, span: ReadableSpan) -> None:
        assert span.context is not None
        self.seen[span.context.span_id] += 1


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)
_TEXT = st.one_of(
    st.text(max_size=40),
    _JSON.map(lambda v: json.dumps(v, default=str)),
    st.sampled_from(["{not json", "[]", "{}", "null", '{"city": "Paris"}', '{"args": [1], "kwargs": {"a": 2}}']),
    st.just("[" * 300 + "]" * 300),
)
_VALUE = st.one_of(
    _TEXT,
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=True),
    st.booleans(),
    st.lists(st.text(max_size=10), max_size=4),
)
_TOOL_NAMES = st.sampled_from(["get_weather", "search", "drop_database", "", "x" * 300])
_DEFINITIONS = st.lists(
    st.fixed_dictionaries(
        {"type": st.just("function"), "name": _TOOL_NAMES},
        optional={"parameters": _JSON, "description": st.text(max_size=10)},
    ),
    max_size=3,
).map(json.dumps)
_OUTPUT = st.lists(
    st.fixed_dictionaries(
        {"id": st.text(max_size=4), "name": _TOOL_NAMES, "type": st.sampled_from(["tool_call", "text"])}
    ),
    max_size=3,
).map(lambda parts: json.dumps([{"role": "assistant", "parts": parts}]))

# keys the conventions and LLM checks read, with values of the right and of the wrong type
_KEYED = st.one_of(
    st.tuples(st.just("gen_ai.operation.name"), st.sampled_from(["execute_tool", "chat", "invoke_agent", "x"])),
    st.tuples(st.just("gen_ai.tool.name"), _TOOL_NAMES),
    st.tuples(st.sampled_from(["gen_ai.tool.call.arguments", "input.value", "tool_arguments"]), _VALUE),
    st.tuples(st.sampled_from(["gen_ai.tool.call.result", "output.value", "tool_response"]), _VALUE),
    st.tuples(st.just("gen_ai.tool.call.id"), _VALUE),
    st.tuples(st.just("openinference.span.kind"), st.sampled_from(["TOOL", "tool", "LLM", "AGENT", "CHAIN"])),
    st.tuples(st.just("tool.name"), _TOOL_NAMES),
    st.tuples(st.just("tool.parameters"), _TEXT),
    st.tuples(st.just("mcp.method.name"), st.sampled_from(["tools/call", "tools/list"])),
    st.tuples(st.just("traceloop.span.kind"), st.sampled_from(["tool", "task"])),
    st.tuples(st.just("traceloop.entity.input"), _TEXT),
    st.tuples(st.just("gen_ai.tool.definitions"), st.one_of(_DEFINITIONS, _VALUE)),
    st.tuples(st.just("gen_ai.output.messages"), st.one_of(_OUTPUT, _VALUE)),
    st.tuples(st.just("llm.tools.0.tool.json_schema"), _TEXT),
    st.tuples(st.just("error.type"), _VALUE),
    st.tuples(st.text(max_size=20), _VALUE),
)


@st.composite
def span_forest(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[int]]:
    """Spans of one or two traces: each has a parent among the earlier ones (or is a root, local or remote), random
    attributes, maybe an error; ``end`` is a random permutation (children may end after their root)."""
    count = draw(st.integers(1, 12))
    spans = []
    for i in range(count):
        parent = draw(st.one_of(st.none(), st.integers(0, i - 1))) if i else None
        spans.append(
            {
                "name": draw(st.sampled_from(["running tool", "execute_tool get_weather", "chat", "GET /", "x"])),
                "parent": parent,
                "remote": parent is None and draw(st.booleans()),
                "attributes": dict(draw(st.lists(_KEYED, max_size=8))),
                "error": draw(st.booleans()),
            }
        )
    order = draw(st.permutations(range(count)))
    return spans, order


@pytest.mark.parametrize("mode", ["inline", "background"])
def test_random_spans_never_raise_and_are_forwarded_exactly_once(mode: str) -> None:
    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None)
    @given(forest=span_forest())
    def run(forest: tuple[list[dict[str, Any]], list[int]]) -> None:
        spans_spec, order = forest
        downstream = Counting()
        config = EvalConfig.from_dict(
            {"evaluation": {"mode": mode, "max_queue_size": 4}, "policies": {"step_budget": 3}}
        )
        processor = ToolCallEvalProcessor(downstream, config)
        provider = TracerProvider()
        provider.add_span_processor(processor)
        tracer = provider.get_tracer("fuzz")
        remote = set_span_in_context(NonRecordingSpan(SpanContext(0xABC, 0xDEF, True, TraceFlags(1))))
        started: list[Any] = []
        for spec in spans_spec:
            if spec["parent"] is not None:
                context = set_span_in_context(started[spec["parent"]])
            else:
                context = remote if spec["remote"] else None
            span = tracer.start_span(spec["name"], context=context, attributes=spec["attributes"])
            if spec["error"]:
                span.record_exception(ValueError("boom"))
                span.set_status(Status(StatusCode.ERROR, "boom"))
            started.append(span)
        for index in order:
            started[index].end()  # must never raise, whatever the span holds
        assert processor.force_flush(10_000)
        expected = {s.get_span_context().span_id for s in started}
        assert set(downstream.seen) == expected
        assert set(downstream.seen.values()) == {1}
        provider.shutdown()
        assert set(downstream.seen.values()) == {1}  # shutdown forwards nothing twice

    run()
