"""Wire test: the real OTLP exporters (gRPC and HTTP/protobuf) behind ``ToolCallEvalProcessor``.

Spans come from a real ``TracerProvider``; a ``BatchSpanProcessor`` (or ``SimpleSpanProcessor``) with the
real exporter is wrapped by the eval processor and sends to a receiver this test starts on 127.0.0.1. The
assertions are on the decoded ``ExportTraceServiceRequest``: what a collector would really get.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from opentelemetry import trace as trace_api
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter
from opentelemetry.exporter.otlp.proto.http import Compression as HttpCompression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter
from opentelemetry.proto.trace.v1.trace_pb2 import Span as PbSpan
from opentelemetry.proto.trace.v1.trace_pb2 import SpanFlags as PbSpanFlags
from opentelemetry.proto.trace.v1.trace_pb2 import Status as PbStatus
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanLimits, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Link, NonRecordingSpan, SpanContext, SpanKind, Status, StatusCode, TraceFlags
from opentelemetry.trace.span import TraceState

from otel_toolcall_eval import ToolCallEvalProcessor
from otel_toolcall_eval import attributes as A

from .otlp_receiver import GrpcTraceReceiver, HttpTraceReceiver, WireSpan, attributes, raw_attributes

pytestmark = pytest.mark.integration

SERVICE_NAME = "wire-test-agent"
SCOPE_NAME = "wire-test.agent"
SCOPE_VERSION = "1.2.3"
TOOL_DEFINITIONS = json.dumps(
    [
        {
            "type": "function",
            "name": "get_weather",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        }
    ]
)
# The model's turn requested both calls: they form one parallel batch (toolcall_eval.batch == 1).
OUTPUT_MESSAGES = json.dumps(
    [
        {
            "role": "assistant",
            "parts": [
                {"type": "tool_call", "id": "call_ok", "name": "get_weather", "arguments": {"city": "Paris"}},
                {"type": "tool_call", "id": "call_bad", "name": "get_weather", "arguments": {"city": 3}},
            ],
        }
    ]
)
ROOT_NAME = "invoke_agent weather_agent"
CHAT_NAME = "chat gpt-test"
TOOL_NAME = "execute_tool get_weather"
PLAIN_NAME = "format_answer"
MAX_EVENTS = 2  # the schema-invalid tool span records 3 events, so one is dropped: dropped counts must survive

# OTLP span flags (trace.proto): the context-has-is-remote bit is always set by the Python encoder.
HAS_IS_REMOTE = PbSpanFlags.SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK
IS_REMOTE = PbSpanFlags.SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK


# --- environment and fixtures ----------------------------------------------------------------------


@pytest.fixture(autouse=True)
def _hermetic_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No OTEL_* settings (headers, compression, timeouts) and no proxy may leak in from the environment."""
    for var in list(os.environ):
        if var.startswith("OTEL_") or var.lower() in {"http_proxy", "https_proxy", "all_proxy", "grpc_proxy"}:
            monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")


