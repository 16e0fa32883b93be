"""Background evaluation (``evaluation.mode``): same scores as inline, off the application thread, nothing lost."""

from __future__ import annotations

import os
import random
import threading
from collections.abc import Sequence
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Tracer

from otel_toolcall_eval import EvalConfig, ToolCallEvalProcessor
from otel_toolcall_eval import attributes as A
from otel_toolcall_eval.config import ConfigError
from otel_toolcall_eval.conventions import default_registry
from otel_toolcall_eval.conventions.builtin import GENAI
from otel_toolcall_eval.online.background import BackgroundQueue
from otel_toolcall_eval.online.metrics import QUEUE_SIZE, QUEUE_WAITS
from tests.helpers import WEATHER_TOOL, Pipeline, chat_span, report_from_fork, scores, tool_span

POLICIES: dict[str, Any] = {
    "policies": {
        "step_budget": 4,
        "must_not_call": ["drop_database"],
        "required_steps": [{"tool": "lookup_user", "before": ["get_weather"]}],
    }
}


def config(mode: str, **evaluation: Any) -> EvalConfig:
    return EvalConfig.from_dict({**POLICIES, "evaluation": {"mode": mode, **evaluation}})


def pipeline(cfg: EvalConfig, downstream: SpanProcessor | None = None) -> Pipeline:
    exporter = InMemorySpanExporter()
    reader = InMemoryMetricReader()
    processor = ToolCallEvalProcessor(
        downstream or SimpleSpanProcessor(exporter), cfg, meter_provider=MeterProvider(metric_readers=[reader])
    )
    provider = TracerProvider()
    provider.add_span_processor(processor)
    return Pipeline(provider, provider.get_tracer("test"), exporter, processor, reader)


def random_traces(tracer: Tracer, seed: int, traces: int) -> None:
    """Agent traces with every kind of finding: invalid and unparseable arguments, unknown and forbidden tools,
    duplicates, errors, missing required steps, over budget, plain children."""
    rng = random.Random(seed)
    for t in range(traces):
        with tracer.start_as_current_span(
            "invoke_agent weather-bot", attributes={"gen_ai.operation.name": "invoke_agent"}
        ):
            for turn in range(1 + t % 2):  # every other trace two model turns: a batch issued past the budget
                calls = [
                    (f"c{t}_{turn}_{k}", rng.choice(["get_weather", "lookup_user", "drop_database", "nope"]))
                    for k in range(rng.randint(0, 6))
                ]
                chat_span(tracer, [WEATHER_TOOL], calls)
                for call_id, name in calls:
                    arguments: Any = rng.choice(
                        [{"city": "Paris"}, {"city": "paris "}, {"city": 3}, {"days": 2}, "{not json", "Oslo", None]
                    )
                    error = RuntimeError("boom") if rng.random() < 0.2 else None
                    tool_span(
                        tracer,
                        name,
                        arguments,
                        call_id=call_id,
                        result=rng.choice(['{"t": 20}', "", None]),
                        error=error,
                    )
                    if rng.random() < 0.3:
                        with tracer.start_as_current_span("GET /weather", attributes={"http.request.method": "GET"}):
                            pass


def scored_by_id(spans: Sequence[ReadableSpan]) -> dict[int, dict[str, Any]]:
    return {s.context.span_id: scores(s) for s in spans if s.context is not None}


def _untimed(scores: dict[str, Any]) -> dict[str, Any]:
    """Scores without the tool latencies: measured durations differ between two runs."""
    return {k: v for k, v in scores.items() if not k.startswith("trace.tool_latency.")}


