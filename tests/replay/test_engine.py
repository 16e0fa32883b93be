"""Replay drives the processor exactly as a live process would: same order, same spans out, same attributes.

The reference is the online path itself: the recorded spans fed in the order they ended to a
``ToolCallEvalProcessor(SimpleSpanProcessor(InMemorySpanExporter()))``. Replay gets them shuffled, decoded from
a file, already scored, with equal end times, unsampled or without a context.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

from otel_toolcall_eval import EvalConfig, ToolCallEvalProcessor
from otel_toolcall_eval.attributes import PREFIX
from otel_toolcall_eval.demo import default_config_path
from otel_toolcall_eval.online.enrich import with_attributes
from otel_toolcall_eval.replay import read_file, replay_spans
from otel_toolcall_eval.replay.engine import end_order
from tests.helpers import demo_spans

CONFIG = EvalConfig.load(default_config_path())


def online(spans: Sequence[ReadableSpan], config: EvalConfig | None = CONFIG) -> list[ReadableSpan]:
    """The spans through the processor in the given order, exported by the SDK's own processor and exporter."""
    sink = InMemorySpanExporter()
    processor = ToolCallEvalProcessor(SimpleSpanProcessor(sink), config, judge=False)
    for span in spans:
        processor.on_end(span)
    processor.shutdown()
    return list(sink.get_finished_spans())


def view(span: ReadableSpan) -> dict[str, Any]:
    """Everything an exporter reads from a span."""
    return {
        "name": span.name,
        "context": span.context,
        "parent": span.parent,
        "attributes": dict(span.attributes or {}),
        "events": [(e.name, dict(e.attributes or {}), e.timestamp) for e in span.events],
        "links": [(link.context, dict(link.attributes or {})) for link in span.links],
        "kind": span.kind,
        "status": (span.status.status_code, span.status.description),
        "times": (span.start_time, span.end_time),
        "resource": dict(span.resource.attributes),
        "scope": span.instrumentation_scope,
    }


def views(spans: Sequence[ReadableSpan]) -> list[dict[str, Any]]:
    return [view(s) for s in spans]


@pytest.fixture(scope="module")
def recorded() -> list[ReadableSpan]:
    """The demo agent's spans as the SDK ended them (every failure class in the mix), unscored."""
    return demo_spans(30, 0.2, seed=5)


def test_shuffled_recording_replays_to_the_online_spans(recorded: list[ReadableSpan]) -> None:
    expected = online(recorded)
    assert sum(1 for s in expected if (s.attributes or {}).get(PREFIX + "outcome")) > 50
    shuffled = list(recorded)
    random.Random(3).shuffle(shuffled)
    result = replay_spans(shuffled, CONFIG)
    assert result.traces == 30
    # The demo's traces do not overlap, so the end order of the whole recording is the online order.
    assert views(result.spans) == views(expected)


def test_decoded_file_replays_to_the_online_spans(tmp_path: Path, recorded: list[ReadableSpan]) -> None:
    path = tmp_path / "recorded.pb"
    path.write_bytes(encode_spans(recorded).SerializeToString())
    replayed = {s.context.span_id: dict(s.attributes or {}) for s in replay_spans(read_file(path).spans, CONFIG).spans}
    expected = {s.context.span_id: dict(s.attributes or {}) for s in online(recorded)}
    assert replayed == expected  # every attribute, scores and the application's own


def test_replaying_scored_spans_replaces_their_scores(recorded: list[ReadableSpan]) -> None:
    scored = online(recorded)
    stale = [with_attributes(s, {**(s.attributes or {}), PREFIX + "stale": True}) for s in scored]
    assert views(replay_spans(stale, CONFIG).spans) == views(scored)
    assert all((s.attributes or {}).get(PREFIX + "stale") for s in stale)  # inputs are not modified


TRACE = 0xABC


def _span(
    span_id: int,
    name: str,
    attributes: dict[str, Any],
    *,
    parent: int | None = None,
    end: int | None = 100,
    start: int | None = 1,
    trace_id: int = TRACE,
    flags: int = TraceFlags.SAMPLED,
) -> ReadableSpan:
    return ReadableSpan(
        name=name,
        context=SpanContext(trace_id, span_id, False, TraceFlags(flags)),
        parent=None if parent is None else SpanContext(trace_id, parent, False, TraceFlags(flags)),
        resource=Resource({"service.name": "agent"}),
        attributes=attributes,
        kind=SpanKind.INTERNAL,
        status=Status(StatusCode.UNSET),
        start_time=start,
        end_time=end,
    )


