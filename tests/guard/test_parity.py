"""One config, both ways: for every policy, the guard stops exactly the calls the processor flags.

Generated traces (``test_engine_parity``'s: valid, invalid, unparseable, bare and unrecorded arguments; offered,
config-only and unknown tools; duplicates, repeated failures, failed runs, every policy, parallel batches) run twice:
once as spans through the real processor, once call by call through the guard in shadow mode (it decides each call
before it runs, then is told how it ended). Per call, the policies the guard finds are the policies the processor's
scores break, and the decision is the strongest action among them.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_toolcall_eval.engine.guard import _RANK, DEFAULT_ACTIONS, Action
from otel_toolcall_eval.guard import Guard, definitions
from tests.helpers import (
    PARITY_CONFIG,
    PARITY_OFFERED,
    encoded_arguments,
    online_rows,
    parity_traces,
    record_parity_trace,
)

VIOLATION_POLICY = {
    "must_not_call": "must_not_call",
    "unconfirmed_destructive": "destructive_tools",
    "unscoped": "argument_rules",
    "undeclared_argument": "undeclared_arguments",
}


def _flagged(row: dict[str, Any]) -> list[str]:
    """The policies a processor-scored call breaks, named as the guard names them."""
    found = set()
    if row["tool_known"] is False:
        found.add("unknown_tool")
    if row["parse_ok"] is False or row["schema_valid"] is False:
        found.add("schema")
    for violation in row["violations"] or ():
        found.add("required_steps" if violation.startswith("missing_required_step:") else VIOLATION_POLICY[violation])
    if row["over_budget"]:
        found.add("step_budget")
    if row["duplicate"]:
        found.add("duplicate")
    if row["repeated_failure"]:
        found.add("repeated_failure")
    return sorted(found)


def _guarded(turns: list[list[tuple[str, Any]]], offered: list[str], chat: list[bool], failed: bool) -> list[Any]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    guard = Guard(PARITY_CONFIG, mode="shadow", tracer_provider=provider, meter_provider=MeterProvider())
    tools = definitions({n: PARITY_OFFERED[n] for n in offered}) if any(chat) else None
    out = []
    with guard.scope("trace"):
        for t, calls in enumerate(turns):
            batch = t if chat[t] else None
            for name, arguments in calls:
                encoded = encoded_arguments(arguments)  # what the model produced, as the span records it
                pre = guard.precheck(name, encoded, tools=tools, batch=batch)
                decision = guard.check(name, encoded, tools=tools, batch=batch)
                assert not decision.stops  # shadow: decided and recorded, never stopped
                out.append((pre, decision))
                guard.record_result(name, encoded, result=None if failed else "ok", error="boom" if failed else None,
                                    batch=batch)  # fmt: skip
    recorded = exporter.get_finished_spans()
    assert len(recorded) == sum(1 for _, d in out if d.findings)  # one apply_guardrail span per finding decision
    return out


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trace=parity_traces())
def test_the_guard_finds_exactly_what_the_processor_flags(
    trace: tuple[list[list[tuple[str, Any]]], list[str], list[bool], bool],
) -> None:
    turns, offered, chat, failed = trace
    # a guard always has the model's arguments (it sits where the call is made); "not recorded" is the telemetry's
    # blind spot, which the processor fills from elsewhere (the requesting turn): recorded as an empty object here
    turns = [[(name, {} if arguments is None else arguments) for name, arguments in turn] for turn in turns]
    online = online_rows(record_parity_trace(turns, offered, chat, failed).spans())
    guarded = _guarded(turns, offered, chat, failed)
    assert len(guarded) == len(online)
    for row, (pre, decision) in zip(online, guarded, strict=True):
        # the engine's verdicts, asked before the call, are the processor's after it
        assert pre.step == row["step"]
        assert pre.tool_known == row["tool_known"]
        assert pre.parse_ok == row["parse_ok"]
        assert pre.schema_valid == row["schema_valid"]
        assert list(pre.schema_errors) == (row["schema_errors"] or [])
        assert pre.violations == (row["violations"] or [])
        assert pre.over_budget == row["over_budget"]
        assert pre.duplicate == row["duplicate"]
        # a failure repeats when the same call failed before and fails again the same way: every call of these
        # traces fails the same way its earlier copies did, so the two coincide exactly
        assert pre.failed_before == row["repeated_failure"]
        flagged = _flagged(row)
        assert sorted({f.policy for f in decision.findings}) == flagged
        strongest = max((DEFAULT_ACTIONS[p] for p in flagged), key=_RANK.__getitem__, default=Action.ALLOW)
        assert decision.action is strongest
