"""``judge/emit.py``: the judge's verdict metrics carry the judged trace's service, agent and version (issue 30).

The judge is offered a call before its trace names its agent (on the root, which ends last) and often answers
before the trace ends: its verdicts wait for the trace's source. Real SDK parts: the telemetry's meter is the SDK's
``MeterProvider``, read with ``InMemoryMetricReader``.
"""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider

from otel_toolcall_eval.judge.emit import MAX_WAITING_VERDICTS, JudgeTelemetry, Verdict

TRAVEL = ("travel", "planner", "1.5.0")
SOURCE = {"service.name": "travel", "gen_ai.agent.name": "planner", "service.version": "1.5.0"}


def telemetry(max_traces: int = 100) -> tuple[JudgeTelemetry, InMemoryMetricReader]:
    reader = InMemoryMetricReader()
    emit = JudgeTelemetry(
        provider="openai",
        model="m",
        parent_to_judged_span=True,
        tracer_provider=TracerProvider(),
        logger_provider=LoggerProvider(),
        meter_provider=MeterProvider(metric_readers=[reader]),
        max_traces=max_traces,
    )
    return emit, reader


def points(reader: InMemoryMetricReader, name: str) -> list[tuple[dict[str, Any], Any]]:
    data = reader.get_metrics_data()
    return [
        (dict(p.attributes or {}), getattr(p, "value", None) if hasattr(p, "value") else p.count)
        for rm in (data.resource_metrics if data else ())
        for sm in rm.scope_metrics
        for m in sm.metrics
        if m.name == name
        for p in m.data.data_points
    ]


def ok(question: str = "args") -> Verdict:
    return Verdict(question, label="ok", cost=0.01, input_tokens=10, output_tokens=2, start_ns=1, end_ns=2)


def test_a_verdict_before_its_trace_finished_waits_for_the_traces_source() -> None:
    emit, reader = telemetry()
    emit.opened(7)
    emit.emit(ok(), 7, 1)
    assert points(reader, "toolcall_eval.judge.verdicts") == []  # the trace's agent is not known yet
    emit.trace_finished(7, TRAVEL)
    emit.emit(Verdict("args", error="timeout"), 7, 2)  # after it: counted at once, with the same source
    assert points(reader, "toolcall_eval.judge.verdicts") == [(SOURCE | {"question": "args", "label": "ok"}, 1)]
    assert points(reader, "toolcall_eval.judge.errors") == [(SOURCE | {"question": "args", "error_type": "timeout"}, 1)]
    assert points(reader, "toolcall_eval.judge.cost") == [(SOURCE | {"question": "args"}, 0.01)]
    assert sorted(points(reader, "toolcall_eval.judge.tokens"), key=repr) == [
        (SOURCE | {"type": "input"}, 10),
        (SOURCE | {"type": "output"}, 2),
    ]
    assert points(reader, "toolcall_eval.judge.duration") == [(SOURCE | {"question": "args"}, 1)]


def test_verdicts_of_an_unopened_trace_or_past_the_bounds_count_without_a_source() -> None:
    emit, reader = telemetry(max_traces=2)
    emit.emit(ok(), 1, 1)  # never opened (e.g. the telemetry used on its own): no source to wait for
    emit.opened(2)
    for _ in range(MAX_WAITING_VERDICTS + 1):  # one verdict more than a trace holds
        emit.emit(ok(), 2, 1)
    assert points(reader, "toolcall_eval.judge.verdicts") == [({"question": "args", "label": "ok"}, 2)]
    emit.opened(3)
    emit.opened(4)  # the oldest open trace (2) is let go of: its waiting verdicts counted without a source
    assert points(reader, "toolcall_eval.judge.verdicts") == [
        ({"question": "args", "label": "ok"}, 2 + MAX_WAITING_VERDICTS)
    ]
    emit.trace_finished(2, TRAVEL)  # nothing waits any more: nothing counted twice
    assert sum(v for _, v in points(reader, "toolcall_eval.judge.verdicts")) == 2 + MAX_WAITING_VERDICTS
