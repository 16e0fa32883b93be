"""The turn stage on its own (``online/turn.py``): an LLM span's tools, requests and tokens into its trace's state,
and the held spans of the failed calls a turn reacted to released with their class (no processor)."""

from __future__ import annotations

import json
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan

from otel_toolcall_eval import attributes as A
from otel_toolcall_eval.online import metrics as M
from otel_toolcall_eval.online.call import CallResult
from otel_toolcall_eval.online.trace_state import TraceState
from otel_toolcall_eval.records import ErrorEvidence, ToolCallRecord
from tests.helpers import WEATHER_TOOL, Stages, make_stages, readable_span

TRACE = 7


def _turn(calls: list[tuple[str, str, dict[str, Any]]] = (), *, response_id: str | None = None) -> dict[str, Any]:  # type: ignore[assignment]
    attrs: dict[str, Any] = {
        A.GEN_AI_OPERATION_NAME: "chat",
        "gen_ai.request.model": "gpt-4o",
        "gen_ai.usage.input_tokens": 100,  # a model call (its usage recorded): a reaction to failed calls
        "gen_ai.usage.output_tokens": 20,
        "gen_ai.tool.definitions": json.dumps([WEATHER_TOOL]),
    }
    if calls:
        parts = [{"type": "tool_call", "id": i, "name": n, "arguments": a} for i, n, a in calls]
        attrs["gen_ai.output.messages"] = json.dumps([{"role": "assistant", "parts": parts}])
    if response_id is not None:
        attrs[A.GEN_AI_RESPONSE_ID] = response_id
    return attrs


def test_a_turn_offers_tools_and_requests_calls_of_its_trace() -> None:
    s = make_stages()
    state = s.store.get(TRACE)
    s.turns.observe(state, TRACE, _turn([("c1", "get_weather", {"city": "Oslo"})]), False)
    assert state.tools is not None and "get_weather" in state.tools
    requests = state.requests
    assert requests is not None and requests.turns == 1 and requests.call_batches == {"c1": 1}
    assert state.requested and state.offered
    assert requests.call_arguments is not None and json.loads(requests.call_arguments["c1"]) == {"city": "Oslo"}
    # a root (an instrumented client's own span) offered tools but decided nothing
    other = s.store.get(TRACE + 1)
    s.turns.observe(other, TRACE + 1, _turn(), True)
    assert other.tools is not None and not other.offered and not other.requested
    assert other.requests is None  # a turn that requested nothing makes no request matching


def test_a_second_span_of_one_model_response_is_one_turn() -> None:
    s = make_stages()
    state = s.store.get(TRACE)
    for _ in range(2):
        s.turns.observe(state, TRACE, _turn([("c1", "get_weather", {})], response_id="r1"), False)
    assert state.requests is not None and state.requests.turns == 1


def test_a_turn_after_a_failed_call_releases_its_held_span_with_the_class() -> None:
    s = make_stages()
    state = s.store.get(TRACE)
    span, result = _failed_call(s, state)
    assert result.held_step is not None
    s.held.hold(state, TRACE, result.held_step, span, result.extra, None)
    assert s.forwarded == []  # waits for what the model does next
    s.turns.observe(state, TRACE, _handed_back(), False)
    assert len(s.forwarded) == 1 and (s.forwarded[0].attributes or {}).get(A.RECOVERY_CLASS) == "handed_back"
    assert len(s.held) == 0


def _failed_call(s: Stages, state: TraceState) -> tuple[ReadableSpan, CallResult]:
    """A turn requests a call, which fails: scored, its span not held yet."""
    s.turns.observe(state, TRACE, _turn([("c1", "get_weather", {"city": "Atlantis"})]), False)
    record = ToolCallRecord(
        "get_weather", json.dumps({"city": "Atlantis"}), error=ErrorEvidence(status_error=True), call_id="c1"
    )
    span = readable_span(3, parent=1)
    return span, s.calls.score(state, span, record, TRACE, 3, 1, False, False, {})


def _handed_back() -> dict[str, Any]:
    """The model answers in text: it handed the failure back to the user."""
    answer = _turn()
    answer["gen_ai.output.messages"] = json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": "?"}]}])
    return answer


def test_a_turn_that_decides_a_failed_call_before_its_span_is_built_leaves_the_class_for_it() -> None:
    """Exactly once across threads: the turn (another thread) decides the class while the failed span is still being
    built; the class waits in the trace's state and the span goes out with it as soon as it is held, once."""
    s = make_stages()
    state = s.store.get(TRACE)
    span, result = _failed_call(s, state)
    step = result.held_step
    assert step is not None
    s.turns.observe(state, TRACE, _handed_back(), False)  # decided before the span is held
    assert s.forwarded == [] and state.holding is not None and isinstance(state.holding[step], tuple)
    s.held.hold(state, TRACE, step, span, result.extra, None)
    assert len(s.forwarded) == 1 and (s.forwarded[0].attributes or {}).get(A.RECOVERY_CLASS) == "handed_back"
    assert len(s.held) == 0 and state.holding is None


def test_a_turn_after_its_trace_finished_is_counted_late() -> None:
    s = make_stages()
    state = s.store.get(TRACE)
    state.finished = True
    s.turns.observe(state, TRACE, _turn(), False)
    assert s.metric_sum(M.LATE_SPANS) == 1
