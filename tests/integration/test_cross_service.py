"""One trace across two services, one verdict: a Python agent process and the Node MCP tool server it spawns,
both exporting OTLP/HTTP to one scoring service, which exports to a real OTLP/gRPC receiver.

The agent (``mcp_agent.py``: the OpenAI client under OpenInference's instrumentation, against the local fake of the
model API; FastMCP's client over stdio) runs the shared scenario (``tests/framework_scenario.py``); its MCP client
(the MCP Python SDK) puts the trace context into each request's ``_meta``, and the server
(``node/mcp_server.mjs``, the official ``@modelcontextprotocol/sdk``) continues it: its ``tools/call`` spans have
a remote parent. With ``serve.remote_parents: segment`` (the default) those spans finish nothing and the agent's
``invoke_agent`` span, the one span without a parent, gets the whole trace's verdict. Real processes, real
exporters; nothing talks to anything but 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind

from otel_toolcall_eval import attributes as A
from otel_toolcall_eval.config import EvalConfig
from otel_toolcall_eval.serve import Service
from tests.framework_scenario import _SPANLESS, Expected, _content, check, roots_with_verdict, scored
from tests.helpers import node_ready, scored_spans, wait_for_root_verdict

from .otlp_receiver import GrpcTraceReceiver
from .scripted_openai import scripted_openai

pytestmark = pytest.mark.integration

ROOT = Path(__file__).parents[2]
pytest.importorskip("fastmcp")
pytest.importorskip("openinference.instrumentation.openai")


def _serve_config(receiver: GrpcTraceReceiver, **serve: Any) -> EvalConfig:
    """The default config with a ``serve:`` section on free ports exporting to ``receiver`` (and ``serve``'s fields)."""
    base = EvalConfig()
    section = {
        "http_port": 0,
        "grpc_port": 0,
        "export": {"endpoint": receiver.endpoint, "schedule_delay_millis": 20},
        **serve,
    }
    return base.model_copy(update={"serve": type(base.serve).model_validate(section)})


def run(remote_parents: str) -> list[ReadableSpan]:
    """The agent process (which spawns the server) against a service with that ``serve.remote_parents``; every
    span the next hop received once the service drained."""
    node_ready()
    receiver = GrpcTraceReceiver()
    service = Service(_serve_config(receiver, remote_parents=remote_parents))
    service.start()
    try:
        try:
            with scripted_openai() as model:
                env = {
                    **os.environ,
                    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": f"http://127.0.0.1:{service.http_port}/v1/traces",
                    "OPENAI_BASE_URL": model.base_url,
                }
                done = subprocess.run(
                    [sys.executable, "-m", "tests.integration.mcp_agent"],
                    cwd=ROOT,
                    env=env,
                    capture_output=True,
                    text=True,
                    timeout=120,
                )
            assert done.returncode == 0, done.stderr[-4000:]
            assert json.loads(done.stdout.strip().splitlines()[-1]) == {"turns": 6, "text": "Done."}
            wait_for_root_verdict(receiver)
        finally:
            service.stop(timeout=10)  # drained: every span the two processes sent is at the receiver now
        return scored_spans(receiver)
    finally:
        receiver.close()


# valid, valid, the bad enum (the server runs it unchecked; the agent's schema, from the tool list on its LLM spans,
# flags it), the failing tool (an isError result: ``error.type`` tool_error); book_flight never reaches the server:
# the agent's reply to it (by call id) answers its request, scored from the requests (issue 26)
CROSS_SERVICE = Expected(
    _content(True, "error.type"), correct=False, errors=3, unknown_tool_requests=0, requested=_SPANLESS
)


def test_a_python_agent_and_a_node_mcp_server_get_one_trace_and_one_verdict() -> None:
    spans = run("segment")
    trace_id = next(s.context.trace_id for s in spans if s.name == "invoke_agent weather-agent")
    mine = [s for s in spans if s.context.trace_id == trace_id]
    services = {str(s.resource.attributes.get("service.name")) for s in mine}
    assert services == {"python-agent", "node-mcp-server"}  # one trace, both processes
    # each call is scored once, on the Node server's span; the agent's client and transport spans point at it
    calls = scored(mine)
    assert {str(s.resource.attributes["service.name"]) for s in calls} == {"node-mcp-server"}
    assert all(s.kind is SpanKind.SERVER and s.parent is not None and s.parent.is_remote for s in calls)
    folded = [s for s in mine if A.SAME_CALL_AS in (s.attributes or {})]
    assert len(folded) == 2 * len(calls)
    # the agent's schema check of what the server ran unchecked; the server's isError result is a failed call
    check(mine, CROSS_SERVICE)
    (root,) = roots_with_verdict(mine)
    assert root.name == "invoke_agent weather-agent" and root.parent is None
    attributes = dict(root.attributes or {})
    # book_flight: the agent told the model it has no such tool (scored from that reply, not unexecuted); the
    # server's spans, exported before the agent's chat spans that requested them, still answer their requests
    # (matched by name: their ids are JSON-RPC ids), and are not scored from the replies a second time
    assert (attributes[A.TRACE_UNEXECUTED_CALLS], attributes[A.TRACE_REQUEST_SCORED_CALLS]) == (0, 1)


def test_with_remote_parents_as_roots_each_service_gets_its_own_verdict() -> None:
    """``serve.remote_parents: root`` (what the in-process processor does): each server span finishes the trace
    it belongs to, so the trace gets a verdict per part, the first from one call."""
    spans = run("root")
    trace_id = next(s.context.trace_id for s in spans if s.name == "invoke_agent weather-agent")
    roots = roots_with_verdict([s for s in spans if s.context.trace_id == trace_id])
    assert len(roots) > 1
    assert {str(s.resource.attributes["service.name"]) for s in roots} == {"python-agent", "node-mcp-server"}


# --- a downstream segment that reaches the service after the root ------------------------------------------------
# Two Python processes' SDKs (one TracerProvider each, their own resource and OTLP exporter: the agent's over HTTP,
# the tool server's over gRPC) against the real service; the context crosses as a W3C traceparent header, as it
# does over HTTP. The tool server's BatchSpanProcessor is flushed only once the service has scored the agent's root:
# the order each process's export schedule makes likely (docs/serve.md "Traces across services").


def _late_segment(root_grace_seconds: float) -> tuple[list[ReadableSpan], Service, Any, int]:
    """The agent's spans (root included) reach the service and are scored; then the tool server's span. The
    service still runs (the caller stops it); returns what the next hop got before the server's span was sent,
    the service, its metric reader and the server span's id."""
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    from otel_toolcall_eval.serve.metrics import SCORED
    from tests.helpers import WEATHER_TOOL, chat_span, wait_until

    receiver = GrpcTraceReceiver()
    reader = InMemoryMetricReader()
    service = Service(
        _serve_config(receiver, root_grace_seconds=root_grace_seconds),
        meter_provider=MeterProvider(metric_readers=[reader]),
    )
    service.start()
    service.receiver = receiver  # type: ignore[attr-defined]  # closed by the caller
    agent = TracerProvider(resource=Resource({"service.name": "python-agent"}))
    agent.add_span_processor(
        BatchSpanProcessor(HttpSpanExporter(endpoint=f"http://127.0.0.1:{service.http_port}/v1/traces"))
    )
    server = TracerProvider(resource=Resource({"service.name": "tool-server"}))
    server.add_span_processor(
        BatchSpanProcessor(GrpcSpanExporter(endpoint=f"127.0.0.1:{service.grpc_port}", insecure=True))
    )
    headers: dict[str, str] = {}
    tracer = agent.get_tracer("agent")
    with tracer.start_as_current_span("invoke_agent weather", attributes={"gen_ai.operation.name": "invoke_agent"}):
        chat_span(tracer, [WEATHER_TOOL], [("c1", "get_weather")])
        with tracer.start_as_current_span("POST /tools/get_weather", kind=SpanKind.CLIENT):
            TraceContextTextMapPropagator().inject(headers)
    # the tool server answered that request: its span continues the agent's context from the header
    attrs = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "get_weather",
        "gen_ai.tool.call.arguments": json.dumps({"city": "Oslo"}),
    }
    context = TraceContextTextMapPropagator().extract(headers)
    with server.get_tracer("server").start_as_current_span(
        "execute_tool get_weather", context, SpanKind.SERVER, attrs
    ) as span:
        server_span_id = span.get_span_context().span_id
    agent.force_flush()
    wait_until(lambda: service.metrics.total(SCORED) >= 3, "the agent's three spans scored")
    # at the next hop: the agent's chat and HTTP client spans, and without a window its root
    exported = 2 if root_grace_seconds else 3
    wait_until(lambda: len(scored_spans(receiver)) >= exported, f"{exported} spans at the next hop")
    before = scored_spans(receiver)
    server.force_flush()  # late: after the root
    wait_until(lambda: service.metrics.total(SCORED) >= 4, "the tool server's span scored")
    agent.shutdown()
    server.shutdown()
    return before, service, reader, server_span_id


