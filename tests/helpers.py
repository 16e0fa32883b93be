"""Test helpers: a real TracerProvider with the processor in front of an in-memory exporter and metric reader."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from opentelemetry.context import Context
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Tracer

from otel_toolcall_eval import EvalConfig, ToolCallEvalProcessor, records
from otel_toolcall_eval import attributes as A
from otel_toolcall_eval.attributes import PREFIX

# The package under test is the opt-in compiled build (setup.py; `make test-compiled`): its hot-path modules are
# mypyc extensions, whose functions check argument types at run time and call each other without a module lookup.
# A test that relies on either (a deliberately wrong type, a monkeypatched module function) skips there, marked.
COMPILED = not (records.__file__ or "").endswith(".py")

WEATHER_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1}},
    "required": ["city"],
    "additionalProperties": False,
}
WEATHER_TOOL = {"type": "function", "name": "get_weather", "description": "Weather", "parameters": WEATHER_SCHEMA}


@dataclass
class Pipeline:
    provider: TracerProvider
    tracer: Tracer
    exporter: InMemorySpanExporter
    processor: ToolCallEvalProcessor
    reader: InMemoryMetricReader

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def by_name(self, name: str) -> list[ReadableSpan]:
        return [s for s in self.spans() if s.name == name]

    def one(self, name: str) -> ReadableSpan:
        found = self.by_name(name)
        assert len(found) == 1, f"{len(found)} spans named {name!r}: {[s.name for s in self.spans()]}"
        return found[0]

    def metric_points(self, name: str) -> list[tuple[dict[str, Any], Any]]:
        return metric_points(self.reader, name)

    def metric_sum(self, name: str, **labels: str) -> float:
        return metric_sum(self.reader, name, **labels)


def metric_points(reader: InMemoryMetricReader, name: str) -> list[tuple[dict[str, Any], Any]]:
    """(labels, value) of every point of the metric ``name`` the reader holds (a histogram's value: its count)."""
    data = reader.get_metrics_data()
    out = []
    for rm in data.resource_metrics if data else ():
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                if metric.name == name:
                    for point in metric.data.data_points:
                        value = getattr(point, "value", None)
                        if value is None:
                            value = point.count
                        out.append((dict(point.attributes or {}), value))
    return out


def metric_sum(reader: InMemoryMetricReader, name: str, **labels: str) -> float:
    return sum(v for attrs, v in metric_points(reader, name) if all(attrs.get(k) == x for k, x in labels.items()))


def make_pipeline(config: EvalConfig | None = None, **kwargs: Any) -> Pipeline:
    exporter = InMemorySpanExporter()
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    processor = ToolCallEvalProcessor(SimpleSpanProcessor(exporter), config, meter_provider=meter_provider, **kwargs)
    provider = TracerProvider()
    provider.add_span_processor(processor)
    return Pipeline(provider, provider.get_tracer("test"), exporter, processor, reader)


def scores(span: ReadableSpan) -> dict[str, Any]:
    """The toolcall_eval.* attributes of a span, prefix stripped, sequences as lists."""
    return {
        k[len(PREFIX) :]: list(v) if isinstance(v, tuple) else v
        for k, v in (span.attributes or {}).items()
        if k.startswith(PREFIX)
    }


def chat_span(tracer: Tracer, tools: list[dict[str, Any]] | None = None, calls: list[tuple[str, str]] = ()) -> None:
    """A GenAI chat span that offers ``tools`` and requests ``calls`` ((id, name) pairs) in one turn."""
    attrs: dict[str, Any] = {"gen_ai.operation.name": "chat"}
    if tools is not None:
        attrs["gen_ai.tool.definitions"] = json.dumps(tools)
    if calls:
        parts = [{"type": "tool_call", "id": cid, "name": name, "arguments": {}} for cid, name in calls]
        attrs["gen_ai.output.messages"] = json.dumps([{"role": "assistant", "parts": parts}])
    with tracer.start_as_current_span("chat model", attributes=attrs):
        pass


def tool_span(
    tracer: Tracer,
    name: str,
    arguments: Any = None,
    *,
    call_id: str | None = None,
    result: Any = None,
    error: Exception | None = None,
    extra: dict[str, Any] | None = None,
) -> None:
    """A GenAI execute_tool span; ``error`` is recorded as status ERROR plus an exception event."""
    attrs: dict[str, Any] = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name}
    if arguments is not None:
        attrs["gen_ai.tool.call.arguments"] = arguments if isinstance(arguments, str) else json.dumps(arguments)
    if call_id is not None:
        attrs["gen_ai.tool.call.id"] = call_id
    if result is not None:
        attrs["gen_ai.tool.call.result"] = result
    attrs.update(extra or {})
    try:
        with tracer.start_as_current_span(f"execute_tool {name}", attributes=attrs):
            if error is not None:
                raise error
    except Exception as exc:
        if exc is not error:
            raise


