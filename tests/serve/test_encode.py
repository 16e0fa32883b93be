"""The service's export encoding (``serve.encode``): a received span is re-sent as the message it arrived in plus
the attributes the processor added, and that must be exactly what the SDK's ``encode_spans`` makes of the scored
span; whatever it cannot show to be unchanged goes through ``encode_spans`` itself."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Link, SpanKind, Status, StatusCode

from otel_toolcall_eval import ToolCallEvalProcessor
from otel_toolcall_eval.config import EvalConfig
from otel_toolcall_eval.demo.agent import FAILURE_CLASSES, ScriptedAgent
from otel_toolcall_eval.online.enrich import with_attributes
from otel_toolcall_eval.serve import encode as E
from otel_toolcall_eval.serve.decode import spans_from_message
from tests.helpers import DEMO_CONFIG


def by_span(request: ExportTraceServiceRequest) -> dict[bytes, tuple[Any, Any, Any]]:
    out = {}
    for rs in request.resource_spans:
        for ss in rs.scope_spans:
            for span in ss.spans:
                assert span.span_id not in out, "a span encoded twice"
                out[span.span_id] = ((rs.resource, rs.schema_url), (ss.scope, ss.schema_url), span)
    return out


def agent_spans(traces: int, seed: int) -> list[ReadableSpan]:
    raw = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource({"service.name": "agent", "k8s.pod.name": "p-1"}))
    provider.add_span_processor(SimpleSpanProcessor(raw))
    agent = ScriptedAgent(provider.get_tracer("agent.scripted", "1.0", schema_url="https://x/schema"), seed=seed)
    for _ in range(traces):
        agent.run(dict.fromkeys(FAILURE_CLASSES, 0.3))
    provider.shutdown()
    return list(raw.get_finished_spans())


def received(spans: Sequence[ReadableSpan]) -> list[ReadableSpan]:
    """What the service decodes from the request an agent sent."""
    return spans_from_message(encode_spans(spans), 100_000)


def scored(spans: Sequence[ReadableSpan]) -> list[ReadableSpan]:
    config = EvalConfig.load(DEMO_CONFIG)
    config = config.model_copy(update={"evaluation": config.evaluation.model_copy(update={"mode": "inline"})})
    out = InMemorySpanExporter()
    processor = ToolCallEvalProcessor(SimpleSpanProcessor(out), config)
    for span in spans:
        processor.on_end(span)
    processor.shutdown()
    return list(out.get_finished_spans())


@pytest.fixture
def slow_path(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many spans each call of the SDK's encoder (the fallback) was given."""
    calls: list[int] = []

    def counting(spans: Sequence[ReadableSpan]) -> ExportTraceServiceRequest:
        calls.append(len(spans))
        return encode_spans(spans)

    monkeypatch.setattr(E, "encode_spans", counting)
    return calls


def assert_same_as_sdk(spans: Sequence[ReadableSpan], *, scope_attributes: bool = False) -> None:
    """``scope_attributes``: the decoded spans' scopes lost their attributes (``replay.otlp`` keeps name, version
    and schema URL); the received message keeps them, so only those three are compared."""
    fast, sdk = by_span(E.ReceivedSpanEncoder().encode(spans)), by_span(encode_spans(spans))
    assert fast.keys() == sdk.keys()
    for span_id, (resource, scope, span) in sdk.items():
        got_resource, got_scope, got_span = fast[span_id]
        assert (got_resource, got_span) == (resource, span), span.name
        if scope_attributes:
            got_scope = (type(got_scope[0])(name=got_scope[0].name, version=got_scope[0].version), got_scope[1])
        assert got_scope == scope, span.name


def test_scored_agent_spans_are_the_received_messages_plus_the_scores(slow_path: list[int]) -> None:
    spans = scored(received(agent_spans(traces=25, seed=3)))
    assert any(k.startswith("toolcall_eval.") for s in spans for k in (s.attributes or {}))
    assert_same_as_sdk(spans)
    assert slow_path == []  # every span took the fast path


def test_added_values_of_every_scalar_and_array_type_and_an_unknown_one(slow_path: list[int]) -> None:
    spans = received(agent_spans(traces=2, seed=1))
    extras: list[dict[str, Any]] = [
        {"b": True, "i": -3, "f": 0.25, "s": "x" * 200, "short": "ok"},
        {"arr_s": ("a", "b"), "arr_i": [1, 2], "arr_b": (True,), "arr_f": (1.5,), "empty": ()},
        {"b": False, "i": 2**40, "s": ""},
    ]
    copies = [with_attributes(s, {**dict(s.attributes or {}), **extras[n % 3]}) for n, s in enumerate(spans)]
    assert_same_as_sdk(copies)
    assert_same_as_sdk(copies)  # again, from the cache of encoded attributes
    assert slow_path == []
    odd = with_attributes(spans[0], {**dict(spans[0].attributes or {}), "bytes": b"\x00\x01"})
    assert_same_as_sdk([odd, *spans[1:]])
    assert slow_path == [1]  # only the span with a bytes value went the SDK's way


