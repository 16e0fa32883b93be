"""Spans that reach the processor after their trace's root (``serve``: each process exports on its own schedule, so
a tool server's spans often arrive after the agent's root). Through the real processor, fed recorded spans in the
order a service receives them; the store's clock is injected (nothing sleeps)."""

from __future__ import annotations

import json

import pytest
from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind

from otel_toolcall_eval import EvalConfig, ToolCallEvalProcessor
from otel_toolcall_eval import attributes as A
from otel_toolcall_eval.config import ConfigError
from otel_toolcall_eval.online.lifecycle import timer_period
from tests.helpers import WEATHER_TOOL, Pipeline, TimerSteps, chat_span


def recorded_trace(mcp: bool = False) -> tuple[list[ReadableSpan], list[ReadableSpan]]:
    """One trace over two services, as recorded: the agent's spans (its root last) and the tool server's span,
    whose parent is remote: the agent's HTTP client span (no tool span of its own: the call is only on the
    server's side), or with ``mcp`` the agent's MCP client span (a tool span of the same call)."""
    recorded = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(recorded))
    tracer = provider.get_tracer("t")
    call = {"gen_ai.tool.name": "get_weather", "gen_ai.tool.call.arguments": json.dumps({"city": "Oslo"})}
    if mcp:
        client_name, client_attrs = "tools/call get_weather", {"mcp.method.name": "tools/call", **call}
        server_attrs = {"mcp.method.name": "tools/call", "jsonrpc.request.id": "1", **call}
    else:
        client_name, client_attrs = "POST /tools", {"http.request.method": "POST"}
        server_attrs = {"gen_ai.operation.name": "execute_tool", **call}
    with tracer.start_as_current_span("invoke_agent weather", attributes={"gen_ai.operation.name": "invoke_agent"}):
        chat_span(tracer, [WEATHER_TOOL], [("c1", "get_weather")])
        with tracer.start_as_current_span(client_name, kind=SpanKind.CLIENT, attributes=client_attrs) as client:
            ctx = client.get_span_context()
            remote = SpanContext(ctx.trace_id, ctx.span_id, is_remote=True, trace_flags=ctx.trace_flags)
            parent = trace.set_span_in_context(NonRecordingSpan(remote))
            with tracer.start_as_current_span("execute_tool get_weather", parent, SpanKind.SERVER, server_attrs):
                pass
    spans = list(recorded.get_finished_spans())
    server = [s for s in spans if s.kind is SpanKind.SERVER]
    return [s for s in spans if s.kind is not SpanKind.SERVER], server


def service_processor(config: dict | None = None, **kwargs: object) -> tuple[Pipeline, list[float]]:
    """The processor as ``serve`` builds it (segments, inline), with the store's clock injected."""
    out = InMemorySpanExporter()
    reader = InMemoryMetricReader()
    cfg = EvalConfig.from_dict({"evaluation": {"mode": "inline"}, **(config or {})})
    processor = ToolCallEvalProcessor(
        SimpleSpanProcessor(out),
        cfg,
        meter_provider=MeterProvider(metric_readers=[reader]),
        remote_parents="segment",
        **kwargs,  # type: ignore[arg-type]
    )
    now = [1000.0]
    processor._pipeline.store._clock = lambda: now[0]
    return Pipeline(TracerProvider(), trace.get_tracer("unused"), out, processor, reader), now


def feed(p: Pipeline, spans: list[ReadableSpan]) -> None:
    for span in spans:
        p.processor.on_end(span)


def test_a_late_segment_after_many_finished_traces_opens_no_second_trace() -> None:
    """The bug: once the record of finished traces has moved on (a busy service), a tool server's span arriving
    after its root opened a new trace state, which expired at the TTL and was counted a second time
    (``finalized_by="segment"``, and ``state.dropped{reason="expired"}``)."""
    p, now = service_processor({"limits": {"trace_ttl_seconds": 60}})
    agent, server = recorded_trace()
    feed(p, agent)  # the agent exports first: its root finishes the trace
    for _ in range(300):  # other traces finish meanwhile
        other, other_server = recorded_trace()
        feed(p, other_server + other)
    assert p.metric_sum("toolcall_eval.traces") == 301
    feed(p, server)  # the tool server's span of the first trace, late
    (late,) = [s for s in p.spans() if s.context.span_id == server[0].context.span_id]
    assert (late.attributes or {})[A.OUTCOME] == "success"  # still scored per call
    assert p.processor.traces_in_flight == 0  # no new state for a finished trace
    now[0] += 61
    p.processor.force_flush()
    assert p.metric_sum("toolcall_eval.traces") == 301
    assert p.metric_sum("toolcall_eval.traces", finalized_by="segment") == 0
    assert p.metric_sum("toolcall_eval.state.dropped") == 0