@pytest.fixture(params=["grpc", "http", "http-gzip"])
def transport(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def receiver(transport: str) -> Iterator[GrpcTraceReceiver | HttpTraceReceiver]:
    rx: GrpcTraceReceiver | HttpTraceReceiver = GrpcTraceReceiver() if transport == "grpc" else HttpTraceReceiver()
    try:
        yield rx
    finally:
        rx.close()


class _ResultsMixin:
    """Keeps each export's result. The export itself is the real exporter's, unchanged."""

    results: list[SpanExportResult]

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        result: SpanExportResult = super().export(spans)  # type: ignore[misc]
        self.results.append(result)
        return result


class RecordingGrpcSpanExporter(_ResultsMixin, GrpcSpanExporter):
    results: list[SpanExportResult]


class RecordingHttpSpanExporter(_ResultsMixin, HttpSpanExporter):
    results: list[SpanExportResult]


def make_exporter(
    transport: str, endpoint: str, timeout: float
) -> RecordingGrpcSpanExporter | RecordingHttpSpanExporter:
    exporter: RecordingGrpcSpanExporter | RecordingHttpSpanExporter
    if transport == "grpc":
        exporter = RecordingGrpcSpanExporter(
            endpoint=endpoint,
            insecure=True,
            timeout=timeout,
            channel_options=(("grpc.enable_http_proxy", 0),),  # type: ignore[arg-type]
        )
    else:
        compression = HttpCompression.Gzip if transport == "http-gzip" else HttpCompression.NoCompression
        exporter = RecordingHttpSpanExporter(endpoint=endpoint, timeout=timeout, compression=compression)
    exporter.results = []
    return exporter


@dataclass
class Pipeline:
    provider: TracerProvider
    tracer: trace_api.Tracer
    originals: InMemorySpanExporter  # the spans as the application ended them, before enrichment
    evaluator: ToolCallEvalProcessor
    exporter: RecordingGrpcSpanExporter | RecordingHttpSpanExporter
    closed: bool = field(default=False)

    def flush(self) -> bool:
        return self.provider.force_flush(10_000)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.provider.shutdown()

    def original_spans(self) -> dict[int, ReadableSpan]:
        spans = self.originals.get_finished_spans()
        by_id = {s.context.span_id: s for s in spans if s.context is not None}
        assert len(by_id) == len(spans)
        return by_id


@pytest.fixture
def make_pipeline(transport: str, receiver: GrpcTraceReceiver | HttpTraceReceiver) -> Iterator[Callable[..., Pipeline]]:
    built: list[Pipeline] = []

    def build(processor: str = "batch", timeout: float = 10.0) -> Pipeline:
        exporter = make_exporter(transport, receiver.endpoint, timeout)
        downstream: SpanProcessor
        if processor == "batch":
            # A long schedule delay: the export is the one force_flush triggers, not a timer.
            downstream = BatchSpanProcessor(exporter, schedule_delay_millis=30_000)
        else:
            downstream = SimpleSpanProcessor(exporter)
        provider = TracerProvider(
            resource=Resource.create({"service.name": SERVICE_NAME, "deployment.environment.name": "wire-test"}),
            span_limits=SpanLimits(max_events=MAX_EVENTS),
            shutdown_on_exit=False,
        )
        originals = InMemorySpanExporter()
        provider.add_span_processor(SimpleSpanProcessor(originals))
        evaluator = ToolCallEvalProcessor(downstream)
        provider.add_span_processor(evaluator)
        pipeline = Pipeline(provider, provider.get_tracer(SCOPE_NAME, SCOPE_VERSION), originals, evaluator, exporter)
        built.append(pipeline)
        return pipeline

    yield build
    for pipeline in built:
        pipeline.close()


# --- the application: one agent trace -----------------------------------------------------------------


def produce_agent_trace(tracer: trace_api.Tracer, context: Any = None) -> int:
    """invoke_agent root > chat (tool definitions) > valid tool call > schema-invalid tool call > plain span."""
    with tracer.start_as_current_span(
        ROOT_NAME,
        context=context,
        kind=SpanKind.SERVER,
        attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "weather_agent"},
    ) as root:
        with tracer.start_as_current_span(
            CHAT_NAME,
            kind=SpanKind.CLIENT,
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": "gpt-test",
                A.GEN_AI_TOOL_DEFINITIONS: TOOL_DEFINITIONS,
                A.GEN_AI_OUTPUT_MESSAGES: OUTPUT_MESSAGES,
                "gen_ai.usage.input_tokens": 42,
            },
        ) as chat:
            chat.add_event("gen_ai.choice", {"index": 0, "finish_reason": "tool_calls"})
        with tracer.start_as_current_span(
            TOOL_NAME,
            links=[Link(chat.get_span_context(), {"link.reason": "requested_by"})],
            attributes={
                A.GEN_AI_OPERATION_NAME: "execute_tool",
                A.GEN_AI_TOOL_NAME: "get_weather",
                A.GEN_AI_TOOL_CALL_ID: "call_ok",
                A.GEN_AI_TOOL_CALL_ARGUMENTS: '{"city": "Paris"}',
                A.GEN_AI_TOOL_CALL_RESULT: "sunny, 21C",
                "app.tags": ("weather", "eu"),
            },
        ) as ok_tool:
            ok_tool.add_event("tool.cache_miss", {"cache.key": "paris", "attempt": 1})
            ok_tool.set_status(Status(StatusCode.OK))
        with tracer.start_as_current_span(
            TOOL_NAME,
            record_exception=False,
            set_status_on_exception=False,
            attributes={
                A.GEN_AI_OPERATION_NAME: "execute_tool",
                A.GEN_AI_TOOL_NAME: "get_weather",
                A.GEN_AI_TOOL_CALL_ID: "call_bad",
                A.GEN_AI_TOOL_CALL_ARGUMENTS: '{"city": 3}',
            },
        ) as bad_tool:
            bad_tool.add_event("tool.validate", {"step": "arguments"})
            bad_tool.add_event("tool.retry", {"attempt": 2})
            bad_tool.record_exception(TypeError("city must be a string"))
            bad_tool.set_status(Status(StatusCode.ERROR, "city must be a string"))
        with tracer.start_as_current_span(PLAIN_NAME, attributes={"app.step": "format", "app.chars": 17}):
            pass
        return root.get_span_context().trace_id