def test_equal_values_of_other_types_are_encoded_each_as_its_own_type(slow_path: list[int]) -> None:
    """``True == 1 == 1.0`` and they hash alike: a cache of encoded attributes keyed by value alone would send a
    span's ``1`` as the ``true`` an earlier span had under the same key."""
    spans = received(agent_spans(traces=1, seed=6))
    variants: list[dict[str, Any]] = [
        {"n": True, "m": 0, "k": "v"},
        {"n": 1, "m": False, "k": "v"},
        {"n": 1.0, "m": 0.0, "k": "v"},
        {"n": True, "m": 0, "k": "v"},
    ]
    for _ in range(2):  # the second time every span's attributes were seen before
        copies = [with_attributes(s, {**dict(s.attributes or {}), **variants[n % 4]}) for n, s in enumerate(spans)]
        assert_same_as_sdk(copies)
    assert slow_path == []


def test_anything_not_shown_unchanged_goes_the_sdks_way(slow_path: list[int]) -> None:
    spans = received(agent_spans(traces=2, seed=2))
    first = spans[0]
    key = next(iter(first.attributes or {}))
    replaced = with_attributes(first, {**dict(first.attributes or {}), key: "another value"})  # re-scored input
    removed = with_attributes(spans[1], {})
    provider_span = agent_spans(traces=1, seed=4)[0]  # never received: nothing remembered
    assert_same_as_sdk([replaced, removed, provider_span, *spans[2:]])
    assert slow_path == [3]


def test_a_repeated_key_in_the_request_is_not_remembered() -> None:
    spans = agent_spans(traces=1, seed=5)
    message = encode_spans(spans)
    target = message.resource_spans[0].scope_spans[0].spans[0]
    dup = target.attributes.add()
    dup.CopyFrom(target.attributes[0])
    decoded = spans_from_message(message, 100_000)
    assert E.ORIGINAL not in decoded[0].__dict__ and E.ORIGINAL in decoded[1].__dict__
    assert_same_as_sdk(decoded)


def test_events_links_status_kinds_remote_parents_and_several_resources() -> None:
    provider_a = TracerProvider(resource=Resource({"service.name": "a"}))
    provider_b = TracerProvider(resource=Resource({"service.name": "b"}, schema_url="https://b/schema"))
    finished: list[ReadableSpan] = []
    for provider in (provider_a, provider_b):
        raw = InMemorySpanExporter()
        provider.add_span_processor(SimpleSpanProcessor(raw))
        tracer = provider.get_tracer("t", "2", schema_url="https://t/schema", attributes={"scope.attr": 1})
        with tracer.start_as_current_span("root", kind=SpanKind.SERVER) as root:
            root.add_event("started", {"n": 1, "arr": (1, 2)})
            link = Link(root.get_span_context(), {"why": "retry"})
            with tracer.start_as_current_span("child", kind=SpanKind.CLIENT, links=[link]) as child:
                child.set_status(Status(StatusCode.ERROR, "boom"))
                child.set_attribute("gen_ai.tool.name", "x")
        finished += raw.get_finished_spans()
        provider.shutdown()
    spans = received(finished)
    copies = [with_attributes(s, {**dict(s.attributes or {}), "toolcall_eval.extra": 1}) for s in spans]
    request = E.ReceivedSpanEncoder().encode(copies)
    assert len(request.resource_spans) == 2
    assert_same_as_sdk(copies, scope_attributes=True)
    sent = encode_spans(finished).resource_spans[0].scope_spans[0].scope
    assert request.resource_spans[0].scope_spans[0].scope == sent  # the scope as received, attributes included


def test_the_http_exporters_body_is_the_sdks_request_decoded_and_compared(slow_path: list[int]) -> None:
    """``export.protocol: http``: the SDK's OTLP/HTTP exporter with the received-message encoder in place of its
    ``encode_spans``; what reaches a real HTTP receiver on 127.0.0.1 decodes to what the SDK's encoder makes of the
    same scored spans. The SDK's own exporter, in the same process, keeps its encoder."""
    from opentelemetry.exporter.otlp.proto.http import trace_exporter as sdk_http

    from tests.integration.otlp_receiver import HttpTraceReceiver

    spans = scored(received(agent_spans(traces=12, seed=6)))
    receiver = HttpTraceReceiver()
    exporter = E.http_exporter(endpoint=receiver.endpoint, timeout=5)
    try:
        assert isinstance(exporter, sdk_http.OTLPSpanExporter)
        assert type(exporter).export is not sdk_http.OTLPSpanExporter.export  # the hook, not the fallback
        assert sdk_http.encode_spans is encode_spans  # nothing patched for anyone else
        assert exporter.export(spans).name == "SUCCESS"
        (request,) = receiver.requests
    finally:
        exporter.shutdown()
        receiver.close()
    sent, sdk = by_span(request), by_span(encode_spans(spans))
    assert sent.keys() == sdk.keys() and len(sent) == len(spans)
    for span_id, (resource, scope, span) in sdk.items():
        assert sent[span_id] == (resource, scope, span), span.name
    assert slow_path == []  # every span went out as the message it arrived in


