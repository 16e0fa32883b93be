"""The typed hook lists (``online/hooks.py``) and the judge as a feature (``online/judging.py``): bound at build
time, empty without features, each hook's failure contained while the span goes on exactly once."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_toolcall_eval import EvalConfig
from otel_toolcall_eval import attributes as A
from otel_toolcall_eval._deadline import Deadline
from otel_toolcall_eval.conventions import default_registry
from otel_toolcall_eval.online import metrics as M
from otel_toolcall_eval.online.build import build
from otel_toolcall_eval.online.contain import Contained, RateLimitedLog
from otel_toolcall_eval.online.forward import FanOut
from otel_toolcall_eval.online.hooks import Hooks, TraceFinished
from otel_toolcall_eval.online.judging import JudgeFeature
from otel_toolcall_eval.online.metrics import EvalMetrics
from otel_toolcall_eval.online.pipeline import Pipeline
from otel_toolcall_eval.records import CallScore, ToolCallRecord, ToolDefinition
from tests.helpers import Recorder, metric_sum, tool_span


def _noop(*_: Any) -> None:
    pass


def _other(*_: Any) -> None:
    pass


def test_hooks_add_up_in_order() -> None:
    both = Hooks(on_call_scored=(_noop,), on_tick=(_noop,)) + Hooks(on_call_scored=(_other,), on_flush=(_other,))
    assert both.on_call_scored == (_noop, _other) and both.on_tick == (_noop,) and both.on_flush == (_other,)
    assert both.on_model_turn == () and both.watches == ()


def test_a_pipeline_without_features_has_empty_hook_lists() -> None:
    pipeline, _ = build((Recorder(),), EvalConfig.from_dict({"sessions": {"enabled": False}}), judge=False)
    assert pipeline.hooks == Hooks() and pipeline.gate.watched is None
    with_sessions, _ = build((Recorder(),), EvalConfig(), judge=False)
    assert len(with_sessions.hooks.on_trace_finished) == 1 and len(with_sessions.hooks.watches) == 1


def _ended_spans() -> list[ReadableSpan]:
    """A real agent trace's spans as the SDK ended them: a root and one tool span."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("invoke_agent", attributes={"gen_ai.operation.name": "invoke_agent"}):
        tool_span(tracer, "get_weather", {"city": "Paris"}, result="ok")
    return list(exporter.get_finished_spans())


def test_a_failing_hook_is_contained_and_every_span_goes_on_once() -> None:
    seen: list[Any] = []

    def boom(*args: Any) -> None:
        seen.append(args[0])
        raise RuntimeError("a feature's bug")

    reader = InMemoryMetricReader()
    metrics = EvalMetrics(MeterProvider(metric_readers=[reader]))
    recorder = Recorder()
    hooks = Hooks(on_call_scored=(boom,), on_trace_finished=(boom,))
    pipeline = Pipeline(
        FanOut((recorder,), RateLimitedLog()),
        Contained(metrics.record_error),
        EvalConfig(),
        default_registry(),
        metrics,
        hooks,
        segments=False,
        grace_seconds=0.0,
    )
    for span in _ended_spans():
        pipeline.evaluate_and_forward(span)
    assert [s.name for s in recorder.ended] == ["execute_tool get_weather", "invoke_agent"]
    assert (recorder.ended[0].attributes or {}).get(A.CONVENTION) is not None  # scored all the same
    assert (recorder.ended[1].attributes or {}).get(A.TRACE_COMPOSITE_OK) is True
    assert len(seen) == 2 and isinstance(seen[1], TraceFinished) and seen[1].verdict is not None
    assert metric_sum(reader, M.INTERNAL_ERRORS, stage="hook.on_call_scored") == 1
    assert metric_sum(reader, M.INTERNAL_ERRORS, stage="hook.on_trace_finished") == 1


def test_on_call_failed_hooks_see_only_the_calls_that_did_not_succeed() -> None:
    """Sessions' repeated failures plug in there: a successful call costs them no call."""
    scored: list[str] = []
    failed: list[str] = []
    hooks = Hooks(
        on_call_scored=(lambda _t, record, *_: scored.append(record.name),),
        on_call_failed=(lambda _t, record, *_: failed.append(record.name),),
    )
    pipeline = Pipeline(
        FanOut((Recorder(),), RateLimitedLog()),
        Contained(lambda _: None),
        EvalConfig(),
        default_registry(),
        EvalMetrics(MeterProvider(metric_readers=[InMemoryMetricReader()])),
        hooks,
        segments=False,
        grace_seconds=0.0,
    )
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("invoke_agent", attributes={"gen_ai.operation.name": "invoke_agent"}):
        tool_span(tracer, "get_weather", {"city": "Paris"}, result="ok")
        tool_span(tracer, "lookup", {"q": "x"}, error=RuntimeError("down"))
    for span in exporter.get_finished_spans():
        pipeline.evaluate_and_forward(span)
    assert scored == ["get_weather", "lookup"] and failed == ["lookup"]
    both = Hooks(on_call_failed=(_noop,)) + Hooks(on_call_failed=(_other,))
    assert both.on_call_failed == (_noop, _other)
    sessions, _ = build((Recorder(),), EvalConfig(), judge=False)
    assert sessions.hooks.on_call_scored == () and len(sessions.hooks.on_call_failed) == 1


class FakeJudge:
    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.done: list[int] = []

    def offer(
        self, trace_id: int, record: ToolCallRecord, score: CallScore, tools: Mapping[str, ToolDefinition] | None, /
    ) -> bool:
        if self.fail:
            raise RuntimeError("judge down")
        return True

    def observe_llm_span(self, trace_id: int, attrs: Mapping[str, Any], /) -> None:
        pass

    def trace_done(self, trace_id: int, source: tuple[str, str, str], /) -> None:
        self.done.append(trace_id)

    def force_flush(self, deadline: Deadline, /) -> bool:
        return True

    def shutdown(self, deadline: Deadline, /) -> object:
        return None


def test_the_judge_marks_each_scored_call_sampled_or_not_and_lets_go_of_known_traces() -> None:
    errors: list[str] = []
    judge = FakeJudge()
    feature = JudgeFeature(judge, Contained(errors.append))
    extra: dict[str, Any] = {}
    record = ToolCallRecord("get_weather", json.dumps({"city": "Paris"}))
    feature.on_call_scored(1, record, None, None, extra)  # type: ignore[arg-type]
    assert extra[A.JUDGE_SAMPLED] is True
    judge.fail = True
    feature.on_call_scored(1, record, None, None, extra)  # type: ignore[arg-type]
    assert extra[A.JUDGE_SAMPLED] is False and errors == ["judge.offer"]
    feature.on_trace_finished(TraceFinished(1, 11, None, first=True, known=True))
    feature.on_trace_finished(TraceFinished(2, 22, None, first=True, known=False))  # a trace it never saw
    assert judge.done == [1]
    hooks = feature.hooks()
    assert hooks.on_flush == (judge.force_flush,) and hooks.on_model_turn == (judge.observe_llm_span,)
