"""``serve`` in front of several agents reports each of them (issue 30): the metrics of a trace and its calls (counts,
recoveries, latency and error-rate histograms, coverage, sessions) carry the sending service's ``service.name`` and
``service.version`` (its OTLP resource) and the agent's ``gen_ai.agent.name`` (its root span), so one scorer's totals
split by service, agent and version.

Real parts: two SDK ``TracerProvider``s with their own resources export over OTLP/gRPC with the SDK's exporter to a
running ``Service``; its MeterProvider is read with the SDK's ``InMemoryMetricReader``. Only 127.0.0.1.
"""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from otel_toolcall_eval.online import metrics as M
from otel_toolcall_eval.serve import Service
from tests.helpers import agent_exporter, config_for, tool_span

from .otlp_receiver import GrpcTraceReceiver

pytestmark = pytest.mark.integration


def run_agent(svc: Service, service: str, version: str, agent: str, traces: int, fail: bool) -> int:
    """An agent service: ``traces`` traces of an ``invoke_agent`` root (the agent's name on it only) around two
    tool calls; returns the spans sent."""
    provider = TracerProvider(resource=Resource.create({"service.name": service, "service.version": version}))
    provider.add_span_processor(SimpleSpanProcessor(agent_exporter(svc)))
    tracer = provider.get_tracer("agent")
    for _ in range(traces):  # one conversation per service and version: its session
        root = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": agent,
            "gen_ai.conversation.id": f"{service}-{version}",
        }
        with tracer.start_as_current_span(f"invoke_agent {agent}", attributes=root):
            tool_span(tracer, "search", {"q": "x"}, result="ok")
            tool_span(tracer, "book", {"q": "y"}, result="ok", error=RuntimeError("down") if fail else None)
    provider.shutdown()
    return traces * 3


def points(reader: InMemoryMetricReader, name: str) -> dict[tuple[tuple[str, Any], ...], Any]:
    data = reader.get_metrics_data()
    assert data is not None
    return {
        tuple(sorted((p.attributes or {}).items())): getattr(p, "value", None)
        for rm in data.resource_metrics
        for sm in rm.scope_metrics
        for m in sm.metrics
        if m.name == name
        for p in m.data.data_points
    }


def total(found: dict[tuple[tuple[str, Any], ...], Any], **labels: str) -> int:
    dotted = {
        "service_name": "service.name",
        "gen_ai_agent_name": "gen_ai.agent.name",
        "service_version": "service.version",
    }
    wanted = {dotted.get(k, k): v for k, v in labels.items()}
    return sum(v for attrs, v in found.items() if wanted.items() <= dict(attrs).items())


def counts(reader: InMemoryMetricReader, name: str) -> dict[tuple[tuple[str, Any], ...], Any]:
    """A histogram's points as their counts (``points`` gives the counters' values)."""
    data = reader.get_metrics_data()
    assert data is not None
    return {
        tuple(sorted((p.attributes or {}).items())): p.count
        for rm in data.resource_metrics
        for sm in rm.scope_metrics
        for m in sm.metrics
        if m.name == name
        for p in m.data.data_points
    }


def test_one_scorer_splits_its_metrics_by_service_agent_and_version() -> None:
    sink = GrpcTraceReceiver()
    reader = InMemoryMetricReader()
    svc = Service(config_for(sink), meter_provider=MeterProvider(metric_readers=[reader]))
    svc.start()
    try:
        sent = run_agent(svc, "travel", "1.4.0", "planner", traces=3, fail=False)
        sent += run_agent(svc, "travel", "1.5.0", "planner", traces=2, fail=True)
        sent += run_agent(svc, "support", "0.9.1", "helpdesk", traces=4, fail=False)
        sink.wait_for_spans(sent)
    finally:
        svc.stop(timeout=10)
        sink.close()
    traces = points(reader, M.TRACES)
    calls = points(reader, M.TOOL_CALLS)
    planner = {"service_name": "travel", "gen_ai_agent_name": "planner"}
    assert total(traces, **planner, service_version="1.4.0", composite_ok="true") == 3
    assert total(traces, **planner, service_version="1.5.0", composite_ok="false") == 2
    assert total(traces, service_name="support", gen_ai_agent_name="helpdesk", service_version="0.9.1") == 4
    assert total(traces) == 9  # every trace carries its source: nothing unlabelled
    assert total(calls, **planner, service_version="1.5.0", outcome="execution_failed", tool="book") == 2
    assert total(calls, **planner, service_version="1.4.0", outcome="success") == 6
    assert total(calls, service_name="support", outcome="success") == 8
    assert total(calls) == 18
    # the trace's other metrics, by the same source (the shipped scorer config: metrics.histograms on)
    recoveries = points(reader, M.RECOVERIES)  # the failed `book` is the trace's last step: nothing reacted to it
    assert total(recoveries, **planner, service_version="1.5.0", tool="book", **{"class": "carried_on"}) == 2
    assert total(recoveries) == 2
    latency = counts(reader, M.TOOL_LATENCY)
    assert total(latency, **planner, service_version="1.4.0", tool="search") == 3
    assert total(latency, service_name="support", gen_ai_agent_name="helpdesk", service_version="0.9.1") == 8
    assert total(latency) == 18
    error_rate = counts(reader, M.TRACE_TOOL_ERROR_RATE)
    assert total(error_rate, **planner, service_version="1.5.0") == 2 and total(error_rate) == 9
    assert total(points(reader, M.COVERAGE_CALLS), **planner, service_version="1.4.0") == 6
    # each service and version's conversation is a session, emitted when the scorer stops (its flush)
    sessions = points(reader, M.SESSIONS)
    assert total(sessions, **planner, service_version="1.5.0", outcome="fail", finalized_by="flush") == 1
    assert total(sessions, **planner, service_version="1.4.0", outcome="pass") == 1
    assert total(sessions, service_name="support", gen_ai_agent_name="helpdesk", service_version="0.9.1") == 1
    assert total(sessions) == 3
    assert total(counts(reader, M.SESSION_TURNS), service_name="support", outcome="pass") == 1
    assert points(reader, M.LABEL_OVERFLOW) == {}
