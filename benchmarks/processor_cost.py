"""App-thread cost of a span through ``ToolCallEvalProcessor``, as a ratio of the same span without it.

Both sides are a TracerProvider with a BatchSpanProcessor and a no-op exporter; the subject wraps that
BatchSpanProcessor in the processor. A clock brackets span start+end only (attributes are built before timing),
so a figure is what the application thread pays per span, garbage collection included.

Inline evaluation (the default) is timed with ``perf_counter_ns`` (wall). Background evaluation is timed with
``thread_time_ns``, the application thread's own CPU time: in this tight loop the worker thread takes the GIL
from the application thread at arbitrary points, and wall time would charge the worker's scoring to whichever
span happened to be open (an application waiting on a model or a tool leaves the worker that time instead). What
the worker costs is not hidden: ``processor.trace_cpu.*`` is the CPU of whole traces, every thread included.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Tracer, set_span_in_context

from benchmarks.harness import Comparison, Figure, Sizes, at_most, interleave, us
from benchmarks.workload import (
    PLAIN_ATTRIBUTES,
    SCHEMA_5,
    SCHEMA_20,
    TOOL,
    AgentTrace,
    agent_traces,
    pipeline,
    policy_config,
)
from otel_toolcall_eval import EvalConfig, ToolCallEvalProcessor
from otel_toolcall_eval import attributes as A

PLAIN_TARGET = 1.03
TOOL_TARGET = 1.5


def plain_round(tracer: Tracer, spans: int) -> Callable[[], float]:
    """Children of one request span: never roots, never tool or LLM spans."""

    def run() -> float:
        clock = time.perf_counter_ns
        root = tracer.start_span("GET /api/v1/records")
        ctx = set_span_in_context(root)
        total = 0
        for _ in range(spans):
            t0 = clock()
            tracer.start_span("SELECT records", context=ctx, attributes=PLAIN_ATTRIBUTES).end()
            total += clock() - t0
        root.end()
        return total / spans

    return run


def tool_round(
    tracer: Tracer,
    traces: list[AgentTrace],
    *,
    clock: Callable[[], int] = time.perf_counter_ns,
    settle: Callable[[], object] | None = None,
) -> Callable[[], float]:
    """Whole agent traces; only the ``search_records`` tool spans are on the clock. ``settle`` runs after the
    round, off the clock (background mode: the queue is emptied, so no work spills into the next round)."""
    name = f"execute_tool {TOOL}"

    def run() -> float:
        total = 0
        calls = 0
        for trace in traces:
            root = tracer.start_span("invoke_agent records-assistant", attributes=trace.root)
            ctx = set_span_in_context(root)
            tracer.start_span("chat gpt-5-mini", context=ctx, attributes=trace.turn1).end()
            tracer.start_span("execute_tool authenticate", context=ctx, attributes=trace.auth).end()
            tracer.start_span("chat gpt-5-mini", context=ctx, attributes=trace.turn2).end()
            for attrs in trace.calls:
                t0 = clock()
                tracer.start_span(name, context=ctx, attributes=attrs).end()
                total += clock() - t0
            calls += len(trace.calls)
            root.end()
        if settle is not None:
            settle()
        return total / calls

    return run


def trace_cpu_round(tracer: Tracer, traces: list[AgentTrace], settle: Callable[[], object]) -> Callable[[], float]:
    """CPU time of the whole process (every thread: the application's, the worker's) per agent trace, the
    queue emptied before the clock stops."""
    timed = tool_round(tracer, traces, clock=lambda: 0)

    def run() -> float:
        t0 = time.process_time_ns()
        timed()
        settle()
        return (time.process_time_ns() - t0) / len(traces)

    return run


def _tool_round_for(
    traces: list[AgentTrace], clock: Callable[[], int], tracer: Tracer, settle: Callable[[], object]
) -> Callable[[], float]:
    return tool_round(tracer, traces, clock=clock, settle=settle)


def _trace_cpu_round_for(traces: list[AgentTrace], tracer: Tracer, settle: Callable[[], object]) -> Callable[[], float]:
    return trace_cpu_round(tracer, traces, settle)


def with_mode(config: EvalConfig, mode: str) -> EvalConfig:
    return config.model_copy(update={"evaluation": config.evaluation.model_copy(update={"mode": mode})})


def check_scored(config: EvalConfig, trace: AgentTrace, *, valid: bool) -> None:
    """Refuse to time a path that does not score: one trace through the processor, its scores checked."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(ToolCallEvalProcessor(SimpleSpanProcessor(exporter), config))
    tool_round(provider.get_tracer("check"), [trace])()
    provider.shutdown()
    calls = [s for s in exporter.get_finished_spans() if s.name == f"execute_tool {TOOL}"]
    expected = {
        A.SCHEMA_VALID: valid,
        A.TOOL_KNOWN: True,
        A.SCHEMA_SOURCE: "trace",
        A.SCHEMA_DRIFT: False,
        A.OUTCOME: "success" if valid else "malformed_call",
        A.DUPLICATE: False,
    }
    for span in calls:
        attrs = dict(span.attributes or {})
        wrong = {k: attrs.get(k) for k, v in expected.items() if attrs.get(k) != v}
        if wrong or (valid and A.VIOLATIONS in attrs) or (not valid and not attrs.get(A.SCHEMA_ERRORS)):
            raise AssertionError(f"the benchmark's tool span was not scored as expected: {wrong or attrs}")
    if len(calls) != len(trace.calls):
        raise AssertionError(f"expected {len(trace.calls)} scored tool spans, got {len(calls)}")


