"""Sessions: the pure rollup (``checks.session``) and the processor's online rollup over real SDK spans.

Idle expiry is driven by an injected clock (``_sessions._clock``), never by sleeping.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from opentelemetry.sdk._logs import LoggerProvider, ReadableLogRecord
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import set_span_in_context

from otel_toolcall_eval import EvalConfig
from otel_toolcall_eval import attributes as A
from otel_toolcall_eval._deadline import Deadline
from otel_toolcall_eval.checks.session import MAX_FAILURE_KEYS, SessionTally, TurnSummary, session_verdict
from otel_toolcall_eval.config import ConfigError
from otel_toolcall_eval.engine import Scorer
from otel_toolcall_eval.online import metrics as M
from otel_toolcall_eval.online.hooks import TraceFinished
from otel_toolcall_eval.online.sessions import SessionRollup, SessionTraces
from otel_toolcall_eval.records import (
    CallScore,
    ErrorEvidence,
    ToolCallRecord,
    TraceVerdict,
    call_digest,
    new_call_history,
)
from tests.helpers import COMPILED, Pipeline, make_pipeline, session_turn, tool_span

# --- the pure rollup ---------------------------------------------------------------------------------


def test_a_session_of_clean_turns_passes() -> None:
    v = session_verdict([TurnSummary(tool_calls=2), TurnSummary(), TurnSummary(tool_calls=1)])
    assert (v.turns, v.tool_calls, v.turns_ok, v.repeated_failures, v.over_budget) == (3, 3, 3, 0, False)
    assert v.ok and v.outcome == "pass"


def test_a_failed_turn_fails_the_session_and_counts_its_figures() -> None:
    v = session_verdict(
        [TurnSummary(tool_calls=1), TurnSummary(tool_calls=3, errors=1, violations=2, composite_ok=False)]
    )
    assert (v.turns, v.tool_calls, v.errors, v.violations, v.turns_ok) == (2, 4, 1, 2, 1)
    assert v.outcome == "fail"


def test_the_same_failing_call_in_two_turns_is_a_repeated_failure() -> None:
    a, b = call_digest("get_weather {city: atlantis}"), call_digest("get_weather {city: paris}")
    turns = [
        TurnSummary(tool_calls=1, errors=1, composite_ok=False, failed_calls=frozenset({a})),
        TurnSummary(tool_calls=1, errors=1, composite_ok=False, failed_calls=frozenset({b})),  # another call
        TurnSummary(tool_calls=2, errors=2, composite_ok=False, failed_calls=frozenset({a, b})),  # both again
    ]
    assert session_verdict(turns).repeated_failures == 2
    assert session_verdict(turns[:2]).repeated_failures == 0  # different arguments: not the same call


def test_repeated_failures_alone_fail_a_session() -> None:
    """Turns that held their own composite (e.g. the failure was retried and fixed within each turn, a case the
    composite does not forgive) still fail the session when the same call failed in two of them."""
    key = frozenset({call_digest("search {q: x}")})
    v = session_verdict([TurnSummary(failed_calls=key), TurnSummary(failed_calls=key)])
    assert v.turns_ok == 2 and v.repeated_failures == 1 and not v.ok


def test_the_session_step_budget_counts_calls_across_turns() -> None:
    turns = [TurnSummary(tool_calls=3), TurnSummary(tool_calls=3)]
    assert not session_verdict(turns, step_budget=6).over_budget
    over = session_verdict(turns, step_budget=5)
    assert over.over_budget and over.outcome == "fail"
    assert not session_verdict(turns).over_budget  # no budget: off


def test_a_session_remembers_a_bounded_number_of_failing_calls() -> None:
    tally = SessionTally()
    tally.add(TurnSummary(failed_calls=frozenset(call_digest(f"t {i}") for i in range(MAX_FAILURE_KEYS + 50))))
    assert len(tally.failed) == MAX_FAILURE_KEYS


# --- the online rollup on its own (``online/sessions.py``): turns in, records out, no processor ---------------
class _Rollup:
    def __init__(self, max_sessions: int = 2, idle: float = 60.0) -> None:
        self.now = 1000.0
        self.logs = InMemoryLogRecordExporter()
        provider = LoggerProvider()
        provider.add_log_record_processor(SimpleLogRecordProcessor(self.logs))
        self.errors: list[str] = []
        self.rollup = SessionRollup(
            step_budget=None,
            max_sessions=max_sessions,
            idle_seconds=idle,
            logger_provider=provider,
            on_error=self.errors.append,
            clock=lambda: self.now,
        )

    def emitted(self) -> list[tuple[str, str, int]]:
        """(conversation id, finalized by, turns) of every record so far."""
        return [
            (a[A.GEN_AI_CONVERSATION_ID], a[A.SESSION_FINALIZED_BY], a[A.SESSION_TURNS])
            for a in (_attrs(r) for r in _records(self.logs))
        ]


def test_the_rollup_emits_a_session_once_it_has_been_idle() -> None:
    r = _Rollup(idle=60.0)
    r.rollup.add_turn("c1", TurnSummary(tool_calls=1), 1, 11)
    r.now += 30
    r.rollup.add_turn("c1", TurnSummary(tool_calls=2), 2, 22)
    r.now += 59
    r.rollup.expire()
    assert r.emitted() == [] and len(r.rollup) == 1  # 59 s after its last turn: still open
    r.now += 2
    r.rollup.expire()
    assert r.emitted() == [("c1", "idle", 2)] and len(r.rollup) == 0 and r.errors == []
    record = _records(r.logs)[0]
    assert record.log_record.span_id == 22  # the record points at the last turn's root


def test_the_rollup_evicts_the_least_recently_active_session_and_still_emits_it() -> None:
    r = _Rollup(max_sessions=2)
    for cid in ("a", "b"):
        r.rollup.add_turn(cid, TurnSummary(), 1, 1)
    r.rollup.add_turn("a", TurnSummary(), 2, 2)  # "b" is now the least recently active
    r.rollup.add_turn("c", TurnSummary(), 3, 3)
    assert r.emitted() == [("b", "evicted", 1)] and len(r.rollup) == 2
    r.rollup.finish_all("flush")
    assert sorted(r.emitted()[1:]) == [("a", "flush", 2), ("c", "flush", 1)] and len(r.rollup) == 0


# --- sessions' own per-trace table (``SessionTraces``): the hooks fed by hand, no processor -----------------
def _traces(max_traces: int = 10) -> tuple[_Rollup, SessionTraces, list[int]]:
    r = _Rollup(max_sessions=10)
    woken: list[int] = []
    traces = SessionTraces(
        r.rollup,
        attributes=("session.id", "gen_ai.conversation.id"),
        max_traces=max_traces,
        max_attribute_length=8,
        wake=lambda: woken.append(1),
    )
    return r, traces, woken


def _failed_score(name: str = "get_weather", city: str = "Paris") -> CallScore:
    record = ToolCallRecord(name, json.dumps({"city": city}), error=ErrorEvidence(status_error=True))
    return Scorer(EvalConfig().policy()).score(record, new_call_history())


def _verdict(errors: int) -> TraceVerdict:
    return TraceVerdict(
        tool_calls=1, errors=errors, over_budget=False, violations=0, violation_weight=0, correct=errors == 0
    )


def test_a_trace_joins_its_session_with_its_first_conversation_id_and_its_failed_calls() -> None:
    r, traces, woken = _traces()
    assert traces.hooks().watches == (traces,) and traces.keys == frozenset({"session.id", "gen_ai.conversation.id"})
    assert not traces.noted(1)
    traces.note(1, {"http.method": "GET"})  # no conversation id: nothing noted
    assert len(traces) == 0
    traces.note(1, {"session.id": "conversation-a-long-id"})
    traces.note(1, {"session.id": "b"})  # the first one wins
    assert traces.noted(1)
    turn = traces.get(1)
    assert turn is not None and turn.conversation == "conversa"  # cut to max_attribute_length
    score = _failed_score()
    for _ in range(2):  # the same failing call twice: one digest
        traces.on_call_scored(1, ToolCallRecord("get_weather"), score, None, {})
    assert turn.failed_calls is not None and len(turn.failed_calls) == 1
    traces.on_trace_finished(TraceFinished(1, 11, _verdict(errors=2), first=True, known=True))
    assert len(r.rollup) == 1 and woken == [1]
    assert turn.done and turn.failed_calls is None and traces.noted(1)  # kept for the gate, its digests gone
    traces.on_call_scored(1, ToolCallRecord("get_weather"), _failed_score(city="Oslo"), None, {})  # late: no turn
    assert turn.failed_calls is None
    # a second turn of the conversation failing the same call: a failure repeated across turns
    traces.note(2, {"gen_ai.conversation.id": "conversa"})
    traces.on_call_scored(2, ToolCallRecord("get_weather"), score, None, {})
    traces.on_trace_finished(TraceFinished(2, 22, _verdict(errors=1), first=True, known=True))
    assert traces.on_flush(Deadline.after_millis(1000)) is True
    records = [_attrs(rec) for rec in _records(r.logs)]
    assert [(a[A.SESSION_TURNS], a[A.SESSION_REPEATED_FAILURES]) for a in records] == [(2, 1)]


def test_a_trace_of_no_conversation_leaves_nothing_in_the_table() -> None:
    r, traces, woken = _traces()
    traces.on_call_scored(5, ToolCallRecord("get_weather"), _failed_score(), None, {})
    assert len(traces) == 1 and not traces.noted(5)  # its failed call, until it is known to be of no conversation
    traces.on_trace_finished(TraceFinished(5, 55, _verdict(errors=1), first=True, known=True))
    assert len(traces) == 0 and len(r.rollup) == 0 and woken == []
    # a second root of a trace that finished already adds no turn (it only lets idle sessions go)
    traces.note(6, {"session.id": "c"})
    traces.on_trace_finished(TraceFinished(6, 66, None, first=False, known=True))
    assert len(r.rollup) == 0


def test_the_per_trace_table_is_bounded_least_recently_used_first() -> None:
    _, traces, _ = _traces(max_traces=3)
    for tid in (1, 2, 3):
        traces.note(tid, {"session.id": f"c{tid}"})
    traces.on_call_scored(1, ToolCallRecord("get_weather"), _failed_score(), None, {})  # 1 is used again: 2 goes
    traces.note(4, {"session.id": "c4"})
    assert len(traces) == 3 and [traces.noted(t) for t in (1, 2, 3, 4)] == [True, False, True, True]


def test_the_timer_keeps_watching_while_a_session_is_open() -> None:
    r, traces, _ = _traces()
    assert traces.on_tick() is False
    traces.note(1, {"session.id": "c"})
    traces.on_trace_finished(TraceFinished(1, 11, None, first=True, known=True))
    assert traces.on_tick() is True
    r.now += 61
    assert traces.on_tick() is False and r.emitted() == [("c", "idle", 1)]


# --- online: the processor over real SDK spans ----------------------------------------------------------


def _pipeline(config: dict[str, Any] | None = None) -> tuple[Pipeline, InMemoryLogRecordExporter, list[float]]:
    logs = InMemoryLogRecordExporter()
    logger_provider = LoggerProvider()
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    p = make_pipeline(EvalConfig.from_dict(config or {}), logger_provider=logger_provider)
    now = [1000.0]
    assert p.processor._pipeline.sessions is not None
    p.processor._pipeline.sessions._clock = lambda: now[0]
    return p, logs, now


def _records(logs: InMemoryLogRecordExporter) -> list[ReadableLogRecord]:
    return [r for r in logs.get_finished_logs()]


def _attrs(record: ReadableLogRecord) -> dict[str, Any]:
    return dict(record.log_record.attributes or {})


def test_turns_sharing_a_conversation_id_are_emitted_once_idle() -> None:
    p, logs, now = _pipeline({"limits": {"session_idle_seconds": 60}})
    for _ in range(3):
        session_turn(p.tracer, "conv-1")
        now[0] += 10
    assert _records(logs) == [] and len(p.processor._pipeline.sessions or ()) == 1  # still active
    now[0] += 61
    session_turn(p.tracer, None)  # any finished trace lets idle sessions go
    (record,) = _records(logs)
    log = record.log_record
    assert log.event_name == A.GEN_AI_EVALUATION_RESULT
    attrs = _attrs(record)
    assert attrs[A.GEN_AI_CONVERSATION_ID] == "conv-1"
    assert attrs[A.GEN_AI_EVALUATION_NAME] == A.SESSION_EVALUATION_NAME
    assert attrs[A.GEN_AI_EVALUATION_SCORE_LABEL] == "pass" and attrs[A.GEN_AI_EVALUATION_SCORE_VALUE] == 1.0
    assert (attrs[A.SESSION_TURNS], attrs[A.SESSION_TOOL_CALLS], attrs[A.SESSION_TURNS_OK]) == (3, 3, 3)
    assert attrs[A.SESSION_FINALIZED_BY] == "idle"
    last_root = p.by_name("invoke_agent")[2]  # the record sits in the last turn's root span context
    assert (log.trace_id, log.span_id) == (last_root.context.trace_id, last_root.context.span_id)
    assert p.metric_sum(M.SESSIONS, outcome="pass", finalized_by="idle") == 1
    assert p.metric_sum(M.SESSION_TURNS, outcome="pass") == 1  # one histogram observation


def test_the_id_may_sit_on_a_chat_span_or_a_plain_span_under_any_configured_key() -> None:
    p, logs, _ = _pipeline()
    session_turn(p.tracer, "s-9", on="chat", key="session.id")
    session_turn(p.tracer, "s-9", on="plain", key="langfuse.session.id")
    session_turn(p.tracer, "s-9", on="root")
    plain = p.one("agent step")
    assert (plain.attributes or {})["langfuse.session.id"] == "s-9"  # forwarded, attributes unchanged
    p.provider.force_flush()
    (record,) = _records(logs)
    assert _attrs(record)[A.SESSION_TURNS] == 3 and _attrs(record)[A.SESSION_FINALIZED_BY] == "flush"


def test_a_failure_repeated_in_a_later_turn_fails_the_session() -> None:
    p, logs, _ = _pipeline({"sessions": {"step_budget": 10}})
    session_turn(p.tracer, "c", city="Atlantis", fail=True)
    session_turn(p.tracer, "c", city="Paris")
    session_turn(p.tracer, "c", city="Atlantis", fail=True)  # the same call failing again, two turns later
    session_turn(p.tracer, "other", city="Atlantis", fail=True)  # another conversation: not a repeat of this one
    p.provider.force_flush()
    by_id = {_attrs(r)[A.GEN_AI_CONVERSATION_ID]: _attrs(r) for r in _records(logs)}
    c = by_id["c"]
    assert (c[A.SESSION_TURNS], c[A.SESSION_ERRORS], c[A.SESSION_TURNS_OK], c[A.SESSION_REPEATED_FAILURES]) == (
        3,
        2,
        1,
        1,
    )
    assert c[A.GEN_AI_EVALUATION_SCORE_LABEL] == "fail" and c[A.SESSION_OVER_BUDGET] is False
    assert by_id["other"][A.SESSION_REPEATED_FAILURES] == 0
    assert p.metric_sum(M.SESSIONS, outcome="fail") == 2


def test_the_session_step_budget_is_checked_across_turns() -> None:
    p, logs, _ = _pipeline({"sessions": {"step_budget": 2}})
    for _ in range(3):
        session_turn(p.tracer, "long")
    p.provider.force_flush()
    (record,) = _records(logs)
    assert _attrs(record)[A.SESSION_OVER_BUDGET] is True and _attrs(record)[A.GEN_AI_EVALUATION_SCORE_LABEL] == "fail"


def test_the_first_conversation_id_of_a_trace_wins() -> None:
    p, logs, _ = _pipeline()
    with p.tracer.start_as_current_span("root", attributes={A.GEN_AI_CONVERSATION_ID: "late"}):
        with p.tracer.start_as_current_span("step", attributes={A.GEN_AI_CONVERSATION_ID: "early"}):
            pass  # ends first
        tool_span(p.tracer, "get_weather", {"city": "Paris"})
    p.provider.force_flush()
    assert [_attrs(r)[A.GEN_AI_CONVERSATION_ID] for r in _records(logs)] == ["early"]


def test_sessions_are_bounded_and_evicted_sessions_are_counted_and_still_emitted() -> None:
    p, logs, _ = _pipeline({"limits": {"max_sessions": 3}})
    for i in range(10):
        session_turn(p.tracer, f"conv-{i}")
    assert len(p.processor._pipeline.sessions or ()) == 3
    assert p.metric_sum(M.SESSION_DROPPED, reason="evicted") == 7
    evicted = [_attrs(r) for r in _records(logs)]
    assert [a[A.GEN_AI_CONVERSATION_ID] for a in evicted] == [f"conv-{i}" for i in range(7)]
    assert {a[A.SESSION_FINALIZED_BY] for a in evicted} == {"evicted"}
    p.provider.shutdown()
    assert [_attrs(r)[A.SESSION_FINALIZED_BY] for r in _records(logs)][7:] == ["shutdown"] * 3


def test_an_unfinished_trace_joins_its_session_at_shutdown() -> None:
    p, logs, _ = _pipeline()
    session_turn(p.tracer, "c")
    root = p.tracer.start_span("never ends", attributes={A.GEN_AI_CONVERSATION_ID: "c"})
    with p.tracer.start_as_current_span("t", context=set_span_in_context(root)) as s:
        s.set_attributes({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "get_weather"})
        s.set_attribute(A.GEN_AI_CONVERSATION_ID, "c")
    p.provider.shutdown()
    (record,) = _records(logs)
    assert _attrs(record)[A.SESSION_TURNS] == 2 and _attrs(record)[A.SESSION_TOOL_CALLS] == 2


def test_a_long_or_odd_conversation_id_is_cut_and_never_a_metric_label() -> None:
    p, logs, _ = _pipeline({"limits": {"max_attribute_length": 32}})
    session_turn(p.tracer, "x" * 10_000)
    session_turn(p.tracer, None, on="root")
    with p.tracer.start_as_current_span("root", attributes={A.GEN_AI_CONVERSATION_ID: 42}):
        tool_span(p.tracer, "get_weather", {"city": "Paris"})
    p.provider.force_flush()
    ids = sorted(str(_attrs(r)[A.GEN_AI_CONVERSATION_ID]) for r in _records(logs))
    assert ids == ["42", "x" * 32]
    labels = {k for attrs, _ in p.metric_points(M.SESSIONS) for k in attrs}
    assert labels - set(M.SOURCE_ATTRIBUTES) == {"outcome", "finalized_by"}


def test_session_metrics_carry_the_source_of_their_last_turn_with_a_verdict() -> None:
    """Sessions are by service, agent and version as their traces are (issue 30); a last turn without tool
    activity (no verdict, no source) leaves the session's source as it was."""
    p, _, _ = _pipeline()
    tracers = {}
    for version in ("1.4.0", "1.5.0"):
        provider = TracerProvider(resource=Resource.create({"service.name": "travel", "service.version": version}))
        provider.add_span_processor(p.processor)
        tracers[version] = provider.get_tracer("agent")

    def turn(version: str, conversation: str, fail: bool = False, tools: bool = True) -> None:
        tracer = tracers[version]
        root = {A.GEN_AI_CONVERSATION_ID: conversation, "gen_ai.agent.name": "planner"}
        with tracer.start_as_current_span("invoke_agent planner", attributes=root):
            if tools:
                tool_span(tracer, "get_weather", {"city": "Paris"}, error=ValueError("no") if fail else None)

    turn("1.4.0", "conv-1")
    turn("1.4.0", "conv-1", tools=False)
    turn("1.5.0", "conv-2", fail=True)
    p.processor.force_flush()
    source = {"service.name": "travel", "gen_ai.agent.name": "planner"}
    assert sorted(p.metric_points(M.SESSIONS), key=repr) == [
        (source | {"service.version": "1.4.0", "outcome": "pass", "finalized_by": "flush"}, 1),
        (source | {"service.version": "1.5.0", "outcome": "fail", "finalized_by": "flush"}, 1),
    ]
    assert p.metric_sum(M.SESSION_TURNS, **source, **{"service.version": "1.4.0"}, outcome="pass") == 1