# --- decoding helpers ----------------------------------------------------------------------------------


def _plain(value: Any) -> Any:
    """SDK attribute values as they decode from the wire (sequences become lists)."""
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    return value


def _plain_attrs(attrs: Mapping[str, Any] | None) -> dict[str, Any]:
    return {k: _plain(v) for k, v in (attrs or {}).items()}


def _eval_keys(span: PbSpan) -> set[str]:
    return {kv.key for kv in span.attributes if kv.key.startswith(A.PREFIX)}


def _by_role(spans: list[WireSpan]) -> dict[str, PbSpan]:
    roles: dict[str, PbSpan] = {}
    for ws in spans:
        s = ws.span
        attrs = attributes(s.attributes)
        role = {ROOT_NAME: "root", CHAT_NAME: "chat", PLAIN_NAME: "plain"}.get(s.name)
        if s.name == TOOL_NAME:
            role = {"call_ok": "ok_tool", "call_bad": "bad_tool"}[attrs[A.GEN_AI_TOOL_CALL_ID]]
        assert role is not None, f"unexpected span {s.name!r} on the wire"
        assert role not in roles, f"{role} arrived twice"
        roles[role] = s
    assert set(roles) == {"root", "chat", "ok_tool", "bad_tool", "plain"}
    return roles


def _wire_spans_of(spans: list[WireSpan], trace_id: int) -> list[WireSpan]:
    tid = trace_id.to_bytes(16, "big")
    return [ws for ws in spans if ws.span.trace_id == tid]