def test_background_gives_the_inline_scores_and_forwards_every_span() -> None:
    inline, background = pipeline(config("inline")), pipeline(config("background"))
    assert inline.processor._pipeline.background is None and background.processor._pipeline.background is not None
    for p in (inline, background):
        random_traces(p.tracer, seed=7, traces=60)
        assert p.provider.force_flush()
    ins, outs = inline.spans(), background.spans()
    assert len(ins) == len(outs) > 300

    # span ids differ between the two runs: compare the scores per trace, in span start order
    def by_trace(spans: list[ReadableSpan]) -> list[list[tuple[str, dict[str, Any]]]]:
        traces: dict[int, list[ReadableSpan]] = {}
        for s in spans:
            traces.setdefault(s.context.trace_id, []).append(s)
        return [
            [(s.name, _untimed(scores(s))) for s in sorted(group, key=lambda s: (s.start_time, s.name))]
            for group in sorted(traces.values(), key=lambda g: min(s.start_time or 0 for s in g))
        ]

    expected, got = by_trace(ins), by_trace(outs)
    assert got == expected
    findings = {k for trace in expected for _, sc in trace for k, v in sc.items() if v not in (False, None, 0, [])}
    assert {"duplicate", "violations", "schema_errors", "trace.over_budget"} <= findings  # the traces test something
    inline.provider.shutdown()
    background.provider.shutdown()


class _Recording(SpanProcessor):
    def __init__(self) -> None:
        self.threads: dict[str, str] = {}
        self.ended: list[ReadableSpan] = []

    def on_end(self, span: ReadableSpan) -> None:
        self.threads[span.name] = threading.current_thread().name
        self.ended.append(span)


def test_on_end_returns_before_scoring_and_the_worker_forwards_scored_spans() -> None:
    sink = _Recording()
    p = pipeline(config("background", max_delay_millis=60_000), sink)  # the worker only wakes when asked
    with p.tracer.start_as_current_span("invoke_agent a"):
        chat_span(p.tracer, [WEATHER_TOOL], [("c1", "get_weather")])
        tool_span(p.tracer, "get_weather", {"city": "Paris"}, call_id="c1")
        with p.tracer.start_as_current_span("GET /weather"):
            pass
    # the plain child is forwarded on the application thread at once; the rest waits in the queue
    assert [s.name for s in sink.ended] == ["GET /weather"]
    assert sink.threads["GET /weather"] == threading.current_thread().name
    assert len(p.processor._pipeline.background or ()) == 3
    assert p.processor.force_flush()
    assert sorted(s.name for s in sink.ended) == [
        "GET /weather",
        "chat model",
        "execute_tool get_weather",
        "invoke_agent a",
    ]
    assert sink.threads["execute_tool get_weather"] == "toolcall-eval"
    tool = next(s for s in sink.ended if s.name == "execute_tool get_weather")
    assert scores(tool)["schema_valid"] is True and scores(tool)["outcome"] == "success"
    root = next(s for s in sink.ended if s.name == "invoke_agent a")
    assert scores(root)["trace.tool_calls"] == 1
    p.provider.shutdown()


def test_shutdown_scores_and_forwards_what_is_queued() -> None:
    p = pipeline(config("background", max_delay_millis=60_000))
    random_traces(p.tracer, seed=3, traces=20)
    queued = len(p.processor._pipeline.background or ())
    assert queued > 20
    p.provider.shutdown()
    roots = [s for s in p.spans() if s.name.startswith("invoke_agent")]
    assert len(roots) == 20
    assert all(A.TRACE_COMPOSITE_OK in (s.attributes or {}) for s in roots if scores(s))
    assert len(p.processor._pipeline.background or ()) == 0
    # after shutdown the queue is closed: a late span is scored inline instead of being lost
    tool_span(p.tracer, "get_weather", {"city": "Oslo"})


class _Gate(SpanProcessor):
    """A downstream that blocks the worker on its first span until released (a stuck exporter)."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.ended: list[ReadableSpan] = []

    def on_end(self, span: ReadableSpan) -> None:
        self.release.wait(30)
        self.ended.append(span)


def test_a_full_queue_makes_on_end_wait_and_loses_nothing() -> None:
    gate = _Gate()
    p = pipeline(config("background", max_queue_size=4), gate)
    done = threading.Event()

    def application() -> None:
        with p.tracer.start_as_current_span("invoke_agent busy"):
            for i in range(30):
                tool_span(p.tracer, "get_weather", {"city": f"c{i}"})
        done.set()

    thread = threading.Thread(target=application)
    thread.start()
    assert not done.wait(0.5), "on_end should wait while the queue is full"
    assert len(p.processor._pipeline.background or ()) <= 5  # the bound, plus the span waiting for room
    assert p.metric_sum(QUEUE_WAITS) >= 1
    queued = len(p.processor._pipeline.background or ())
    assert queued >= 4 and p.metric_sum(QUEUE_SIZE) == queued  # the gauge reads the queue as it stands
    gate.release.set()
    assert done.wait(30)
    thread.join()
    assert p.processor.force_flush()
    assert len(gate.ended) == 31
    assert p.metric_sum(QUEUE_SIZE) == 0
    assert all(scores(s)["outcome"] == "success" for s in gate.ended if s.name.startswith("execute_tool"))
    p.provider.shutdown()


class _WorkerGate(SpanProcessor):
    """A downstream that holds the worker thread until released; other threads pass (a slow exporter)."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.ended: list[ReadableSpan] = []

    def on_end(self, span: ReadableSpan) -> None:
        if threading.current_thread() is not threading.main_thread():
            self.release.wait(30)
        self.ended.append(span)