def assert_replay_matches(
    raw: list[ReadableSpan], online: list[ReadableSpan], config: EvalConfig | None = None
) -> None:
    """Spans as recorded, encoded as OTLP JSON, decoded and replayed, get exactly the scores they got online."""
    from otel_toolcall_eval.replay import replay_spans
    from otel_toolcall_eval.replay.otlp import encode_json, request_from_json, spans_from_request

    document = json.loads(json.dumps(encode_json(raw)))
    replayed = replay_spans(spans_from_request(request_from_json(document)), config).spans

    def by_id(spans: list[ReadableSpan]) -> dict[int, dict[str, Any]]:
        return {s.context.span_id: scores(s) for s in spans if s.context is not None}

    assert by_id(replayed) == by_id(online)


def report_from_fork(work: Callable[[], Any]) -> Any:
    """Fork; the child runs ``work`` and sends its JSON-able result back through a pipe, then leaves without
    cleanup (as a pre-fork server's worker would not run the parent's atexit). The child's exit status must be 0."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.write(write, json.dumps(work()).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    with os.fdopen(read) as fh:
        report = json.loads(fh.read() or "null")
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "the forked child failed"
    return report


class Recorder(SpanProcessor):
    """A downstream processor that records every hook call."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.ended: list[ReadableSpan] = []

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        self.calls.append("on_start")

    def _on_ending(self, span: Span) -> None:
        self.calls.append("_on_ending")

    def on_end(self, span: ReadableSpan) -> None:
        self.calls.append("on_end")
        self.ended.append(span)

    def shutdown(self) -> None:
        self.calls.append("shutdown")

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        self.calls.append("force_flush")
        return True


LOOKUP_TOOL = {"type": "function", "name": "lookup", "parameters": {"type": "object"}}


def chat_turn(tracer: Any, *, tools: list[dict[str, Any]] | None = None, calls: list[tuple[str, str, dict[str, Any]]] = (),
          answer: str | None = None, model: str = "gpt-4o", tokens: tuple[int, int] = (100, 20)) -> None:  # fmt: skip
    attrs: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": model,
        "gen_ai.usage.input_tokens": tokens[0],
        "gen_ai.usage.output_tokens": tokens[1],
    }
    if tools is not None:
        attrs["gen_ai.tool.definitions"] = json.dumps(tools)
    parts: list[dict[str, Any]] = [{"type": "tool_call", "id": i, "name": n, "arguments": a} for i, n, a in calls]
    if answer is not None:
        parts.append({"type": "text", "content": answer})
    if parts:
        attrs["gen_ai.output.messages"] = json.dumps([{"role": "assistant", "parts": parts}])
    with tracer.start_as_current_span("chat", attributes=attrs):
        pass


def session_turn(
    tracer: Tracer,
    conversation: str | None,
    *,
    city: str = "Paris",
    fail: bool = False,
    on: str = "root",
    key: str = A.GEN_AI_CONVERSATION_ID,
) -> None:
    """One agent turn: a root, a chat span offering the tool, one tool call; the id on the root or the chat span."""
    root_attrs = {key: conversation} if conversation is not None and on == "root" else {}
    with tracer.start_as_current_span("invoke_agent", attributes=root_attrs):
        chat_attrs: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.tool.definitions": json.dumps([WEATHER_TOOL]),
        }
        if conversation is not None and on == "chat":
            chat_attrs[key] = conversation
        with tracer.start_as_current_span("chat", attributes=chat_attrs):
            pass
        if conversation is not None and on == "plain":
            with tracer.start_as_current_span("agent step", attributes={key: conversation}):
                pass
        tool_span(tracer, "get_weather", {"city": city}, error=ValueError("no such city") if fail else None)