def test_the_grpc_exporter_sends_the_put_together_bytes_as_they_are(slow_path: list[int]) -> None:
    """``export.protocol: grpc``: the SDK's OTLP/gRPC exporter with a stub that sends the encoder's bytes without
    serializing them (``_sdk.grpc_span_exporter(raw=True)``); a real gRPC receiver on 127.0.0.1 decodes them to what
    the SDK's encoder makes of the same scored spans, and after the channel is made again (the exporter's
    reconnection) the stub still sends bytes. In the compiled suite too: ``_sdk`` is compiled there."""
    from tests.integration.otlp_receiver import GrpcTraceReceiver

    spans = scored(received(agent_spans(traces=12, seed=7)))
    receiver = GrpcTraceReceiver()
    exporter: Any = E.grpc_exporter(endpoint=f"127.0.0.1:{receiver.port}", insecure=True, timeout=5)
    try:
        assert exporter.export(spans).name == "SUCCESS"
        exporter._initialize_channel_and_stub()  # what the SDK does after UNAVAILABLE
        assert exporter.export(spans[:3]).name == "SUCCESS"
        first, again = receiver.requests
    finally:
        exporter.shutdown()
        receiver.close()
    sent, sdk = by_span(first), by_span(encode_spans(spans))
    assert sent.keys() == sdk.keys() and len(sent) == len(spans)
    for span_id, (resource, scope, span) in sdk.items():
        assert sent[span_id] == (resource, scope, span), span.name
    assert by_span(again) == by_span(encode_spans(spans[:3]))
    assert slow_path == []


@pytest.mark.parametrize("size", [0, 1, 127, 128, 300, 16_383, 16_384, 70_000])
def test_a_length_delimited_field_is_its_tag_its_length_as_a_varint_and_its_body(size: int) -> None:
    """``_field`` writes one- and two-byte lengths without the varint loop: the same bytes protobuf writes."""
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue

    body = b"x" * size
    assert E._field(b"\x12", body) == b"\x12" + E._varint(size) + body
    message = AnyValue(bytes_value=body).SerializeToString()  # field 7, length-delimited
    assert E._field(b"\x3a", body) == message or size == 0  # proto3 leaves an empty bytes field out


@pytest.mark.parametrize("value", [0.25, 0.0, -0.0, 1e308, 5e-324, float("inf"), float("-inf"), float("nan"), 8.6e-06])
def test_a_float_attribute_is_written_directly_as_protobuf_writes_it(value: float) -> None:
    """Floats (latencies, costs: new on every trace) are written without a ``KeyValue`` and never cached: the same
    bytes as the message's serialization, NaN and the signed zero included."""
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

    attributes = E._Attributes()
    body = KeyValue(key="toolcall_eval.trace.tool_latency.total", value=AnyValue(double_value=value))
    assert attributes.encode(body.key, value) == E._field(b"\x4a", body.SerializeToString())
    assert attributes._cache == {}


def test_a_run_with_floats_is_cached_without_them_and_each_spans_floats_written_in_place(slow_path: list[int]) -> None:
    """A root's run (counts, verdicts, then latencies: new floats on every trace) is kept as the bytes between its
    floats: spans with the same other values and other floats each get their own floats, in their places (first,
    in the middle, last, two in a row), and a different value beside them is not taken from the cache."""
    spans = received(agent_spans(traces=1, seed=5))
    runs: list[dict[str, Any]] = [
        {"t.first": 0.5, "t.n": 3, "t.ok": True, "t.mid": 1e-06, "t.s": "fp", "t.a": 2.5, "t.b": -0.0, "t.c": 7},
        {"t.first": 0.75, "t.n": 3, "t.ok": True, "t.mid": float("nan"), "t.s": "fp", "t.a": 3.5, "t.b": 1.0, "t.c": 7},
        {"t.first": 0.5, "t.n": 4, "t.ok": 1, "t.mid": 1e-06, "t.s": "fp", "t.a": 2.5, "t.b": -0.0, "t.c": 7},
        {"t.last": 8, "t.x": 1.25},
    ]
    for _ in range(2):  # the second time from the cache
        copies = [with_attributes(s, {**dict(s.attributes or {}), **runs[n % 4]}) for n, s in enumerate(spans)]
        assert_same_as_sdk(copies)
    assert slow_path == []