def test_a_span_the_queue_took_is_never_also_scored_inline(monkeypatch: pytest.MonkeyPatch) -> None:
    """At interpreter exit no thread can start: a failure inside ``submit`` after the span was queued (waiting for
    room: the worker is replaced, the wait counted) must leave the span to the queue, not also score and forward
    it on the application thread (it went out twice)."""
    gate = _WorkerGate()
    p = pipeline(config("background", max_queue_size=4), gate)
    queue = p.processor._pipeline.background
    assert queue is not None

    def exiting() -> None:
        raise RuntimeError("can't create new thread at interpreter shutdown")

    monkeypatch.setattr(queue, "_on_wait", exiting)  # what ``_wait_for_room`` calls first, after the append
    with p.tracer.start_as_current_span("invoke_agent exit"):
        for i in range(12):  # past the bound while the worker is held: every submit past it fails
            tool_span(p.tracer, "get_weather", {"city": f"c{i}"})
    gate.release.set()
    assert p.processor.force_flush(10_000)
    names = [s.name for s in gate.ended]
    assert names.count("execute_tool get_weather") == 12 and names.count("invoke_agent exit") == 1
    p.provider.shutdown()
    assert len(gate.ended) == 13


class _Exploding:
    """A convention that matches every tool span and then fails: evaluation errors in the worker."""

    name = "exploding"
    detect_keys = GENAI.detect_keys

    def __init__(self) -> None:
        self.calls = 0

    def match(self, span: Any, attrs: Any) -> bool:
        return True

    def extract(self, span: Any, attrs: Any) -> Any:
        self.calls += 1
        if self.calls == 1:
            raise ValueError("broken shape")
        return GENAI.extract(span, attrs)


def test_an_evaluation_error_on_the_worker_forwards_the_span_and_the_worker_goes_on() -> None:
    registry = default_registry()
    registry.register(_Exploding())  # type: ignore[arg-type]
    exporter = InMemorySpanExporter()
    processor = ToolCallEvalProcessor(SimpleSpanProcessor(exporter), config("background"), conventions=registry)
    provider = TracerProvider()
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span("invoke_agent a"):
        tool_span(tracer, "get_weather", {"city": "Paris"})
        tool_span(tracer, "get_weather", {"city": "Rome"})
    assert provider.force_flush()
    tools = [s for s in exporter.get_finished_spans() if s.name == "execute_tool get_weather"]
    assert len(tools) == 2
    assert scores(tools[0]) == {"eval_error": "ValueError"}
    assert scores(tools[1])["outcome"] == "success"
    provider.shutdown()


class _NoopExporter(SpanExporter):
    def export(self, spans: Any) -> SpanExportResult:
        return SpanExportResult.SUCCESS


def test_auto_mode_follows_the_downstream() -> None:
    batch = BatchSpanProcessor(_NoopExporter())
    simple = SimpleSpanProcessor(_NoopExporter())
    try:
        assert ToolCallEvalProcessor(batch)._pipeline.background is not None
        assert ToolCallEvalProcessor(simple)._pipeline.background is None
        assert ToolCallEvalProcessor([batch, simple])._pipeline.background is None
        assert ToolCallEvalProcessor(simple, config("background"))._pipeline.background is not None
        assert ToolCallEvalProcessor(batch, config("inline"))._pipeline.background is None
    finally:
        batch.shutdown()