def test_every_span_is_forwarded_once_with_sessions_on() -> None:
    p, _, _ = _pipeline()
    for on in ("root", "chat", "plain"):
        session_turn(p.tracer, "c", on=on)
    names = [s.name for s in p.spans()]
    assert sorted(names) == sorted(["invoke_agent", "chat", "execute_tool get_weather"] * 3 + ["agent step"])


def test_sessions_can_be_switched_off() -> None:
    p = make_pipeline(EvalConfig.from_dict({"sessions": {"enabled": False}}))
    assert p.processor._pipeline.sessions is None
    session_turn(p.tracer, "c")
    p.provider.force_flush()
    assert p.metric_points(M.SESSIONS) == []


def test_a_failing_log_export_is_contained() -> None:
    class Broken(LoggerProvider):
        def get_logger(self, *args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("no logs today")

    p = make_pipeline(logger_provider=Broken())
    session_turn(p.tracer, "c")
    p.provider.force_flush()  # must not raise
    assert p.metric_sum(M.INTERNAL_ERRORS, stage="sessions.emit") == 1
    assert len(p.by_name("invoke_agent")) == 1


@pytest.mark.parametrize(
    ("section", "field"),
    [
        ({"sessions": {"attributes": []}}, "sessions.attributes"),
        ({"sessions": {"attributes": [""]}}, "sessions.attributes"),
        ({"sessions": {"step_budget": 0}}, "sessions.step_budget"),
        ({"limits": {"max_sessions": 0}}, "limits.max_sessions"),
        ({"limits": {"session_idle_seconds": 0}}, "limits.session_idle_seconds"),
        ({"sessions": {"idle": 3}}, "sessions.idle"),
    ],
)
def test_session_config_errors_name_the_field(section: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError, match=field.replace(".", r"\.")):
        EvalConfig.from_dict(section)


def test_tallies_merged_in_any_order_give_the_same_verdict() -> None:
    """The offline evaluator scores chunks apart and merges them: the verdict must not depend on the split."""
    a, b = call_digest("t {x: 1}"), call_digest("t {x: 2}")
    turns = [
        TurnSummary(tool_calls=1, errors=1, composite_ok=False, failed_calls=frozenset({a})),
        TurnSummary(tool_calls=2),
        TurnSummary(tool_calls=1, errors=1, composite_ok=False, failed_calls=frozenset({a, b})),
        TurnSummary(tool_calls=1, errors=1, composite_ok=False, failed_calls=frozenset({a})),
    ]
    whole = session_verdict(turns)
    first, second = SessionTally(), SessionTally()
    for t in turns[2:]:
        first.add(t)
    for t in turns[:2]:
        second.add(t)
    first.merge(second)
    assert first.verdict(None) == whole
    assert whole.repeated_failures == 2  # a failed in three turns: two repeats


def test_only_the_first_plain_span_naming_the_conversation_is_evaluated(monkeypatch: pytest.MonkeyPatch) -> None:
    """OpenInference's ``using_session`` puts ``session.id`` on every span: once the trace has noted it, the
    other plain spans are forwarded untouched, as plain spans are. (Which spans reach ``_evaluate`` is seen by
    replacing it, which the compiled build's direct calls between the processor's methods do not see: there the
    spans and the conversation's one record are checked.)"""
    p, logs, _ = _pipeline()
    evaluated: list[str] = []
    inner = p.processor._pipeline._evaluate

    def counting(span: Any, read: Any) -> Any:
        evaluated.append(span.name)
        return inner(span, read)

    if not COMPILED:  # a native class's methods cannot be replaced
        monkeypatch.setattr(p.processor._pipeline, "_evaluate", counting)
    with p.tracer.start_as_current_span("root", attributes={"session.id": "s"}):
        for i in range(5):
            with p.tracer.start_as_current_span(f"step {i}", attributes={"session.id": "s", "http.method": "GET"}):
                pass
        with p.tracer.start_as_current_span("chat", attributes={"session.id": "s", "gen_ai.operation.name": "chat"}):
            pass
    if not COMPILED:
        assert evaluated == ["step 0", "chat", "root"]
    assert len(p.spans()) == 7
    p.provider.force_flush()
    assert [_attrs(r)[A.GEN_AI_CONVERSATION_ID] for r in _records(logs)] == ["s"]


def test_the_record_of_noted_traces_is_bounded() -> None:
    p, _, _ = _pipeline({"limits": {"max_traces": 5}})
    for i in range(20):
        session_turn(p.tracer, f"c{i}")
    traces = p.processor._pipeline.hooks.watches[0]  # sessions' own per-trace table
    assert isinstance(traces, SessionTraces) and len(traces) == 5
