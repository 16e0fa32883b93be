"""The finish stage on its own (``online/finish.py``): a trace's verdict and numbers returned as the root's
attributes and a ``TraceFinished`` event, counted once (no processor)."""

from __future__ import annotations

import json

from otel_toolcall_eval import attributes as A
from otel_toolcall_eval.online import metrics as M
from otel_toolcall_eval.records import ErrorEvidence, ToolCallRecord
from tests.helpers import make_stages, readable_span

TRACE = 7


def _scored(s: object, fail: bool = False) -> None:
    state = s.store.get(TRACE)  # type: ignore[attr-defined]
    record = ToolCallRecord(
        "get_weather", json.dumps({"city": "Paris"}), error=ErrorEvidence(status_error=fail), call_id="c1"
    )
    s.calls.score(state, readable_span(3, parent=1), record, TRACE, 3, 1, False, False, {})  # type: ignore[attr-defined]


def test_a_root_gets_the_verdict_and_the_event_once() -> None:
    s = make_stages()
    _scored(s)
    state, first = s.store.finish(TRACE)
    root = readable_span(1, name="invoke_agent")
    extra, event = s.finish.root(TRACE, state, first, root, {}, None, None)
    assert extra[A.TRACE_TOOL_CALLS] == 1 and A.TRACE_COMPOSITE_OK in extra
    assert event.trace_id == TRACE and event.span_id == 1 and event.first and event.known
    assert event.verdict is not None and event.verdict.tool_calls == 1
    assert s.metric_sum(M.TRACES) == 1 and s.metric_sum(M.TOOL_CALLS) == 1
    # a second root of the finished trace (another segment): the verdict on it, not counted again
    state, first = s.store.finish(TRACE)
    extra, event = s.finish.root(TRACE, state, first, readable_span(2, name="invoke_agent"), {}, None, None)
    assert not first and not event.first and A.TRACE_COMPOSITE_OK in extra and s.metric_sum(M.TRACES) == 1


def test_a_trace_without_tool_activity_gets_no_verdict() -> None:
    s = make_stages()
    s.store.get(TRACE)
    state, first = s.store.finish(TRACE)
    extra, event = s.finish.root(TRACE, state, first, readable_span(1, name="GET /"), {"x": 1}, None, None)
    assert extra == {"x": 1} and event.verdict is None and event.known
    _, unknown = s.finish.root(TRACE + 1, None, False, readable_span(1, name="GET /"), {}, None, None)
    assert not unknown.known and s.metric_sum(M.TRACES) == 0


def test_a_failed_root_call_gets_its_class_from_the_trace_end() -> None:
    s = make_stages()
    state = s.store.get(TRACE)
    record = ToolCallRecord("get_weather", json.dumps({"city": "X"}), error=ErrorEvidence(status_error=True))
    result = s.calls.score(state, readable_span(1), record, TRACE, 1, None, False, True, {})
    state, first = s.store.finish(TRACE)
    extra, _ = s.finish.root(TRACE, state, first, readable_span(1), result.extra, None, result.failed_step)
    assert extra[A.RECOVERY_CLASS] == "carried_on"


def test_an_unfinished_trace_is_counted_by_why_it_was_let_go() -> None:
    s = make_stages()
    _scored(s, fail=True)
    state = s.store.get(TRACE)
    event = s.finish.unfinished(TRACE, state, "expired")
    assert event.span_id == 0 and event.first and event.verdict is not None and event.verdict.errors == 1
    assert s.metric_sum(M.TRACES, finalized_by="expired") == 1
