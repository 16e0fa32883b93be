"""The guard's cost per tool call, as a ratio of a plain span's cost in the same run (issue 31: "in the budget of a
plain span").

Baseline: one span started and ended through a TracerProvider with a BatchSpanProcessor and a no-op exporter (what
an instrumented application pays for any span, the tool span included). Subjects, on the processor figures' agent
trace (``benchmarks.workload``: every policy kind configured, the 5-field schema, valid arguments): per call, the
guard's decision (``Guard.check``) and the scoring of the call once it ran (``Guard.record_result``), the pair a
plug-in runs around every call; and a call the guard blocks (must-not-call), whose decision writes its
``apply_guardrail`` span through the same kind of provider: two findings (the tool is on ``must_not_call``, and
neither offered nor configured: ``unknown_tool``), so two events each, four in all. The decorator around a plain
function is shown against the bare function call for scale (information: a function call is ~0.1 us).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from benchmarks.harness import Comparison, Figure, Sizes, at_most, interleave, us
from benchmarks.workload import (
    PLAIN_ATTRIBUTES,
    SCHEMA_5,
    TOOL,
    NoopExporter,
    definitions,
    policy_config,
    valid_arguments,
)
from otel_toolcall_eval import EvalConfig
from otel_toolcall_eval.guard import Guard
from otel_toolcall_eval.guard import definitions as tool_definitions
from otel_toolcall_eval.guard.functions import guarded

CALLS = 4  # timed calls per trace, as in the processor figures
# the tools the trace offers (what a plug-in passes: an MCP tool list, an agent's tools), built once
OFFERED = tool_definitions({d["name"]: d["parameters"] for d in json.loads(definitions(SCHEMA_5))})
AUTH = {"token": "secret-token"}
DECISION_TARGET = 1.0  # issue 31: "in the budget of a plain span"
ALLOWED_TARGET = 2.0  # the decision and the engine's scoring after the call: a span's budget each
BLOCKED_TARGET = 4.0  # the decision plus its own apply_guardrail span with four events (five attribute sets)


def _provider() -> TracerProvider:
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(NoopExporter()))
    return provider


def _guard(provider: TracerProvider) -> Guard:
    config = policy_config(SCHEMA_5)
    return Guard(
        config, tracer_provider=provider, meter_provider=MeterProvider(metric_readers=[InMemoryMetricReader()])
    )


def span_round(provider: TracerProvider, spans: int) -> Callable[[], float]:
    tracer = provider.get_tracer("benchmarks")

    def run() -> float:
        clock = time.perf_counter_ns
        total = 0
        for _ in range(spans):
            t0 = clock()
            tracer.start_span("execute_tool search_records", attributes=PLAIN_ATTRIBUTES).end()
            total += clock() - t0
        return total / spans

    return run


def allowed_round(guard: Guard, traces: int, *, with_scoring: bool = True) -> Callable[[], float]:
    """Per trace: ``authenticate`` (untimed, it opens the required step), then ``CALLS`` timed calls: the decision,
    and (``with_scoring``) the scoring of the call once it ran, which is otherwise done untimed."""
    arguments = [[valid_arguments(5, t * CALLS + i) for i in range(CALLS)] for t in range(traces)]
    counter = [0]

    def run() -> float:
        clock = time.perf_counter_ns
        total = 0
        counter[0] += 1
        for t in range(traces):
            scope = f"r{counter[0]}.t{t}"
            guard.check("authenticate", AUTH, scope=scope, tools=OFFERED)
            guard.record_result("authenticate", AUTH, result="ok", scope=scope)
            for args in arguments[t]:
                t0 = clock()
                decision = guard.check(TOOL, args, scope=scope, tools=OFFERED)
                if with_scoring:
                    guard.record_result(TOOL, args, result='{"count": 3}', scope=scope)
                total += clock() - t0
                if not with_scoring:
                    guard.record_result(TOOL, args, result='{"count": 3}', scope=scope)
                assert not decision.stops
            guard.forget(scope)
        return total / (traces * CALLS)

    return run


def blocked_round(guard: Guard, calls: int) -> Callable[[], float]:
    def run() -> float:
        clock = time.perf_counter_ns
        total = 0
        for i in range(calls):
            t0 = clock()
            decision = guard.check("drop_database", {"name": f"prod_{i}"}, scope="blocked", tools=OFFERED)
            total += clock() - t0
            assert decision.stops
        guard.forget("blocked")
        return total / calls

    return run


def _function_rounds(guard: Guard, calls: int) -> tuple[Callable[[], float], Callable[[], float]]:
    def lookup(order_id: int) -> str:
        return "ok"

    wrapped = guarded(guard, name="lookup")(lookup)

    def timed(fn: Callable[[int], Any]) -> Callable[[], float]:
        def run() -> float:
            clock = time.perf_counter_ns
            t0 = clock()
            with guard.scope("functions"):
                for i in range(calls):
                    fn(i)
            elapsed = clock() - t0
            guard.forget("functions")
            return elapsed / calls

        return run

    return timed(lookup), timed(wrapped)


def _figure(
    fig_id: str, title: str, cmp: Comparison, baseline: str, target: float | None, data: dict[str, Any]
) -> Figure:
    return Figure(
        fig_id,
        title,
        us(cmp.subject_median),
        us(cmp.baseline_median) + baseline,
        cmp.ratio,
        "-" if target is None else f"<= {target}x",
        "info" if target is None else at_most(cmp.ratio, target),
        data={"unit": "ns/call", **data, **cmp.as_json()},
    )


def run(sizes: Sizes) -> list[Figure]:
    provider = _provider()
    guard = _guard(provider)
    calls = sizes.tool_traces * CALLS
    guard.check("authenticate", AUTH, scope="probe", tools=OFFERED)
    guard.record_result("authenticate", AUTH, result="ok", scope="probe")
    probe = guard.check(TOOL, valid_arguments(5, 0), scope="probe", tools=OFFERED)
    assert probe.action.value == "allow" and not probe.findings, probe  # the timed calls are allowed ones
    guard.forget("probe")
    plain = span_round(provider, calls)
    decided = interleave(plain, allowed_round(guard, sizes.tool_traces, with_scoring=False), sizes.rounds)
    allowed = interleave(plain, allowed_round(guard, sizes.tool_traces), sizes.rounds)
    blocked = interleave(plain, blocked_round(guard, calls), sizes.rounds)
    # no step budget here: one scope holds a whole round of calls
    plain_guard = Guard(EvalConfig.from_dict({"policies": {"must_not_call": ["drop_database"]}}),
                        tracer_provider=provider, meter_provider=MeterProvider())  # fmt: skip
    bare, wrapped = _function_rounds(plain_guard, calls)
    functions = interleave(bare, wrapped, sizes.rounds)
    provider.shutdown()
    return [
        _figure(
            "guard.decision",
            "guard decision on an allowed call, before it runs (every policy configured, 5-field schema)",
            decided,
            " (a plain span)",
            DECISION_TARGET,
            {"calls_per_round": calls},
        ),
        _figure(
            "guard.allowed_call",
            "guard per allowed call: the decision before it runs and the scoring of how it ended",
            allowed,
            " (a plain span)",
            ALLOWED_TARGET,
            {"calls_per_round": calls},
        ),
        _figure(
            "guard.blocked_call",
            "guard per blocked call (must-not-call), its apply_guardrail span and events recorded",
            blocked,
            " (a plain span)",
            BLOCKED_TARGET,
            {"calls_per_round": calls},
        ),
        _figure(
            "guard.decorated_function",
            "@guarded plain function (argument binding, decision, scoring) against the bare function call",
            functions,
            " (the bare call)",
            None,
            {"calls_per_round": calls},
        ),
    ]