@pytest.mark.parametrize(
    ("evaluation", "field"),
    [
        ({"mode": "threads"}, "evaluation.mode"),
        ({"max_queue_size": 0}, "evaluation.max_queue_size"),
        ({"max_delay_millis": 0}, "evaluation.max_delay_millis"),
        ({"workers": 2}, "evaluation.workers"),
    ],
)
def test_bad_evaluation_settings_name_the_field(evaluation: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError, match=field.replace(".", r"\.")):
        EvalConfig.from_dict({"evaluation": evaluation})


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_gets_its_own_worker() -> None:
    """After fork the parent's worker thread does not exist in the child: the queue restarts there (as the SDK's
    BatchSpanProcessor does), so a pre-fork server's workers still score their spans."""
    p = pipeline(config("background"))
    with p.tracer.start_as_current_span("invoke_agent parent"):
        tool_span(p.tracer, "get_weather", {"city": "Paris"})
    assert p.processor.force_flush()  # the parent's worker is running

    def child() -> dict[str, Any]:  # what the child exported
        p.exporter.clear()
        with p.tracer.start_as_current_span("invoke_agent child"):
            chat_span(p.tracer, [WEATHER_TOOL], [("c1", "get_weather")])
            tool_span(p.tracer, "get_weather", {"city": 3}, call_id="c1")
        flushed = p.processor.force_flush(5_000)
        names = sorted(f"{s.name}:{scores(s).get('schema_valid')}" for s in p.spans())
        return {"flushed": flushed, "names": names}

    report = report_from_fork(child)
    assert report == {
        "flushed": True,
        "names": ["chat model:None", "execute_tool get_weather:False", "invoke_agent child:None"],
    }
    p.provider.shutdown()


class _SpanningDownstream(SpanProcessor):
    """A downstream that ends a span of its own per span it receives, as an instrumented exporter does: on the
    worker thread, through the same provider, while the queue is full."""

    def __init__(self) -> None:
        self.tracer: Tracer | None = None
        self.ended: list[ReadableSpan] = []

    def on_end(self, span: ReadableSpan) -> None:
        self.ended.append(span)
        if self.tracer is not None and not span.name.startswith("POST /export"):
            self.tracer.start_span("POST /export").end()  # a root span: queued for the worker


def test_the_worker_never_waits_for_itself() -> None:
    sink = _SpanningDownstream()
    p = pipeline(config("background", max_queue_size=2), sink)
    sink.tracer = p.tracer

    def application() -> None:
        with p.tracer.start_as_current_span("invoke_agent a"):
            for i in range(40):
                tool_span(p.tracer, "get_weather", {"city": f"c{i}"})

    thread = threading.Thread(target=application, daemon=True)
    thread.start()
    thread.join(15)
    assert not thread.is_alive(), "the worker deadlocked waiting for room only it can make"
    assert p.processor.force_flush(10_000)
    names = [s.name for s in sink.ended]
    assert names.count("execute_tool get_weather") == 40 and names.count("invoke_agent a") == 1
    assert names.count("POST /export") == 41
    sink.tracer = None
    p.provider.shutdown()


class _FlushingDownstream(SpanProcessor):
    """A downstream that flushes the provider from inside on_end (on the worker thread), once."""

    def __init__(self) -> None:
        self.processor: ToolCallEvalProcessor | None = None
        self.inner: list[bool] = []
        self.ended: list[ReadableSpan] = []

    def on_end(self, span: ReadableSpan) -> None:
        self.ended.append(span)
        if self.processor is not None and not self.inner:
            self.inner.append(self.processor.force_flush(30_000))


def test_a_flush_from_inside_the_worker_does_not_wait_for_itself() -> None:
    sink = _FlushingDownstream()
    p = pipeline(config("background"), sink)
    sink.processor = p.processor
    with p.tracer.start_as_current_span("invoke_agent a"):
        tool_span(p.tracer, "get_weather", {"city": "Oslo"})
    assert p.processor.force_flush(10_000), "the worker sat in a flush that waited for itself"
    assert sink.inner == [False]  # it could not flush what it was itself processing, and said so
    assert sorted(s.name for s in sink.ended) == ["execute_tool get_weather", "invoke_agent a"]
    p.provider.shutdown()


class _Fatal(BaseException):
    """Not an Exception: escapes ``process``'s guard and kills the worker thread, as nothing should."""


