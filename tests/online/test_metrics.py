"""``online/metrics.py``: the trace and tool-call metrics carry the trace's service, agent and version (issue 30).

Real SDK parts: spans from a ``TracerProvider`` with a resource, through ``ToolCallEvalProcessor``, read back
with the SDK's ``InMemoryMetricReader``.
"""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider

from otel_toolcall_eval import EvalConfig, ToolCallEvalProcessor
from otel_toolcall_eval.online.metrics import (
    LABEL_OVERFLOW,
    MAX_SOURCE_LABELS,
    MAX_TOOL_LABELS,
    MAX_TRACE_KEYS,
    OTHER,
    EvalMetrics,
    TraceCounts,
)
from otel_toolcall_eval.records import CallScore, Outcome, TraceVerdict
from tests.helpers import LOOKUP_TOOL, WEATHER_TOOL, Recorder, chat_turn, tool_span

AGENT = {"gen_ai.operation.name": "invoke_agent"}


def points(reader: InMemoryMetricReader, name: str) -> list[tuple[dict[str, Any], Any]]:
    data = reader.get_metrics_data()
    if data is None:
        return []
    return [
        (dict(p.attributes or {}), getattr(p, "value", None) if hasattr(p, "value") else p.count)
        for rm in data.resource_metrics
        for sm in rm.scope_metrics
        for m in sm.metrics
        if m.name == name
        for p in m.data.data_points
    ]


def total(reader: InMemoryMetricReader, name: str, **labels: str) -> int:
    return sum(v for attrs, v in points(reader, name) if all(attrs.get(k) == w for k, w in labels.items()))


class Agents:
    """Processors of several services sharing one MeterProvider (as one ``serve`` in front of them would)."""

    def __init__(self, config: EvalConfig | None = None) -> None:
        self.reader = InMemoryMetricReader()
        self.meters = MeterProvider(metric_readers=[self.reader])
        self.providers: dict[tuple[str, str | None], TracerProvider] = {}
        self.config = config

    def tracer(self, service: str, version: str | None = None) -> Any:
        key = (service, version)
        if key not in self.providers:
            attrs = {"service.name": service} | ({"service.version": version} if version else {})
            provider = TracerProvider(resource=Resource.create(attrs))
            provider.add_span_processor(ToolCallEvalProcessor(Recorder(), self.config, meter_provider=self.meters))
            self.providers[key] = provider
        return self.providers[key].get_tracer("agent")

    def trace(self, service: str, version: str | None, agent: str | None, *tools: str, fail: bool = False) -> None:
        tracer = self.tracer(service, version)
        attrs = AGENT | ({"gen_ai.agent.name": agent} if agent else {})
        with tracer.start_as_current_span(f"invoke_agent {agent}", attributes=attrs):
            for name in tools:
                tool_span(tracer, name, {"q": 1}, result="ok", error=RuntimeError("down") if fail else None)


def test_calls_and_traces_carry_service_agent_and_version_from_the_resource_and_the_root() -> None:
    """The agent's name is only on the root, which ends after its tools: the calls still carry it."""
    agents = Agents()
    agents.trace("travel", "1.4.0", "planner", "search", "book")
    agents.trace("travel", "1.5.0", "planner", "search", fail=True)
    agents.trace("support", None, "helpdesk", "lookup")
    calls = points(agents.reader, "toolcall_eval.tool_calls")
    source = {"service.name": "travel", "gen_ai.agent.name": "planner", "service.version": "1.4.0"}
    assert sorted(calls, key=repr) == sorted(
        [
            (source | {"tool": "search", "outcome": "success"}, 1),
            (source | {"tool": "book", "outcome": "success"}, 1),
            (source | {"service.version": "1.5.0", "tool": "search", "outcome": "execution_failed"}, 1),
            ({"service.name": "support", "gen_ai.agent.name": "helpdesk", "tool": "lookup", "outcome": "success"}, 1),
        ],
        key=repr,
    )
    traces = points(agents.reader, "toolcall_eval.traces")
    assert (source | {"composite_ok": "true", "finalized_by": "root"}, 1) in traces
    assert (source | {"service.version": "1.5.0", "composite_ok": "false", "finalized_by": "root"}, 1) in traces
    histogram = points(agents.reader, "toolcall_eval.trace.tool_calls")
    assert (source | {"composite_ok": "true"}, 1) in histogram  # (attributes, count)
    assert total(agents.reader, LABEL_OVERFLOW) == 0