def _compare(
    make_round: Callable[[Tracer, Callable[[], object]], Callable[[], float]],
    config: EvalConfig | None,
    rounds: int,
) -> Comparison:
    base = pipeline(config, with_processor=False)
    subject = pipeline(config, with_processor=True)
    assert subject.processor is not None
    queue = subject.processor._pipeline.background

    def settle() -> object:
        return queue.flush(60.0) if queue is not None else None

    try:
        return interleave(make_round(base.tracer, settle), make_round(subject.tracer, settle), rounds)
    finally:
        base.close()
        subject.close()


def run(sizes: Sizes) -> list[Figure]:
    figures = []
    plain = _compare(lambda tracer, settle: plain_round(tracer, sizes.plain_spans), None, sizes.rounds)
    figures.append(
        Figure(
            "processor.plain_span",
            "non-tool span through the processor (app thread)",
            us(plain.subject_median),
            us(plain.baseline_median) + " (same span, no processor)",
            plain.ratio,
            f"<= {PLAIN_TARGET}x",
            at_most(plain.ratio, PLAIN_TARGET),
            data={"unit": "ns/span", "spans_per_round": sizes.plain_spans, **plain.as_json()},
        )
    )
    for mode in ("inline", "background"):
        clock = time.perf_counter_ns if mode == "inline" else time.thread_time_ns
        label = "" if mode == "inline" else "background."
        what = "app thread" if mode == "inline" else "background evaluation, app-thread CPU"
        for fields, schema in ((5, SCHEMA_5), (20, SCHEMA_20)):
            config = with_mode(policy_config(schema), mode)
            for valid in (True, False):
                traces = agent_traces(sizes.tool_traces, fields=fields, valid=valid)
                check_scored(config, traces[0], valid=valid)

                cmp = _compare(partial(_tool_round_for, traces, clock), config, sizes.rounds)
                kind = "valid" if valid else "invalid"
                figures.append(
                    Figure(
                        f"processor.tool_span.{label}{kind}_{fields}",
                        f"tool span fully scored, {kind} arguments, {fields}-field schema ({what})",
                        us(cmp.subject_median),
                        us(cmp.baseline_median) + " (same span, no processor)",
                        cmp.ratio,
                        f"<= {TOOL_TARGET}x",
                        at_most(cmp.ratio, TOOL_TARGET),
                        data={
                            "unit": "ns/span",
                            "clock": clock.__name__,
                            "spans_per_round": sizes.tool_traces * len(traces[0].calls),
                            **cmp.as_json(),
                        },
                    )
                )
    for mode in ("inline", "background"):
        config = with_mode(policy_config(SCHEMA_5), mode)
        traces = agent_traces(sizes.tool_traces, fields=5, valid=True)
        cmp = _compare(partial(_trace_cpu_round_for, traces), config, sizes.rounds)
        figures.append(
            Figure(
                f"processor.trace_cpu.{mode}",
                f"CPU of a whole agent trace (8 spans, 5 tool calls), every thread, {mode} evaluation",
                us(cmp.subject_median),
                us(cmp.baseline_median) + " (same trace, no processor)",
                cmp.ratio,
                "-",
                "info",
                note="where the scoring CPU goes: the figure to compare the two modes by",
                data={"unit": "ns/trace", "clock": "process_time_ns", **cmp.as_json()},
            )
        )
    return figures