def once_each(p: Pipeline, *groups: list[ReadableSpan]) -> bool:
    """Every span of ``groups`` reached the exporter, exactly once, and nothing else did."""
    sent = sorted(s.context.span_id for group in groups for s in group)
    return sorted(s.context.span_id for s in p.spans()) == sent


def root_of(p: Pipeline) -> dict[str, object]:
    (root,) = [s for s in p.spans() if s.name == "invoke_agent weather"]
    return dict(root.attributes or {})


def test_without_a_window_a_late_segment_is_not_in_the_verdict_and_counted_late() -> None:
    p, _ = service_processor()
    agent, server = recorded_trace()
    feed(p, agent + server)
    root = root_of(p)  # the verdict was written before the server's call arrived: the request looks unexecuted
    assert (root[A.TRACE_TOOL_CALLS], root[A.TRACE_UNEXECUTED_CALLS]) == (0, 1)
    (late,) = [s for s in p.spans() if s.kind is SpanKind.SERVER]
    assert (late.attributes or {})[A.LATE] is True and (late.attributes or {})[A.OUTCOME] == "success"
    assert p.metric_sum("toolcall_eval.late_spans") == 1
    assert p.metric_sum("toolcall_eval.traces") == 1 and p.processor.traces_in_flight == 0
    assert once_each(p, agent, server)


def test_spans_arriving_in_the_window_are_in_the_roots_verdict() -> None:
    p, now = service_processor(root_grace_seconds=5)
    agent, server = recorded_trace()
    feed(p, agent)
    assert [s for s in p.spans() if s.name == "invoke_agent weather"] == []  # held
    assert p.processor._pipeline.store.held_roots == 1
    now[0] += 4.9
    feed(p, server)  # within the window
    (server_out,) = [s for s in p.spans() if s.kind is SpanKind.SERVER]
    assert A.LATE not in (server_out.attributes or {})
    assert p.metric_sum("toolcall_eval.traces") == 0  # no verdict yet
    now[0] += 0.2
    _, other_server = recorded_trace()
    feed(p, other_server)  # the next trace's first span ends the windows that are over
    root = root_of(p)
    assert (root[A.TRACE_TOOL_CALLS], root[A.TRACE_UNEXECUTED_CALLS], root[A.TRACE_COMPOSITE_OK]) == (1, 0, True)
    assert p.metric_sum("toolcall_eval.traces", finalized_by="root") == 1
    assert p.metric_sum("toolcall_eval.late_spans") == 0
    assert p.metric_sum("toolcall_eval.state.dropped") == 0
    assert p.processor._pipeline.store.held_roots == 0
    p.processor.force_flush()
    assert p.metric_sum("toolcall_eval.traces") == 1  # the other trace is no root's: not counted at a flush
    assert once_each(p, agent, server, other_server)


def test_a_span_after_the_window_is_late_and_opens_nothing() -> None:
    p, now = service_processor(root_grace_seconds=5)
    agent, server = recorded_trace()
    feed(p, agent)
    now[0] += 6
    p.processor._pipeline.store.expire()  # what the timer does
    assert root_of(p)[A.TRACE_TOOL_CALLS] == 0
    feed(p, server)
    (late,) = [s for s in p.spans() if s.kind is SpanKind.SERVER]
    assert (late.attributes or {})[A.LATE] is True
    assert p.metric_sum("toolcall_eval.late_spans") == 1
    assert p.processor.traces_in_flight == 0
    now[0] += 1000  # past any TTL: nothing expires, nothing is counted again
    p.processor.force_flush()
    p.processor.shutdown()
    assert p.metric_sum("toolcall_eval.traces") == 1
    assert p.metric_sum("toolcall_eval.state.dropped") == 0
    assert once_each(p, agent, server)


def test_the_timer_ends_the_window_when_no_span_comes() -> None:

    p, now = service_processor(root_grace_seconds=4)
    ticker = p.processor._pipeline.ticker
    assert ticker is not None and not ticker.running  # started by the first held root
    steps = TimerSteps()
    ticker._wait = steps.wait
    agent, server = recorded_trace()
    feed(p, agent + server)  # the server's span right after the root: inside the window
    steps.reached_wait()
    assert steps.periods == [1.0]  # a quarter of the window
    steps.tick()
    assert [s.name for s in p.spans() if s.name == "invoke_agent weather"] == []  # not over yet
    now[0] += 4
    steps.tick()
    assert root_of(p)[A.TRACE_TOOL_CALLS] == 1
    steps.tick()
    assert once_each(p, agent, server) and p.metric_sum("toolcall_eval.traces") == 1
    p.processor.shutdown()
    assert not ticker.running and once_each(p, agent, server)