def test_a_tool_span_names_the_agent_when_the_root_does_not() -> None:
    """ADK puts ``gen_ai.agent.name`` on its tool spans and not on its root."""
    agents = Agents()
    tracer = agents.tracer("travel", "2.0")
    with tracer.start_as_current_span("invocation"):
        tool_span(tracer, "search", {"q": 1}, result="ok", extra={"gen_ai.agent.name": "weather_agent"})
    assert total(agents.reader, "toolcall_eval.tool_calls", **{"gen_ai.agent.name": "weather_agent"}) == 1
    assert total(agents.reader, "toolcall_eval.traces", **{"gen_ai.agent.name": "weather_agent"}) == 1


def test_calls_are_counted_when_their_trace_has_a_verdict() -> None:
    agents = Agents()
    tracer = agents.tracer("travel", "1.0")
    with tracer.start_as_current_span("invoke_agent planner", attributes=AGENT | {"gen_ai.agent.name": "planner"}):
        tool_span(tracer, "search", {"q": 1}, result="ok")
        assert total(agents.reader, "toolcall_eval.tool_calls") == 0  # the trace's agent is not known yet
    assert total(agents.reader, "toolcall_eval.tool_calls", **{"gen_ai.agent.name": "planner"}) == 1


def test_a_call_after_the_verdict_is_counted_at_once_with_the_traces_source() -> None:
    metrics_reader = InMemoryMetricReader()
    metrics = EvalMetrics(MeterProvider(metric_readers=[metrics_reader]))
    trace = TraceCounts("travel", "1.0")
    trace.note_agent({"gen_ai.agent.name": "planner"})
    metrics.record_call(CallScore(name="search", step=1, outcome=Outcome.SUCCESS), "genai", True, trace)
    metrics.record_trace(TraceVerdict(1, 0, False, 0, 0, True), "root", trace)
    metrics.record_call(CallScore(name="search", step=2, outcome=Outcome.SUCCESS), "genai", True, trace)
    assert points(metrics_reader, "toolcall_eval.tool_calls") == [
        (
            {
                "service.name": "travel",
                "gen_ai.agent.name": "planner",
                "service.version": "1.0",
                "tool": "search",
                "outcome": "success",
            },
            2,
        )
    ]


def test_a_trace_of_many_distinct_calls_counts_the_rest_at_once() -> None:
    """At most ``MAX_TRACE_KEYS`` distinct keys wait for the verdict; every call is counted exactly once."""
    reader = InMemoryMetricReader()
    metrics = EvalMetrics(MeterProvider(metric_readers=[reader]))
    trace = TraceCounts("travel", "1.0")
    n = MAX_TRACE_KEYS + 5
    for i in range(n):
        metrics.record_call(CallScore(name=f"tool{i}", step=i, outcome=Outcome.SUCCESS), "genai", True, trace)
    assert total(reader, "toolcall_eval.tool_calls") == 5
    assert trace.pending is not None and len(trace.pending) == MAX_TRACE_KEYS
    metrics.record_trace(TraceVerdict(n, 0, False, 0, 0, True), "root", trace)
    assert total(reader, "toolcall_eval.tool_calls") == n