class TimerSteps:
    """An injected ``wait``: the timer thread blocks in it until the test lets one tick through (or stop)."""

    def __init__(self) -> None:
        self._go = threading.Semaphore(0)
        self._at_wait = threading.Semaphore(0)
        self.periods: list[float] = []

    def wait(self, stop: threading.Event, seconds: float) -> bool:
        self.periods.append(seconds)
        self._at_wait.release()
        while not self._go.acquire(timeout=0.01):
            if stop.is_set():
                return True
        return stop.is_set()

    def reached_wait(self) -> None:
        assert self._at_wait.acquire(timeout=10), "the timer thread never waited"

    def tick(self) -> None:
        """One tick; returns once the thread is back in its wait (the tick done)."""
        self._go.release()
        self.reached_wait()


@dataclass
class Stages:
    """The online pipeline's stages on their own (``online/call.py``, ``turn.py``, ``finish.py``), over one trace
    store, held-spans table and metric reader, without a processor or a pipeline: what the held spans forward
    lands in ``forwarded``, what the store lets go of in ``dropped``."""

    store: Any
    held: Any
    calls: Any
    turns: Any
    finish: Any
    reader: InMemoryMetricReader
    forwarded: list[ReadableSpan]
    dropped: list[tuple[int, str]]

    def metric_sum(self, name: str, **labels: str) -> float:
        return metric_sum(self.reader, name, **labels)


def make_stages(config: EvalConfig | None = None) -> Stages:
    from otel_toolcall_eval.conventions.llm_spans import DefinitionCache
    from otel_toolcall_eval.engine import Scorer
    from otel_toolcall_eval.online.call import CallStage
    from otel_toolcall_eval.online.contain import Contained
    from otel_toolcall_eval.online.finish import FinishStage
    from otel_toolcall_eval.online.held_spans import HeldSpans
    from otel_toolcall_eval.online.metrics import EvalMetrics
    from otel_toolcall_eval.online.trace_state import TraceStore
    from otel_toolcall_eval.online.turn import TurnStage

    config = config or EvalConfig()
    limits = config.limits
    reader = InMemoryMetricReader()
    metrics = EvalMetrics(MeterProvider(metric_readers=[reader]))
    contained = Contained(metrics.record_error)
    forwarded: list[ReadableSpan] = []
    dropped: list[tuple[int, str]] = []
    store = TraceStore(
        limits.max_traces, limits.trace_ttl_seconds, lambda tid, _, reason: dropped.append((tid, reason))
    )
    held = HeldSpans(
        max_spans=limits.max_held_spans,
        max_per_trace=limits.max_held_spans_per_trace,
        max_seconds=limits.max_hold_seconds,
        forward=forwarded.append,
        on_unclassified=metrics.record_unclassified,
    )
    scorer = Scorer(config.policy(), key_failed_first_calls=True)
    prices = config.pricing.table()
    calls = CallStage(
        scorer, store, metrics, held, contained, max_calls=limits.max_calls_per_trace, segments=False, histograms=True
    )
    turns = TurnStage(DefinitionCache(max_bytes=limits.max_cache_bytes), limits, prices, metrics, held, contained)
    finish = FinishStage(
        config.policies.step_budget,
        config.tool_definitions(),
        prices,
        None,
        metrics,
        held,
        contained,
        max_cache_bytes=limits.max_cache_bytes,
        histograms=True,
    )
    return Stages(store, held, calls, turns, finish, reader, forwarded, dropped)


def readable_span(
    span_id: int, name: str = "execute_tool get_weather", trace_id: int = 1, parent: int | None = None
) -> ReadableSpan:
    """An ended span made directly (no tracer): what a stage reads of it is its ids, kind and scope."""
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope
    from opentelemetry.trace import SpanContext

    context = SpanContext(trace_id, span_id, is_remote=False)
    parent_context = None if parent is None else SpanContext(trace_id, parent, is_remote=False)
    return ReadableSpan(name, context, parent_context, instrumentation_scope=InstrumentationScope("test"))
