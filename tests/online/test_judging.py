"""The judge as a feature (``online/judging.py``): a judged call's verdict metrics carry its trace's source, the
service, agent and version that trace's own metrics carry, though the judge answers before the root names the
agent (issue 30)."""

from __future__ import annotations

import json
from typing import Any

import httpx
from opentelemetry import trace as trace_api
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_toolcall_eval import EvalConfig, ToolCallEvalProcessor
from otel_toolcall_eval import attributes as A
from otel_toolcall_eval.judge import Judge
from otel_toolcall_eval.judge import emit as E
from otel_toolcall_eval.online import metrics as M
from otel_toolcall_eval.records import CallScore, Outcome, ToolCallRecord
from tests.helpers import metric_points, tool_span

QUESTION = {
    "name": "tool_choice",
    "prompt": "Was this the right tool?",
    "fields": ["tool_name"],
    "scale": [{"label": "yes", "score": 1}, {"label": "no", "score": 0}],
}
JUDGE = {
    "provider": "openai",
    "model": "m",
    "base_url": "http://judge.invalid/v1",
    "price": {"input_per_million": 1, "output_per_million": 4},
    "budget": {"amount": 100},
    "sampling": {"initial_rate": 1.0, "max_rate": 1.0, "update_interval_seconds": 3600},
    "questions": [QUESTION],
}
SOURCE = {A.SERVICE_NAME: "shop", A.GEN_AI_AGENT_NAME: "planner", A.SERVICE_VERSION: "1.4.0"}


def _answer(request: httpx.Request) -> httpx.Response:
    content = json.dumps({"label": "yes", "explanation": "fits"})
    usage = {"prompt_tokens": 300, "completion_tokens": 20}
    return httpx.Response(
        200, json={"id": "x", "model": "m", "choices": [{"message": {"content": content}}], "usage": usage}
    )


def _source(attributes: dict[str, Any]) -> dict[str, Any]:
    return {key: attributes.get(key) for key in SOURCE}


def test_a_verdict_answered_before_the_root_names_the_agent_counts_with_the_trace_source() -> None:
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    config = EvalConfig.from_dict({"judge": JUDGE})
    assert config.judge is not None
    verdict_spans = InMemorySpanExporter()
    judge_tracing = TracerProvider()
    judge_tracing.add_span_processor(SimpleSpanProcessor(verdict_spans))
    judge = Judge(
        config.judge,
        meter_provider=meter_provider,
        tracer_provider=judge_tracing,
        transport=httpx.MockTransport(_answer),
    )
    exporter = InMemorySpanExporter()
    processor = ToolCallEvalProcessor(SimpleSpanProcessor(exporter), config, meter_provider=meter_provider, judge=judge)
    resource = Resource.create({A.SERVICE_NAME: "shop", A.SERVICE_VERSION: "1.4.0"})
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("t")
    try:
        # only the root names the agent, and it ends last: the verdict is answered before it does
        with tracer.start_as_current_span("invoke_agent", attributes={A.GEN_AI_AGENT_NAME: "planner"}):
            tool_span(tracer, "lookup", {"q": "x"}, result="ok")
            assert judge.force_flush(20_000)
            assert [s.name for s in verdict_spans.get_finished_spans()] == ["toolcall_eval.judge tool_choice"]
            assert metric_points(reader, E.VERDICTS) == []  # waiting for its trace's source
        verdicts = metric_points(reader, E.VERDICTS)
        traces = metric_points(reader, M.TRACES)
    finally:
        provider.shutdown()
    assert [(labels, n) for labels, n in verdicts] == [({**SOURCE, "question": "tool_choice", "label": "yes"}, 1)]
    assert [_source(labels) for labels, _ in traces] == [SOURCE]  # the same source as the trace's own metrics
    for name in (E.COST, E.TOKENS, E.DURATION):
        points = metric_points(reader, name)
        assert points and all(_source(labels) == SOURCE for labels, _ in points), name


def test_a_verdict_of_a_trace_open_at_shutdown_counts_with_what_its_source_was_then() -> None:
    """The root never ends: shutdown finishes the trace (``finalized_by=shutdown``) before the judge drains, so the
    verdict is counted, under the service and version the trace had (no agent: only the root would name it)."""
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    config = EvalConfig.from_dict({"judge": JUDGE})
    assert config.judge is not None
    judge = Judge(config.judge, meter_provider=meter_provider, transport=httpx.MockTransport(_answer))
    processor = ToolCallEvalProcessor(
        SimpleSpanProcessor(InMemorySpanExporter()), config, meter_provider=meter_provider, judge=judge
    )
    provider = TracerProvider(resource=Resource.create({A.SERVICE_NAME: "shop", A.SERVICE_VERSION: "1.4.0"}))
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("t")
    root = tracer.start_span("invoke_agent", attributes={A.GEN_AI_AGENT_NAME: "planner"})
    with trace_api.use_span(root, end_on_exit=False):
        tool_span(tracer, "lookup", {"q": "x"}, result="ok")
    assert judge.force_flush(20_000)
    assert metric_points(reader, E.VERDICTS) == []  # its trace is still open
    provider.shutdown()
    expected = {A.SERVICE_NAME: "shop", A.SERVICE_VERSION: "1.4.0", "question": "tool_choice", "label": "yes"}
    assert metric_points(reader, E.VERDICTS) == [(expected, 1)]


def test_a_judge_without_a_pipeline_counts_waiting_verdicts_without_source_at_shutdown() -> None:
    """Red before: a verdict of a trace that never finished waited for its source past shutdown, never counted."""
    reader = InMemoryMetricReader()
    config = EvalConfig.from_dict({"judge": JUDGE})
    assert config.judge is not None
    judge = Judge(
        config.judge, meter_provider=MeterProvider(metric_readers=[reader]), transport=httpx.MockTransport(_answer)
    )
    record = ToolCallRecord(name="lookup", raw_arguments="{}", trace_id=f"{7:032x}", span_id=f"{7:016x}")
    assert judge.offer(7, record, CallScore(name="lookup", step=1, outcome=Outcome.SUCCESS, arguments={}), None)
    assert judge.force_flush(20_000)
    assert metric_points(reader, E.VERDICTS) == []  # waiting for a finish that never comes
    judge.shutdown(5_000)
    assert metric_points(reader, E.VERDICTS) == [({"question": "tool_choice", "label": "yes"}, 1)]