ROOT = {"gen_ai.operation.name": "invoke_agent"}
CHAT = {
    "gen_ai.operation.name": "chat",
    "gen_ai.tool.definitions": json.dumps([{"name": "lookup", "parameters": {"type": "object", "required": ["q"]}}]),
}


def _tool(arguments: str) -> dict[str, Any]:
    return {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "lookup",
        "gen_ai.tool.call.arguments": arguments,
    }


def test_equal_end_times_put_parents_last_and_keep_sibling_order() -> None:
    # Microsecond clocks (Jaeger) often give a parent and its last children the same end time.
    root = _span(1, "invoke_agent", ROOT, end=500)
    chat = _span(2, "chat", CHAT, parent=1, end=500)
    tool = _span(3, "execute_tool lookup", _tool("{}"), parent=1, end=500)
    early = _span(4, "execute_tool lookup", _tool('{"q": 1}'), parent=1, end=None)  # no end time: reads as 0
    assert end_order([root, chat, tool, early]) == [[early, chat, tool, root]]
    result = replay_spans([root, chat, tool, early], None)
    assert views(result.spans) == views(online([early, chat, tool, root], None))
    scores = {s.name + str(s.context.span_id): dict(s.attributes or {}) for s in result.spans}
    assert scores["execute_tool lookup3"][PREFIX + "schema_valid"] is False  # definitions came first: "q" missing
    assert PREFIX + "schema_valid" not in scores["execute_tool lookup4"]  # before the chat span: nothing known
    assert scores["invoke_agent1"][PREFIX + "trace.tool_calls"] == 2


def test_traces_in_order_of_first_start_unsampled_scored_but_not_kept() -> None:
    late = [_span(1, "invoke_agent", ROOT, trace_id=7, start=3, end=60)]
    early = [  # its first span starts after the other trace, its root (start None reads as 0) before
        _span(3, "execute_tool lookup", _tool("{bad"), parent=2, trace_id=8, start=5, end=10, flags=0),
        _span(2, "invoke_agent", ROOT, trace_id=8, start=None, end=40),
    ]
    no_context = ReadableSpan(name="orphan", context=None, attributes={}, start_time=0, end_time=1)
    spans = [*late, no_context, *early]
    assert [[s.name for s in g] for g in end_order(spans)] == [
        ["execute_tool lookup", "invoke_agent"],
        ["invoke_agent"],
    ]

    seen: list[ReadableSpan] = []

    class Downstream(SpanProcessor):
        def on_end(self, span: ReadableSpan) -> None:
            seen.append(span)

    result = replay_spans(spans, None, downstream=[Downstream()])
    assert result.traces == 2
    expected = online([*early, *late], None)  # SimpleSpanProcessor drops the unsampled tool span
    assert views(result.spans) == views(expected)
    assert [s.name for s in result.spans] == ["invoke_agent", "invoke_agent"]
    # the unsampled call still counted in its trace, as online
    assert (result.spans[0].attributes or {})[PREFIX + "trace.tool_calls"] == 1
    assert [s.name for s in seen] == ["execute_tool lookup", "invoke_agent", "invoke_agent"]  # downstream sees all
    assert seen[1] is result.spans[0]


def test_with_attributes_copies_sdk_and_other_spans() -> None:
    plain = _span(1, "invoke_agent", {"a": 1, "b": 2})
    copy = with_attributes(plain, {"a": 1})
    assert type(copy) is ReadableSpan and copy is not plain
    assert dict(copy.attributes or {}) == {"a": 1} and dict(plain.attributes or {}) == {"a": 1, "b": 2}
    assert {**view(copy), "attributes": None} == {**view(plain), "attributes": None}

    provider = TracerProvider()  # an SDK ``Span`` (not a plain ReadableSpan): the public constructor path
    live = provider.get_tracer("t").start_span("live", attributes={"x": "y", PREFIX + "outcome": "ok"})
    live.add_event("exception", {"exception.type": "E"})
    live.end()
    copied = with_attributes(live, {"x": "y"})
    assert type(copied) is ReadableSpan
    assert dict(copied.attributes or {}) == {"x": "y"} and (live.attributes or {})[PREFIX + "outcome"] == "ok"
    assert {**view(copied), "attributes": None} == {**view(live), "attributes": None}