def test_an_evicted_state_releases_its_root_with_its_verdict() -> None:
    p, _ = service_processor({"limits": {"max_traces": 2}}, root_grace_seconds=60)
    agent, server = recorded_trace()
    feed(p, agent + server)
    others = [recorded_trace() for _ in range(2)]
    for _, other_server in others:
        feed(p, other_server)  # two newer traces: the LRU bound evicts the held one
    assert root_of(p)[A.TRACE_TOOL_CALLS] == 1
    assert p.metric_sum("toolcall_eval.traces", finalized_by="root") == 1
    assert p.metric_sum("toolcall_eval.state.dropped", reason="evicted") == 0  # finished by its root, not dropped
    p.processor.shutdown()
    assert p.metric_sum("toolcall_eval.traces") == 1 + 2  # the two segments, at shutdown
    assert once_each(p, agent, server, *(s for _, s in others))


def test_a_flush_and_a_shutdown_release_held_roots_at_once() -> None:
    p, _ = service_processor(root_grace_seconds=60)
    agent, server = recorded_trace()
    feed(p, agent + server)
    assert p.processor.force_flush()
    assert root_of(p)[A.TRACE_TOOL_CALLS] == 1 and p.metric_sum("toolcall_eval.traces", finalized_by="root") == 1
    second, second_server = recorded_trace()
    feed(p, second + second_server)
    p.processor.shutdown()
    roots = [s for s in p.spans() if s.name == "invoke_agent weather"]
    assert [dict(r.attributes or {})[A.TRACE_TOOL_CALLS] for r in roots] == [1, 1]
    assert p.metric_sum("toolcall_eval.traces", finalized_by="root") == 2 and p.metric_sum("toolcall_eval.traces") == 2
    assert once_each(p, agent, server, second, second_server)


def test_a_failing_verdict_still_forwards_the_held_root_once() -> None:
    p, now = service_processor(root_grace_seconds=5)
    agent, server = recorded_trace()
    feed(p, agent + server)

    def broken(*args: object) -> None:
        raise RuntimeError("metrics")

    # an attribute of a non-native instance (not a method of the compiled processor): fails in either build
    p.processor.metrics.record_trace = broken  # type: ignore[method-assign]
    now[0] += 6
    p.processor.force_flush()
    assert once_each(p, agent, server)
    assert p.metric_sum("toolcall_eval.internal_errors", stage="root.release") == 1


def test_the_grace_window_is_checked() -> None:
    for bad in (-1.0, float("nan"), 301.0):
        with pytest.raises(ValueError, match="root_grace_seconds: expected a number of seconds from 0 to 300"):
            ToolCallEvalProcessor(SimpleSpanProcessor(InMemorySpanExporter()), root_grace_seconds=bad)


def test_a_server_span_after_its_scored_client_span_is_the_same_call_not_a_second() -> None:
    """The agent's MCP client span (a tool span of the same call) was scored before the server's span arrived:
    the server's span points at it (``same_call_as``) instead of counting the call twice (a duplicate)."""
    p, _ = service_processor(root_grace_seconds=5)
    agent, server = recorded_trace(mcp=True)
    feed(p, agent + server)
    p.processor.force_flush()
    root = root_of(p)
    assert (root[A.TRACE_TOOL_CALLS], root[A.TRACE_COMPOSITE_OK]) == (1, True)
    (client,) = [s for s in p.spans() if s.kind is SpanKind.CLIENT]
    (server_out,) = [s for s in p.spans() if s.kind is SpanKind.SERVER]
    assert (client.attributes or {})[A.OUTCOME] == "success"
    assert (server_out.attributes or {})[A.SAME_CALL_AS] == f"{client.context.span_id:016x}"
    assert A.OUTCOME not in (server_out.attributes or {})
    assert once_each(p, agent, server)


def test_the_services_window_is_a_checked_setting() -> None:
    assert EvalConfig().serve.root_grace_seconds == 5.0  # the SDKs' default export delay (see docs/serve.md)
    assert EvalConfig.from_dict({"serve": {"root_grace_seconds": 0}}).serve.root_grace_seconds == 0
    for bad, message in ((-1, "greater than or equal to 0"), (301, "less than or equal to 300")):
        with pytest.raises(ConfigError, match=rf"serve\.root_grace_seconds: Input should be {message}"):
            EvalConfig.from_dict({"serve": {"root_grace_seconds": bad}})


def test_the_timer_wakes_for_a_quarter_of_the_window() -> None:
    assert timer_period(300, 10, 5) == 1.25
    assert timer_period(None, None, 60) == 15.0
