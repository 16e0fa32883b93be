"""Spans whose parent is remote: another service's part of the same trace (traceparent over HTTP, or in an MCP
request's ``_meta``). The in-process processor sees only its own process, so such a span is the local root of its
part (``remote_parents="root"``, the default). ``serve`` may receive every service's spans: with
``remote_parents="segment"`` (its default) a remote-parented span finishes nothing, the true root (no parent at
all) gets the whole trace's verdict, and a trace whose true root never comes is counted at its TTL as
``finalized_by="segment"``."""

from __future__ import annotations

import json

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, TraceFlags

from otel_toolcall_eval import EvalConfig, ToolCallEvalProcessor
from otel_toolcall_eval import attributes as A
from tests.helpers import WEATHER_TOOL, Pipeline, chat_span, make_pipeline, scores


def _mcp_call(p: Pipeline, *, server_only: bool = False) -> None:
    """A Python agent's MCP client span around a Node server's span, the server's parent arriving as a remote
    context (its ``_meta.traceparent``); both services' spans reach this one processor, as they reach ``serve``."""
    attrs = {
        "mcp.method.name": "tools/call",
        "gen_ai.tool.name": "get_weather",
        "gen_ai.tool.call.arguments": json.dumps({"city": "Oslo"}),
        "jsonrpc.request.id": "1",
    }
    if server_only:  # the agent's side is not sent here (another backend, or not instrumented)
        remote = SpanContext(0x1F, 0x2F, is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED))
        with p.tracer.start_as_current_span(
            "tools/call get_weather", trace.set_span_in_context(NonRecordingSpan(remote)), SpanKind.SERVER, attrs
        ):
            pass
        return
    with p.tracer.start_as_current_span("invoke_agent weather", attributes={"gen_ai.operation.name": "invoke_agent"}):
        chat_span(p.tracer, [WEATHER_TOOL], [("c1", "get_weather")])
        with p.tracer.start_as_current_span("tools/call get_weather", kind=SpanKind.CLIENT, attributes=attrs) as client:
            ctx = client.get_span_context()
            remote = SpanContext(ctx.trace_id, ctx.span_id, is_remote=True, trace_flags=ctx.trace_flags)
            parent = trace.set_span_in_context(NonRecordingSpan(remote))
            with p.tracer.start_as_current_span("tools/call get_weather", parent, SpanKind.SERVER, attrs):
                pass


def _verdicts(p: Pipeline) -> list[str]:
    return [s.name for s in p.spans() if A.TRACE_CORRECT in (s.attributes or {})]


def test_a_trace_across_two_services_gets_one_verdict_on_its_true_root() -> None:
    p = make_pipeline(remote_parents="segment")
    _mcp_call(p)
    assert _verdicts(p) == ["invoke_agent weather"]
    server = next(s for s in p.spans() if s.kind is SpanKind.SERVER)
    client = next(s for s in p.spans() if s.kind is SpanKind.CLIENT)
    assert scores(server)["outcome"] == "success" and scores(server)["schema_valid"] is True  # the agent's schema
    assert scores(client)["same_call_as"] == f"{server.context.span_id:016x}"  # one call, not two
    root = scores(p.one("invoke_agent weather"))
    assert (root["trace.tool_calls"], root["trace.unexecuted_calls"], root["trace.composite_ok"]) == (1, 0, True)
    assert p.metric_sum("toolcall_eval.traces", finalized_by="root") == 1
    assert p.metric_sum("toolcall_eval.traces") == 1


def test_the_other_services_span_arriving_before_the_request_is_no_unexecuted_call() -> None:
    """Each process exports on its own schedule: the MCP server's span (flushed at once) reaches the service
    before the agent's chat span that requested the call (still in the agent's batch). The server's call id is its
    JSON-RPC id, never the model's, so the request is matched by name: answered, not unexecuted."""
    recorded = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(recorded))
    p = Pipeline(provider, provider.get_tracer("t"), recorded, None, None)  # type: ignore[arg-type]
    _mcp_call(p)
    spans = list(recorded.get_finished_spans())
    server = next(s for s in spans if s.kind is SpanKind.SERVER)
    out = InMemorySpanExporter()
    processor = ToolCallEvalProcessor(SimpleSpanProcessor(out), remote_parents="segment")
    for span in [server, *(s for s in spans if s is not server)]:
        processor.on_end(span)
    root = scores(next(s for s in out.get_finished_spans() if s.name == "invoke_agent weather"))
    assert (root["trace.tool_calls"], root["trace.unexecuted_calls"]) == (1, 0)


def test_by_default_a_remote_parented_span_is_the_root_of_its_part() -> None:
    """The processor inside one service: its part is all it sees, so the server span finishes it (and the
    agent's root, arriving later in this shared processor, writes a second verdict over the finished trace)."""
    p = make_pipeline()
    _mcp_call(p)
    assert _verdicts(p) == ["tools/call get_weather", "invoke_agent weather"]
    assert p.metric_sum("toolcall_eval.traces") == 1  # counted once, at the first root: the server's part


def test_a_segment_whose_true_root_never_comes_is_counted_at_its_ttl() -> None:
    p = make_pipeline(EvalConfig.from_dict({"limits": {"trace_ttl_seconds": 60}}), remote_parents="segment")
    now = [0.0]
    p.processor._pipeline.store._clock = lambda: now[0]  # the TTL without waiting for it
    _mcp_call(p, server_only=True)
    assert _verdicts(p) == []  # nothing written yet: the root may still come
    assert scores(p.one("tools/call get_weather"))["outcome"] == "success"
    assert p.metric_sum("toolcall_eval.traces") == 0
    now[0] = 61.0
    p.processor.force_flush()
    assert p.metric_sum("toolcall_eval.traces", finalized_by="segment") == 1
    assert p.metric_sum("toolcall_eval.state.dropped", reason="expired") == 1


def test_plain_remote_parented_traffic_holds_no_state() -> None:
    """An HTTP server span with an upstream parent and no tool activity in its trace: no trace state is made."""
    p = make_pipeline(remote_parents="segment")
    remote = SpanContext(0x3F, 0x4F, is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED))
    with p.tracer.start_as_current_span("GET /health", trace.set_span_in_context(NonRecordingSpan(remote))):
        pass
    assert p.processor.traces_in_flight == 0


def test_remote_parents_names_its_choices() -> None:
    with pytest.raises(ValueError, match="remote_parents: expected one of segment, root"):
        make_pipeline(remote_parents="wait")