def test_a_trace_of_many_calls_of_few_keys_waits_for_its_verdict_and_shares_its_keys() -> None:
    """Calls of a key already tallied never count at once, however many (the first ones listed, the rest tallied
    by key); two traces hold the same key object, not one each per call (``EvalMetrics._entries``)."""
    reader = InMemoryMetricReader()
    metrics = EvalMetrics(MeterProvider(metric_readers=[reader]))
    first, second = TraceCounts("travel", "1.0"), TraceCounts("travel", "1.0")
    n = 3 * MAX_TRACE_KEYS
    for i in range(n):
        for trace in (first, second):
            metrics.record_call(CallScore(name=f"tool{i % 3}", step=i, outcome=Outcome.SUCCESS), "genai", True, trace)
    assert total(reader, "toolcall_eval.tool_calls") == 0
    assert isinstance(first.pending, dict) and isinstance(second.pending, dict)
    assert sorted(first.pending.values()) == [n // 3] * 3
    assert all(any(k is e for e in second.pending) for k in first.pending)
    metrics.record_trace(TraceVerdict(n, 0, False, 0, 0, True), "root", first)
    assert total(reader, "toolcall_eval.tool_calls") == n
    third = TraceCounts("travel", "1.0")
    metrics.record_call(CallScore(name="tool0", step=1, outcome=Outcome.SUCCESS), "genai", True, third)
    metrics.record_call(CallScore(name="tool0", step=2, outcome=Outcome.SUCCESS), "genai", True, third)
    assert isinstance(third.pending, list) and third.pending[0] is third.pending[1]
    metrics.record_trace(TraceVerdict(2, 0, False, 0, 0, True), "root", third)
    assert total(reader, "toolcall_eval.tool_calls", tool="tool0") == n // 3 + 2


def test_a_listed_trace_counts_each_key_once_per_call_however_its_calls_interleave() -> None:
    """``record_trace`` counts a listed trace's calls a run of the same entry at a time: interleaved keys, and equal
    entries that are not the shared one (past ``MAX_SHARED_ENTRIES``), still count every call once, with their
    findings; the trace and its histogram point carry the trace's source and verdict."""
    reader = InMemoryMetricReader()
    metrics = EvalMetrics(MeterProvider(metric_readers=[reader]))
    trace = TraceCounts("travel", "1.0")
    bad = CallScore(name="book", step=1, outcome=Outcome.MALFORMED_CALL, schema_valid=False)
    good = CallScore(name="search", step=2, outcome=Outcome.SUCCESS)
    for score in (bad, good, good, bad, good):
        metrics.record_call(score, "genai", True, trace)
    assert isinstance(trace.pending, list)
    first = trace.pending[1]
    trace.pending.append((tuple(list(first[0])), first[1]))  # equal to the shared entry, not it
    metrics.record_trace(TraceVerdict(6, 2, False, 2, 2, False), "root", trace)
    source = {"service.name": "travel", "service.version": "1.0"}
    assert sorted((a["tool"], a["outcome"], v) for a, v in points(reader, "toolcall_eval.tool_calls")) == [
        ("book", "malformed_call", 2),
        ("search", "success", 4),
    ]
    assert points(reader, "toolcall_eval.violations") == [(source | {"tool": "book", "violation": "schema_invalid"}, 2)]
    assert points(reader, "toolcall_eval.traces") == [(source | {"composite_ok": "false", "finalized_by": "root"}, 1)]
    assert points(reader, "toolcall_eval.trace.tool_calls") == [(source | {"composite_ok": "false"}, 1)]
    metrics.record_trace(TraceVerdict(0, 0, False, 0, 0, True), "expired", TraceCounts("travel", "1.0"))
    assert sorted(a["composite_ok"] for a, _ in points(reader, "toolcall_eval.trace.tool_calls")) == ["false", "true"]


def test_sources_past_the_bound_become_other_and_each_use_is_counted() -> None:
    agents = Agents()
    for n in range(MAX_SOURCE_LABELS):
        agents.trace("travel", f"1.0.{n}", "planner", "search")
    assert total(agents.reader, LABEL_OVERFLOW) == 0
    for n in range(3):  # three traces of versions past the bound: all three values `_other`, counted per trace
        agents.trace("travel", f"2.0.{n}", "planner", "search", "book")
    other = {"service.name": OTHER, "gen_ai.agent.name": OTHER, "service.version": OTHER}
    assert total(agents.reader, "toolcall_eval.traces", **other) == 3
    assert total(agents.reader, "toolcall_eval.tool_calls", **other) == 6
    assert points(agents.reader, LABEL_OVERFLOW) == [({"label": "source"}, 3)]
    # a source seen before the bound keeps its own labels
    agents.trace("travel", "1.0.0", "planner", "search")
    assert total(agents.reader, "toolcall_eval.traces", **{"service.version": "1.0.0"}) == 2
    assert total(agents.reader, LABEL_OVERFLOW) == 3


def test_tool_names_past_the_bound_are_counted_as_overflow() -> None:
    reader = InMemoryMetricReader()
    metrics = EvalMetrics(MeterProvider(metric_readers=[reader]))
    for i in range(MAX_TOOL_LABELS + 2):
        metrics.record_call(CallScore(name=f"tool{i}", step=1, outcome=Outcome.SUCCESS))
    assert total(reader, "toolcall_eval.tool_calls", tool=OTHER) == 2
    assert points(reader, LABEL_OVERFLOW) == [({"label": "tool"}, 2)]


def test_a_call_scored_into_a_state_made_after_the_verdict_is_counted_at_once() -> None:
    """``TraceStore`` gives a span of a trace finished long ago a state of its own, already finished and kept
    nowhere: no verdict will come to count its call."""
    from otel_toolcall_eval.online.trace_state import TraceState

    reader = InMemoryMetricReader()
    metrics = EvalMetrics(MeterProvider(metric_readers=[reader]))
    provider = TracerProvider(resource=Resource.create({"service.name": "travel", "service.version": "1.0"}))
    with provider.get_tracer("t").start_as_current_span("late") as span:
        pass
    counts = TraceState(last_seen=0.0, finished=True).trace_counts(metrics, span)
    metrics.record_call(CallScore(name="search", step=1, outcome=Outcome.SUCCESS), "genai", True, counts)
    assert points(reader, "toolcall_eval.tool_calls") == [
        ({"service.name": "travel", "service.version": "1.0", "tool": "search", "outcome": "success"}, 1)
    ]


STATS = EvalConfig.from_dict(
    {
        "pricing": {"models": {"gpt-4o": {"input_per_million": 2.5, "output_per_million": 10}}},
        "metrics": {"histograms": True},
    }
)


def test_recoveries_histograms_and_tool_latency_carry_the_traces_source() -> None:
    """Every metric of a finished trace is by its source, the calls' durations too (held until the root names the
    agent, as the calls are)."""
    agents = Agents(STATS)
    tracer = agents.tracer("travel", "1.5.0")
    with tracer.start_as_current_span("invoke_agent planner", attributes=AGENT | {"gen_ai.agent.name": "planner"}):
        chat_turn(tracer, tools=[WEATHER_TOOL, LOOKUP_TOOL])
        tool_span(tracer, "get_weather", {"city": "Paris"}, error=RuntimeError("down"))
        chat_turn(tracer)
        tool_span(tracer, "lookup", {"q": "Paris"}, result="ok")  # another tool after the failure
        assert points(agents.reader, "toolcall_eval.tool.latency") == []  # held until the trace's verdict
    source = {"service.name": "travel", "gen_ai.agent.name": "planner", "service.version": "1.5.0"}
    assert points(agents.reader, "toolcall_eval.recoveries") == [
        (source | {"tool": "get_weather", "class": "switched_tool"}, 1)
    ]
    assert sorted(points(agents.reader, "toolcall_eval.tool.latency"), key=repr) == [
        (source | {"tool": "get_weather"}, 1),  # (attributes, count)
        (source | {"tool": "lookup"}, 1),
    ]
    for name in ("trace.model_calls", "trace.tool_latency", "trace.tool_error_rate"):
        assert points(agents.reader, f"toolcall_eval.{name}") == [(source, 1)], name
    assert sorted(points(agents.reader, "toolcall_eval.trace.tokens"), key=repr) == [
        (source | {"type": "input"}, 1),
        (source | {"type": "output"}, 1),
    ]
    assert points(agents.reader, "toolcall_eval.trace.cost") == [(source | {"currency": "USD"}, 1)]


def test_a_trace_past_the_source_bound_records_its_numbers_as_other() -> None:
    """The trace's numbers take the bounded source of its verdict: the same ``_other`` as its calls."""
    agents = Agents(STATS)
    for n in range(MAX_SOURCE_LABELS + 1):
        agents.trace("travel", f"1.0.{n}", "planner", "search")
    other = {"service.name": OTHER, "gen_ai.agent.name": OTHER, "service.version": OTHER}
    assert total(agents.reader, "toolcall_eval.trace.tool_latency", **other) == 1
    assert total(agents.reader, "toolcall_eval.tool.latency", **other, tool="search") == 1
    assert total(agents.reader, "toolcall_eval.tool.latency") == MAX_SOURCE_LABELS + 1
    assert points(agents.reader, LABEL_OVERFLOW) == [({"label": "source"}, 1)]


def test_latencies_past_the_per_trace_bound_are_recorded_at_once_and_none_twice() -> None:
    reader = InMemoryMetricReader()
    metrics = EvalMetrics(MeterProvider(metric_readers=[reader]))
    trace = TraceCounts("travel", "1.0")
    n = MAX_TRACE_KEYS + 3
    for i in range(n):  # one key: the calls are tallied, their durations past the bound are not held
        metrics.record_call(CallScore(name="search", step=i, outcome=Outcome.SUCCESS), "genai", True, trace, 0.01)
    assert total(reader, "toolcall_eval.tool.latency") == 3
    assert total(reader, "toolcall_eval.tool_calls") == 0
    metrics.record_trace(TraceVerdict(n, 0, False, 0, 0, True), "root", trace)
    assert total(reader, "toolcall_eval.tool.latency", **{"service.name": "travel"}, tool="search") == n
    assert total(reader, "toolcall_eval.tool_calls") == n


def test_coverage_is_by_source_so_a_service_that_records_less_shows() -> None:
    agents = Agents()
    agents.trace("travel", "1.4.0", "planner", "search", "book")
    agents.trace("support", None, "helpdesk", "lookup")
    travel = {"service.name": "travel", "gen_ai.agent.name": "planner", "service.version": "1.4.0"}
    support = {"service.name": "support", "gen_ai.agent.name": "helpdesk"}
    assert sorted(points(agents.reader, "toolcall_eval.coverage.calls"), key=repr) == [
        (support | {"convention": "genai"}, 1),
        (travel | {"convention": "genai"}, 2),
    ]
    # no schema is known for any tool here
    assert (travel | {"convention": "genai", "missing": "schema"}, 2) in points(
        agents.reader, "toolcall_eval.coverage.missing"
    )


def test_every_metric_is_by_source_or_says_why_not() -> None:
    """The metrics reference lists each metric without the source labels with its reason (``NOT_BY_SOURCE``)."""
    from otel_toolcall_eval.guard.record import GUARD_METRICS
    from otel_toolcall_eval.online.metrics import METRICS, NOT_BY_SOURCE, SOURCE_LABELS_TEXT

    by_source = {doc.name for doc in METRICS if doc.labels.startswith(SOURCE_LABELS_TEXT)}
    assert by_source | set(NOT_BY_SOURCE) == {doc.name for doc in METRICS}
    assert by_source.isdisjoint(NOT_BY_SOURCE)
    assert all(labels.startswith(SOURCE_LABELS_TEXT) for _, _, labels, _, _ in GUARD_METRICS)
