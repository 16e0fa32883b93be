"""The call stage on its own (``online/call.py``): a tool span's record scored against its trace's state, returned
as a ``CallResult`` (no processor, no pipeline; ``tests.helpers.make_stages``)."""

from __future__ import annotations

import json

from otel_toolcall_eval import attributes as A
from otel_toolcall_eval.online import metrics as M
from otel_toolcall_eval.online.matching import Requests
from otel_toolcall_eval.records import ErrorEvidence, Outcome, ToolCallRecord
from tests.helpers import make_stages, readable_span

TRACE = 7


def _record(city: str | None = "Paris", *, call_id: str | None = "c1", fail: bool = False) -> ToolCallRecord:
    return ToolCallRecord(
        "get_weather",
        None if city is None else json.dumps({"city": city}),
        result="ok",
        result_recorded=True,
        error=ErrorEvidence(status_error=True) if fail else ErrorEvidence(),
        call_id=call_id,
        convention="genai",
        start_ns=0,
        end_ns=2_000_000,
    )


def test_a_call_returns_its_scores_and_writes_nothing_itself() -> None:
    s = make_stages()
    state = s.store.get(TRACE)
    result = s.calls.score(state, readable_span(3, parent=1), _record(), TRACE, 3, 1, False, False, {})
    assert result.score is not None and result.score.outcome is Outcome.SUCCESS
    assert result.extra[A.CONVENTION] == "genai" and A.LATE not in result.extra
    assert result.held_step is None and result.failed_step is None and s.forwarded == []
    assert state.history.calls == 1 and state.stats is not None
    assert state.counts is not None  # tallied on its trace: counted with the trace's source at its verdict


def test_a_failed_call_in_a_live_trace_reserves_its_held_slot() -> None:
    """Reserved in the trace's state, under its lock (``TraceState.holding``); the table takes the span once it is
    built (``HeldSpans.hold``)."""
    s = make_stages()
    state = s.store.get(TRACE)
    span = readable_span(3, parent=1)
    result = s.calls.score(state, span, _record(fail=True), TRACE, 3, 1, False, False, {})
    assert result.score is not None and result.score.outcome is not Outcome.SUCCESS
    step = result.held_step
    assert result.failed_step == result.score.step == step and state.holding == {step: False} and len(s.held) == 0
    s.held.hold(state, TRACE, step, span, result.extra, None)
    assert state.holding is None and len(s.held) == 1 and s.forwarded == []
    # a failed root decides its own class at the trace's end: nothing is held
    root_state = s.store.get(TRACE + 1)
    root = s.calls.score(
        root_state, readable_span(9, trace_id=TRACE + 1), _record(fail=True), TRACE + 1, 9, None, False, True, {}
    )
    assert root.held_step is None and root.failed_step is not None and root_state.holding is None


def test_a_second_instrumentation_of_a_scored_call_points_at_it_unscored() -> None:
    s = make_stages()
    state = s.store.get(TRACE)
    inner = s.calls.score(state, readable_span(3, parent=2), _record(), TRACE, 3, 2, False, False, {})
    outer = s.calls.score(state, readable_span(2, parent=1), _record(), TRACE, 2, 1, False, False, {})
    assert inner.score is not None and outer.score is None and outer.held_step is None
    assert outer.extra[A.SAME_CALL_AS] == f"{3:016x}" and state.history.calls == 1


def test_the_arguments_a_turn_requested_are_borrowed_by_a_span_that_records_none() -> None:
    s = make_stages()
    state = s.store.get(TRACE)
    state.requests = requests = Requests()
    requests.add_turn([("c1", "get_weather")], 100)
    requests.add_requested_arguments({"c1": {"city": "Oslo"}}, 100, 1024)
    record = _record(None)
    s.calls.score(state, readable_span(3, parent=1), record, TRACE, 3, 1, False, False, {})
    assert json.loads(record.raw_arguments) == {"city": "Oslo"} and requests.call_arguments is None


def test_a_call_the_guard_stopped_is_claimed_and_not_scored() -> None:
    s = make_stages()
    state = s.store.get(TRACE)
    guard = {
        A.GUARD_PREVENTED: True,
        A.GEN_AI_OPERATION_NAME: A.APPLY_GUARDRAIL,
        A.GEN_AI_GUARDRAIL_COMPONENT_NAME: A.GUARD_COMPONENT,
        A.GEN_AI_TOOL_NAME: "get_weather",
    }
    s.calls.note_prevented(state, 3, guard)
    result = s.calls.score(state, readable_span(3, parent=1), _record(), TRACE, 3, 1, False, False, {})
    assert result.score is None and result.extra[A.GUARD_PREVENTED] is True and state.history.calls == 0


def test_a_call_after_its_trace_finished_is_scored_and_marked_late() -> None:
    s = make_stages()
    state = s.store.get(TRACE)
    state.finished = True
    result = s.calls.score(state, readable_span(3, parent=1), _record(), TRACE, 3, 1, False, False, {})
    assert result.score is not None and result.extra[A.LATE] is True
    assert s.metric_sum(M.LATE_SPANS) == 1


def test_a_call_before_any_request_is_remembered_as_answered_early() -> None:
    """The trace's request matching is made by the first tool span when no turn requested a call yet: the request
    naming it, when it comes, is answered already (no unexecuted call)."""
    s = make_stages()
    state = s.store.get(TRACE)
    assert state.requests is None
    s.calls.score(state, readable_span(3, parent=1), _record(call_id="c9"), TRACE, 3, 1, False, False, {})
    requests = state.requests
    assert requests is not None and requests.answered_early == {"c9"}
    requests.add_turn([("c9", "get_weather")], 100)
    assert requests.unexecuted_calls == 0 and requests.turns == 1