def assert_preserved(wire: PbSpan, original: ReadableSpan) -> None:
    """Everything of the original span except the added toolcall_eval.* attributes arrives unchanged."""
    ctx = original.context
    assert ctx is not None
    assert wire.trace_id == ctx.trace_id.to_bytes(16, "big")
    assert wire.span_id == ctx.span_id.to_bytes(8, "big")
    assert wire.parent_span_id == (original.parent.span_id.to_bytes(8, "big") if original.parent else b"")
    assert wire.trace_state == ctx.trace_state.to_header()
    # The Python encoder sends only the is-remote bits of the parent (not the W3C trace flags).
    assert wire.flags == HAS_IS_REMOTE | (IS_REMOTE if original.parent and original.parent.is_remote else 0)
    assert wire.name == original.name
    assert wire.kind == original.kind.value + 1  # OTLP kinds are the SDK's shifted by SPAN_KIND_UNSPECIFIED
    assert wire.start_time_unix_nano == original.start_time
    assert wire.end_time_unix_nano == original.end_time
    assert wire.status.code == original.status.status_code.value
    assert wire.status.message == (original.status.description or "")
    assert [(e.name, e.time_unix_nano, attributes(e.attributes)) for e in wire.events] == [
        (e.name, e.timestamp, _plain_attrs(e.attributes)) for e in original.events
    ]
    assert [(link.trace_id, link.span_id, attributes(link.attributes)) for link in wire.links] == [
        (
            link.context.trace_id.to_bytes(16, "big"),
            link.context.span_id.to_bytes(8, "big"),
            _plain_attrs(link.attributes),
        )
        for link in original.links
    ]
    assert wire.dropped_attributes_count == original.dropped_attributes
    assert wire.dropped_events_count == original.dropped_events
    assert wire.dropped_links_count == original.dropped_links
    without_eval = {k: v for k, v in attributes(wire.attributes).items() if not k.startswith(A.PREFIX)}
    assert without_eval == _plain_attrs(original.attributes)


def _typed(span: PbSpan, key: str, kind: str) -> Any:
    raw = raw_attributes(span.attributes)
    assert key in raw, f"{key} missing on {span.name!r}; has {sorted(raw)}"
    assert raw[key].WhichOneof("value") == kind, f"{key} sent as {raw[key].WhichOneof('value')}, want {kind}"
    return getattr(raw[key], kind)


def assert_scored_trace(roles: dict[str, PbSpan]) -> None:
    ok, bad, root = roles["ok_tool"], roles["bad_tool"], roles["root"]

    assert _typed(ok, A.SCHEMA_VALID, "bool_value") is True
    assert A.SCHEMA_ERRORS not in _eval_keys(ok)
    assert _typed(ok, A.OUTCOME, "string_value") == "success"
    assert _typed(ok, A.STEP, "int_value") == 1
    assert _typed(ok, A.BATCH, "int_value") == 1
    assert _typed(ok, A.PARSE_OK, "bool_value") is True
    assert _typed(ok, A.TOOL_KNOWN, "bool_value") is True
    assert _typed(ok, A.SCHEMA_SOURCE, "string_value") == "trace"
    assert _typed(ok, A.CONVENTION, "string_value") == "genai"
    assert _typed(ok, A.DUPLICATE, "bool_value") is False
    assert A.ERROR_SOURCE not in _eval_keys(ok)

    assert _typed(bad, A.SCHEMA_VALID, "bool_value") is False
    errors = _typed(bad, A.SCHEMA_ERRORS, "array_value")
    assert [v.WhichOneof("value") for v in errors.values] == ["string_value"]
    assert errors.values[0].string_value.startswith("/city: ")
    assert "string" in errors.values[0].string_value
    assert _typed(bad, A.OUTCOME, "string_value") == "malformed_call"
    assert _typed(bad, A.ERROR_SOURCE, "string_value") == "schema"
    assert _typed(bad, A.STEP, "int_value") == 2
    assert _typed(bad, A.BATCH, "int_value") == 1
    assert _typed(bad, A.PARSE_OK, "bool_value") is True
    # Parallel calls of one model turn with different arguments are not duplicates.
    assert _typed(bad, A.DUPLICATE, "bool_value") is False

    assert _typed(root, A.TRACE_TOOL_CALLS, "int_value") == 2
    assert _typed(root, A.TRACE_ERRORS, "int_value") == 1
    assert _typed(root, A.TRACE_VIOLATIONS, "int_value") == 0
    assert _typed(root, A.TRACE_OVER_BUDGET, "bool_value") is False
    assert _typed(root, A.TRACE_CORRECT, "bool_value") is False
    assert _typed(root, A.TRACE_COMPOSITE_OK, "bool_value") is False
    # Both requested calls ran.
    assert _typed(root, A.TRACE_UNEXECUTED_CALLS, "int_value") == 0
    assert _typed(root, A.TRACE_UNKNOWN_TOOL_REQUESTS, "int_value") == 0
    # The root is not a tool call: it carries the verdict and the trace's numbers (cost, latency, tool list...) only.
    stats = {a.name for a in A.TRACE_STATS_ATTRIBUTES}
    verdict = {*A.TRACE_VERDICT, A.TRACE_UNEXECUTED_CALLS, A.TRACE_UNKNOWN_TOOL_REQUESTS}
    assert verdict <= _eval_keys(root) <= verdict | stats
    assert _typed(root, A.TRACE_TOOL_ERROR_RATE, "double_value") == 0.5
    assert len(_typed(root, A.TRACE_TOOL_LIST_FINGERPRINT, "string_value")) == 16

    assert _eval_keys(roles["plain"]) == set()
    assert _eval_keys(roles["chat"]) == set()
    for span in roles.values():
        assert A.EVAL_ERROR not in _eval_keys(span)