def test_a_dead_worker_is_replaced_and_nothing_is_lost(monkeypatch: pytest.MonkeyPatch) -> None:
    p = pipeline(config("background", max_queue_size=8))
    queue = p.processor._pipeline.background
    assert queue is not None
    real = queue._process
    calls = {"n": 0}

    def dies_once(span: ReadableSpan) -> None:
        calls["n"] += 1
        if calls["n"] == 1:
            raise _Fatal  # the worker thread ends here, with this span lost to it
        real(span)

    monkeypatch.setattr(queue, "_process", dies_once)
    monkeypatch.setattr(threading, "excepthook", lambda args: None)  # the thread's death is expected here
    with p.tracer.start_as_current_span("invoke_agent a"):
        for i in range(30):  # past the bound: the full queue notices the dead worker and starts another
            tool_span(p.tracer, "get_weather", {"city": f"c{i}"})
    assert p.processor.force_flush(10_000)
    names = [s.name for s in p.spans()]
    assert names.count("execute_tool get_weather") == 29  # only the span in the dying worker's hands is lost
    assert names.count("invoke_agent a") == 1
    p.provider.shutdown()


class _Periods:
    """The worker's wait, without a clock: a timed wait is one whole period in which nothing set the event (it
    returns at once, with what a real wait would return then); an untimed one is a real wait. Every call is
    recorded with the number of spans processed by then, so a worker that woke every ``max_delay`` while idle
    would show up as an endless run of calls."""

    def __init__(self, done: list[str]) -> None:
        self.done = done
        self.calls: list[tuple[float | None, int]] = []
        self.parked = threading.Semaphore(0)  # released each time the worker parks without a timeout

    def __call__(self, event: threading.Event, timeout: float | None) -> bool:
        self.calls.append((timeout, len(self.done)))
        if timeout is None:
            self.parked.release()
            return event.wait()
        return event.is_set()

    def park_after(self, processed: int) -> list[float | None]:
        """Wait until the worker parks with ``processed`` spans done; the waits it made since the last span."""
        while True:
            assert self.parked.acquire(timeout=10), f"never parked: {self.calls[-5:]} ({len(self.calls)} waits)"
            if self.calls[-1] == (None, processed):
                return [t for t, n in self.calls if n == processed]


def _collecting_queue() -> tuple[BackgroundQueue, list[str], _Periods]:
    done: list[str] = []
    periods = _Periods(done)
    queue = BackgroundQueue(done.append, max_size=64, max_delay_seconds=0.1, wait=periods)  # type: ignore[arg-type]
    return queue, done, periods


def test_an_idle_worker_parks_instead_of_waking_every_max_delay() -> None:
    """After one whole max_delay with nothing queued, the worker waits without a timeout: an idle processor costs
    no wake-ups (under callgrind they were counted against plain traffic); while spans wait it keeps max_delay."""
    queue, done, periods = _collecting_queue()
    assert queue.submit("a")  # type: ignore[arg-type]
    # once the span is scored: one timed wait of max_delay that finds nothing, then a wait with no timeout
    assert periods.park_after(1) == [0.1, None]
    assert done == ["a"]
    assert all(t == 0.1 for t, n in periods.calls if n == 0 and t is not None)  # the span waited max_delay at most
    # parked, the worker makes no further call: what happens next starts from a submit, which wakes it (no flush)
    calls = len(periods.calls)
    assert queue.submit("b")  # type: ignore[arg-type]
    assert periods.park_after(2) == [0.1, None]
    assert done == ["a", "b"]
    assert len(periods.calls) == calls + 2  # woken (the untimed wait returned), one empty period, parked again
    assert queue.flush(10) and queue.shutdown(10)


def test_a_parked_worker_wakes_for_flush_and_shutdown() -> None:
    queue, done, periods = _collecting_queue()
    assert queue.submit("a")  # type: ignore[arg-type]
    periods.park_after(1)
    assert queue.flush(10)  # the marker wakes the parked worker
    periods.park_after(1)
    assert queue.shutdown(10)  # so does the stop: the worker ends
    assert queue._thread is not None and not queue._thread.is_alive()
    assert done == ["a"]
    assert not queue.submit("late")  # type: ignore[arg-type]
