"""Issue 18: the processor's timer thread emits idle sessions (and releases failed spans held too long) when no
trace comes to trigger it. Driven by an injected wait (one tick at a time) and the injected session clock:
nothing here sleeps on wall time or asserts a duration."""

from __future__ import annotations

import gc
import os
import threading
from typing import Any

import pytest
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor

from otel_toolcall_eval import EvalConfig
from otel_toolcall_eval import attributes as A
from otel_toolcall_eval._ticker import Ticker
from otel_toolcall_eval.online.lifecycle import timer_period
from tests.helpers import Pipeline, TimerSteps, make_pipeline, report_from_fork, session_turn


def _pipeline(config: dict[str, Any]) -> tuple[Pipeline, InMemoryLogRecordExporter, list[float], TimerSteps]:
    logs = InMemoryLogRecordExporter()
    logger_provider = LoggerProvider()
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    p = make_pipeline(EvalConfig.from_dict(config), logger_provider=logger_provider)
    now = [1000.0]
    assert p.processor._pipeline.sessions is not None and p.processor._pipeline.ticker is not None
    p.processor._pipeline.sessions._clock = lambda: now[0]
    steps = TimerSteps()
    p.processor._pipeline.ticker._wait = steps.wait
    return p, logs, now, steps


def test_an_idle_session_is_emitted_by_the_timer_without_another_trace() -> None:
    p, logs, now, steps = _pipeline({"limits": {"session_idle_seconds": 60, "max_hold_seconds": 100}})
    ticker = p.processor._pipeline.ticker
    assert ticker is not None and not ticker.running  # lazily: no session yet, no thread
    session_turn(p.tracer, "conv-1")
    assert ticker.running
    steps.reached_wait()
    assert steps.periods == [15.0]  # a quarter of the idle time
    now[0] += 30
    steps.tick()
    assert logs.get_finished_logs() == ()  # not idle yet
    now[0] += 31
    steps.tick()  # no trace finished meanwhile: the timer found it idle
    (record,) = logs.get_finished_logs()
    attrs = dict(record.log_record.attributes or {})
    assert attrs[A.GEN_AI_CONVERSATION_ID] == "conv-1" and attrs[A.SESSION_FINALIZED_BY] == "idle"
    assert len(p.processor._pipeline.sessions or ()) == 0
    p.provider.shutdown()
    assert not ticker.running  # stopped by shutdown, within its deadline


def test_the_timer_releases_a_failed_span_held_too_long() -> None:
    p, _, _, steps = _pipeline({"limits": {"max_hold_seconds": 8}})
    held = p.processor._pipeline.held
    assert held is not None
    clock = [0.0]
    held._clock = lambda: clock[0]
    root = p.tracer.start_span("invoke_agent", attributes={"gen_ai.operation.name": "invoke_agent"})
    from opentelemetry import trace

    from tests.helpers import tool_span

    with trace.use_span(root, end_on_exit=False):
        tool_span(p.tracer, "get_weather", {"city": "X"}, error=RuntimeError("down"))
    steps.reached_wait()  # the first held span started the timer (sessions saw no turn yet)
    assert steps.periods == [2.0] and p.by_name("execute_tool get_weather") == []
    clock[0] += 9
    steps.tick()
    (span,) = p.by_name("execute_tool get_weather")
    assert A.RECOVERY_CLASS not in (span.attributes or {})
    root.end()
    assert len(p.by_name("execute_tool get_weather")) == 1
    p.provider.shutdown()


def test_no_thread_when_sessions_are_off_and_nothing_is_held() -> None:
    p = make_pipeline(EvalConfig.from_dict({"sessions": {"enabled": False}, "limits": {"max_held_spans": 0}}))
    assert p.processor._pipeline.ticker is None
    p = make_pipeline(EvalConfig.from_dict({"sessions": {"enabled": False}}))
    ticker = p.processor._pipeline.ticker
    assert ticker is not None
    session_turn(p.tracer, "conv-1")  # sessions off: the id means nothing; no failure: nothing held
    assert not ticker.running
    p.provider.shutdown()
    p, *_ = _pipeline({})
    session_turn(p.tracer, None)  # sessions on, but no conversation id: no open session, no thread
    assert p.processor._pipeline.ticker is not None and not p.processor._pipeline.ticker.running
    p.provider.shutdown()


@pytest.mark.parametrize(
    ("idle", "hold", "period"),
    [(300, 60, 15.0), (300, None, 60.0), (2, None, 1.0), (None, 20, 5.0), (100, 3600, 25.0)],
)
def test_the_period_is_a_quarter_between_one_second_and_a_minute(
    idle: float | None, hold: float | None, period: float
) -> None:
    assert timer_period(idle, hold) == period