# --- tests ----------------------------------------------------------------------------------------------


def test_enriched_spans_arrive_over_the_wire(
    transport: str, receiver: GrpcTraceReceiver | HttpTraceReceiver, make_pipeline: Callable[..., Pipeline]
) -> None:
    pipeline = make_pipeline()
    trace_id = produce_agent_trace(pipeline.tracer)
    assert pipeline.flush() is True
    receiver.wait_for_spans(5)
    pipeline.close()  # shutdown must not re-send anything
    assert pipeline.exporter.results and set(pipeline.exporter.results) == {SpanExportResult.SUCCESS}

    wire = receiver.spans()
    originals = pipeline.original_spans()
    assert len(originals) == 5
    # Every span arrives exactly once: the enriched copy replaces the original, it is not sent in addition.
    assert sorted(int.from_bytes(ws.span.span_id, "big") for ws in wire) == sorted(originals)
    assert {ws.span.trace_id for ws in wire} == {trace_id.to_bytes(16, "big")}

    roles = _by_role(wire)
    assert_scored_trace(roles)
    for span in roles.values():
        assert_preserved(span, originals[int.from_bytes(span.span_id, "big")])

    # The tree as sent: the root has no parent, every other span is the root's child.
    root_id = roles["root"].span_id
    assert roles["root"].parent_span_id == b""
    assert all(roles[r].parent_span_id == root_id for r in ("chat", "ok_tool", "bad_tool", "plain"))
    # Status, events and dropped counts of the enriched tool spans specifically (also covered above).
    assert roles["ok_tool"].status.code == PbStatus.STATUS_CODE_OK
    assert roles["bad_tool"].status.code == PbStatus.STATUS_CODE_ERROR
    assert roles["bad_tool"].status.message == "city must be a string"
    assert [e.name for e in roles["bad_tool"].events] == ["tool.retry", "exception"]
    assert roles["bad_tool"].dropped_events_count == 1
    assert [e.name for e in roles["ok_tool"].events] == ["tool.cache_miss"]
    assert roles["ok_tool"].links[0].span_id == roles["chat"].span_id
    assert roles["root"].kind == PbSpan.SPAN_KIND_SERVER

    for ws in wire:
        resource = attributes(ws.resource.attributes)
        assert resource["service.name"] == SERVICE_NAME
        assert resource["deployment.environment.name"] == "wire-test"
        assert resource["telemetry.sdk.language"] == "python"
        assert ws.scope.name == SCOPE_NAME
        assert ws.scope.version == SCOPE_VERSION

    metadata = receiver.metadata
    assert metadata
    if transport.startswith("http"):
        assert {m.get("content-type") for m in metadata} == {"application/x-protobuf"}
        expected_encoding = "gzip" if transport == "http-gzip" else None
        assert {m.get("content-encoding") for m in metadata} == {expected_encoding}
    assert pipeline.evaluator.traces_in_flight == 0