def _metric(reader: Any, name: str) -> float:
    data = reader.get_metrics_data()
    return sum(
        point.value
        for rm in (data.resource_metrics if data else ())
        for sm in rm.scope_metrics
        for metric in sm.metrics
        if metric.name == name
        for point in metric.data.data_points
    )


def test_a_segment_arriving_after_the_root_is_in_the_verdict_within_the_window() -> None:
    before, service, reader, server_span_id = _late_segment(root_grace_seconds=60)
    try:
        assert not [s for s in before if s.parent is None]  # the root is held: its window is still open
        service.stop(timeout=10)  # ends the window at once (a flush), every span exported
        spans = scored_spans(service.receiver)  # type: ignore[attr-defined]
    finally:
        service.stop(timeout=10)
        service.receiver.close()  # type: ignore[attr-defined]
    (root,) = [s for s in spans if s.parent is None]
    attributes = dict(root.attributes or {})
    assert (attributes[A.TRACE_TOOL_CALLS], attributes[A.TRACE_UNEXECUTED_CALLS]) == (1, 0)
    (tool,) = [s for s in spans if s.context.span_id == server_span_id]
    assert str(tool.resource.attributes["service.name"]) == "tool-server"
    assert (tool.attributes or {})[A.OUTCOME] == "success" and A.LATE not in (tool.attributes or {})
    assert len(spans) == 4 and _metric(reader, "toolcall_eval.late_spans") == 0
    assert _metric(reader, "toolcall_eval.traces") == 1


def test_without_a_window_the_late_segment_is_counted_late_and_not_again() -> None:
    before, service, reader, server_span_id = _late_segment(root_grace_seconds=0)
    try:
        service.stop(timeout=10)
        spans = scored_spans(service.receiver)  # type: ignore[attr-defined]
    finally:
        service.receiver.close()  # type: ignore[attr-defined]
    (root,) = [s for s in before if s.parent is None]  # exported before the server's span was sent
    attributes = dict(root.attributes or {})
    assert (attributes[A.TRACE_TOOL_CALLS], attributes[A.TRACE_UNEXECUTED_CALLS]) == (0, 1)
    (tool,) = [s for s in spans if s.context.span_id == server_span_id]
    assert (tool.attributes or {})[A.LATE] is True and (tool.attributes or {})[A.OUTCOME] == "success"
    assert len(spans) == 4 and [s.name for s in spans if s.parent is None] == ["invoke_agent weather"]
    assert _metric(reader, "toolcall_eval.late_spans") == 1
    assert _metric(reader, "toolcall_eval.traces") == 1  # not a second time at shutdown
    assert _metric(reader, "toolcall_eval.state.dropped") == 0