class _Owner:
    def __init__(self) -> None:
        self.ticks = 0

    def tick(self) -> None:
        self.ticks += 1


def test_the_timer_does_not_keep_its_owner_alive() -> None:
    owner, steps = _Owner(), TimerSteps()
    ticker = Ticker(1.0, owner.tick, wait=steps.wait)
    ticker.ensure_started()
    steps.reached_wait()
    steps.tick()
    assert owner.ticks == 1
    thread = ticker._thread
    assert thread is not None
    del owner
    gc.collect()
    steps._go.release()  # the next wake-up finds the owner gone
    thread.join(10)
    assert not thread.is_alive()


def test_a_stopped_timer_never_starts_again() -> None:
    owner, steps = _Owner(), TimerSteps()
    ticker = Ticker(1.0, owner.tick, wait=steps.wait)
    ticker.ensure_started()
    steps.reached_wait()
    assert ticker.stop(10) and not ticker.running
    ticker.ensure_started()
    assert not ticker.running and ticker._thread is not None and not ticker._thread.is_alive()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork (not on Windows)")
def test_a_forked_child_starts_its_own_timer_on_first_use() -> None:
    p, logs, now, steps = _pipeline({"limits": {"session_idle_seconds": 60}})
    session_turn(p.tracer, "conv-1")
    ticker = p.processor._pipeline.ticker
    assert ticker is not None and ticker.running
    steps.reached_wait()

    def child() -> dict[str, Any]:  # no timer thread until a session opens there
        before = ticker.running or ticker._thread is not None
        child_steps = TimerSteps()
        ticker._wait = child_steps.wait
        session_turn(p.tracer, "conv-child")
        child_steps.reached_wait()
        now[0] += 61
        child_steps.tick()
        emitted = [dict(r.log_record.attributes or {}) for r in logs.get_finished_logs()]
        return {"before": before, "after": ticker.running, "emitted": [a[A.GEN_AI_CONVERSATION_ID] for a in emitted]}

    report = report_from_fork(child)
    # the parent's session is the parent's (not emitted in the child); the child's own goes idle there
    assert report == {"before": False, "after": True, "emitted": ["conv-child"]}
    p.provider.shutdown()


def test_the_timer_finalizes_a_trace_whose_root_never_ends_at_its_ttl() -> None:
    """A trace whose root never ends (a crashed agent) is finalized at its TTL by the timer, not only at the next
    span or flush: its held failed span goes out with its class and the trace is counted as expired."""
    p, _, _, steps = _pipeline({"limits": {"trace_ttl_seconds": 60, "max_hold_seconds": 600}})
    store_clock = [0.0]
    p.processor._pipeline.store._clock = lambda: store_clock[0]
    root = p.tracer.start_span("invoke_agent", attributes={"gen_ai.operation.name": "invoke_agent"})
    from opentelemetry import trace

    from tests.helpers import tool_span

    with trace.use_span(root, end_on_exit=False):
        tool_span(p.tracer, "get_weather", {"city": "X"}, error=RuntimeError("down"))
    steps.reached_wait()  # the held span started the timer
    steps.tick()
    assert p.by_name("execute_tool get_weather") == []  # held: nothing decided it, its trace is live
    store_clock[0] += 61
    steps.tick()  # no span, no flush: only the timer can notice the TTL
    (span,) = p.by_name("execute_tool get_weather")
    assert (span.attributes or {}).get(A.RECOVERY_CLASS) == "carried_on"
    assert p.metric_sum("toolcall_eval.traces", finalized_by="expired") == 1
    root.end()
    p.provider.shutdown()
    assert len(p.by_name("execute_tool get_weather")) == 1


class _Parking(TimerSteps):
    """``TimerSteps``, and a wait with no timeout is a real one: no tick of the test's clock ends it, only a poke."""

    def __init__(self) -> None:
        super().__init__()
        self.waits: list[float | None] = []

    def wait(self, stop: threading.Event, seconds: float | None) -> bool:  # type: ignore[override]
        self.waits.append(seconds)
        if seconds is None:
            self._at_wait.release()
            return stop.wait()
        return super().wait(stop, seconds)


class _Watching:
    """A timer's owner: ``busy`` says whether anything is left to watch."""

    def __init__(self) -> None:
        self.busy = False
        self.ticks = 0

    def tick(self) -> bool:
        self.ticks += 1
        return self.busy