def test_local_root_under_remote_parent_carries_verdict_and_keeps_context(
    receiver: GrpcTraceReceiver | HttpTraceReceiver, make_pipeline: Callable[..., Pipeline]
) -> None:
    """An agent serving a request: its root span has a remote parent and a tracestate to propagate."""
    remote = SpanContext(
        trace_id=0x4BF92F3577B34DA6A3CE929D0E0E4736,
        span_id=0x00F067AA0BA902B7,
        is_remote=True,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
        trace_state=TraceState([("acme", "tenant-7")]),
    )
    pipeline = make_pipeline()
    trace_id = produce_agent_trace(pipeline.tracer, context=trace_api.set_span_in_context(NonRecordingSpan(remote)))
    assert trace_id == remote.trace_id
    assert pipeline.flush() is True
    receiver.wait_for_spans(5)
    pipeline.close()

    wire = receiver.spans()
    originals = pipeline.original_spans()
    roles = _by_role(wire)
    assert_scored_trace(roles)
    for span in roles.values():
        assert_preserved(span, originals[int.from_bytes(span.span_id, "big")])
        assert span.trace_state == "acme=tenant-7"
    root = roles["root"]
    assert root.parent_span_id == remote.span_id.to_bytes(8, "big")
    assert root.flags & IS_REMOTE
    assert not any(roles[r].flags & IS_REMOTE for r in ("chat", "ok_tool", "bad_tool", "plain"))


@pytest.mark.parametrize("processor", ["batch", "simple"])
@pytest.mark.parametrize("transport", ["grpc", "http"])
def test_export_failure_does_not_raise_into_application(
    transport: str,
    processor: str,
    receiver: GrpcTraceReceiver | HttpTraceReceiver,
    make_pipeline: Callable[..., Pipeline],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The receiver answers gRPC UNAVAILABLE / HTTP 500. Ending spans, flushing and shutting down must not raise;
    with ``SimpleSpanProcessor`` the failing export runs inside ``span.end()`` on the application thread."""
    caplog.set_level(logging.WARNING)
    receiver.fail = True
    # 0.5 s: shorter than the exporters' first retry backoff (~1 s), so UNAVAILABLE fails without retrying.
    pipeline = make_pipeline(processor, timeout=0.5)

    started = time.monotonic()
    failed_trace = produce_agent_trace(pipeline.tracer)  # raises if anything leaks out of span.end()
    pipeline.flush()
    assert time.monotonic() - started < 10, "a failing receiver must not stall the application"

    # The failure was real: the receiver got (and rejected) the enriched spans, and every export failed.
    failed = receiver.wait_for_spans(5)
    assert_scored_trace(_by_role(_wire_spans_of(failed, failed_trace)))
    assert pipeline.exporter.results
    assert set(pipeline.exporter.results) == {SpanExportResult.FAILURE}
    if processor == "simple":
        assert len(pipeline.exporter.results) == 5  # one failed export per span.end()
    # Nothing failed inside the eval processor: the downstream absorbed the export failure.
    assert [r.getMessage() for r in caplog.records if r.name.startswith("otel_toolcall_eval")] == []

    # The receiver recovers: the next trace is exported and scored on its own (no state leaked from the failure).
    receiver.fail = False
    receiver.clear()
    caplog.clear()
    pipeline.exporter.results.clear()
    next_trace = produce_agent_trace(pipeline.tracer)
    assert pipeline.flush() is True
    delivered = receiver.wait_for_spans(5)
    assert_scored_trace(_by_role(_wire_spans_of(delivered, next_trace)))
    assert set(pipeline.exporter.results) == {SpanExportResult.SUCCESS}
    assert pipeline.evaluator.traces_in_flight == 0
    pipeline.close()
    assert [r.getMessage() for r in caplog.records if r.name.startswith("otel_toolcall_eval")] == []
