"""The trace verdict: one composite per trace, correct AND under step budget AND zero tool errors."""

from __future__ import annotations

from otel_toolcall_eval.records import (
    CallHistory,
    LateOutcomeVerdict,
    LateSchemaVerdict,
    TraceVerdict,
    new_trace_verdict,
)


def trace_verdict(
    history: CallHistory,
    step_budget: int | None,
    unknown_tool_requests: int = 0,
    unexecuted_calls: int | None = None,
    unlisted_calls: int | None = None,
    late_schema: LateSchemaVerdict | None = None,
    late_outcome: LateOutcomeVerdict | None = None,
) -> TraceVerdict:
    """The whole verdict of a trace, in one place (``online.finish.verdict_attributes`` writes exactly this).

    ``unknown_tool_requests``: calls the model asked for, of tools it was not offered, that never ran as a tool
    span (a framework that refuses them runs none): the wrong-tool decision is the model's all the same.
    ``unexecuted_calls``: every requested call no tool span answered (informational); None when the trace
    recorded no requested calls at all.
    ``unlisted_calls``: calls scored before the trace's tool list arrived (on a span that ended after them) whose
    tool is not on it: the tool spans are gone downstream by then, so the root carries the finding; None when no
    list arrived late.
    ``late_schema``: calls validated against a schema that arrived after them (``checks.late_schema``); an invalid
    one fails the trace as a schema-invalid call always does; None when no call waited for its schema.
    ``late_outcome``: calls that read as a success on spans that cannot record the error flag, whose reply in the
    next model request said they failed (``checks.late_outcome``): each is a tool error, and a rejected input or an
    unknown tool fails ``correct`` too, as on a span that recorded it; None when no reply was read."""
    late_failed = len(late_outcome.failed_steps) if late_outcome is not None else 0
    return new_trace_verdict(  # positional: once per trace (``records.new_trace_verdict``)
        history.calls,
        history.errors + late_failed,
        # a call over it: a parallel batch counts where it starts (``engine.call.budget_position``)
        step_budget is not None and history.budget_position > step_budget,
        history.violations,
        history.violation_weight,
        history.all_correct
        and not unknown_tool_requests
        and not unlisted_calls
        and (late_schema is None or not late_schema.invalid_steps)
        and (late_outcome is None or not late_outcome.malformed),
        unknown_tool_requests,
        unexecuted_calls,
        unlisted_calls,
        late_schema,
        late_outcome,
    )