def _parking_timer() -> tuple[_Watching, _Parking, Ticker]:
    owner, steps = _Watching(), _Parking()
    ticker = Ticker(1.0, owner.tick, wait=steps.wait)
    ticker.ensure_started()
    steps.reached_wait()
    return owner, steps, ticker


def test_an_idle_timer_parks_until_something_is_held_again() -> None:
    """Nothing to watch for two ticks in a row: the thread waits without a timeout (no wake-ups while idle) until
    the next held span or session turn (``ensure_started``); while something is watched it ticks every period."""
    owner, steps, ticker = _parking_timer()
    steps.tick()
    steps.tick()
    assert owner.ticks == 2 and steps.waits == [1.0, 1.0, None]  # parked
    owner.busy = True
    ticker.ensure_started()  # a span is held: the thread wakes and waits a period before its next tick
    steps.reached_wait()
    assert owner.ticks == 2 and steps.waits[-1] == 1.0
    for _ in range(3):
        steps.tick()
    assert owner.ticks == 5 and None not in steps.waits[3:]  # busy: it keeps ticking
    owner.busy = False
    steps.tick()
    steps.tick()
    assert owner.ticks == 7 and steps.waits[-1] is None
    assert ticker.stop(10) and not ticker.running  # stop wakes a parked thread


def test_a_span_held_between_the_two_empty_ticks_keeps_the_timer_awake() -> None:
    owner, steps, ticker = _parking_timer()
    steps.tick()  # nothing to watch: the intent to park is published
    ticker.ensure_started()  # a span held now: what the second tick sees (nothing, say) no longer parks it
    steps.tick()
    assert owner.ticks == 2 and steps.waits == [1.0, 1.0, 1.0]
    steps.tick()
    assert owner.ticks == 3 and steps.waits[-1] is None  # two empty ticks without a poke between: parked
    assert ticker.stop(10)


def test_a_parked_timer_ends_when_its_owner_is_gone() -> None:
    owner, steps, ticker = _parking_timer()
    steps.tick()
    steps.tick()
    assert steps.waits[-1] is None
    thread = ticker._thread
    assert thread is not None
    del owner
    gc.collect()  # the weak reference's callback wakes the thread, which finds no owner
    thread.join(10)
    assert not thread.is_alive()


def test_the_processor_timer_parks_once_nothing_is_held_and_wakes_for_the_next_held_span() -> None:
    p, *_ = _pipeline({"limits": {"max_hold_seconds": 8}})
    parking = _Parking()
    ticker = p.processor._pipeline.ticker
    assert ticker is not None
    ticker._wait = parking.wait
    from opentelemetry import trace

    from tests.helpers import tool_span

    def failed_trace() -> None:
        root = p.tracer.start_span("invoke_agent", attributes={"gen_ai.operation.name": "invoke_agent"})
        with trace.use_span(root, end_on_exit=False):
            tool_span(p.tracer, "get_weather", {"city": "X"}, error=RuntimeError("down"))
        parking.reached_wait()  # the held span started (or woke) the timer
        parking.tick()  # the trace is in flight, its span held: a tick with something to watch
        assert parking.waits[-1] == 2.0
        root.end()  # decides the held span, finishes the trace: nothing left

    failed_trace()
    parking.tick()
    parking.tick()
    assert parking.waits[-1] is None  # parked: no wake-ups while the processor is idle
    assert len(p.by_name("execute_tool get_weather")) == 1
    failed_trace()  # the next held span wakes it
    assert len(p.by_name("execute_tool get_weather")) == 2
    p.provider.shutdown()
    assert not ticker.running


class _Busy:
    def __init__(self) -> None:
        self.busy = True

    def tick(self) -> bool:
        return self.busy


def test_awake_says_when_ensure_started_would_do_nothing() -> None:
    """``Ticker.awake``, what the pipeline reads before it calls ``ensure_started`` on a held span's path: True only
    while the thread runs and has not published that it will park (then a poke is due: the call is made)."""
    owner, steps = _Busy(), TimerSteps()
    ticker = Ticker(1.0, owner.tick, wait=steps.wait)
    assert not ticker.awake  # not started
    ticker.ensure_started()
    steps.reached_wait()
    assert ticker.awake
    owner.busy = False
    steps.tick()  # an empty tick: from now on what is held must poke the thread
    assert not ticker.awake
    ticker.ensure_started()  # the poke
    owner.busy = True
    steps.tick()
    assert ticker.awake
    assert ticker.stop(10)
