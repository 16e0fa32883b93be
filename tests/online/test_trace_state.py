"""The trace store on its own (``online/trace_state.py``): bounds, expiry, finished traces and held roots, driven
by an injected clock, without a processor or a span."""

from __future__ import annotations

from collections import OrderedDict

from otel_toolcall_eval._lru import pop_expired
from otel_toolcall_eval.online.trace_state import FLUSH, WINDOW, TraceState, TraceStore


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def store(
    max_traces: int = 3, ttl: float = 10.0, grace: float = 0.0
) -> tuple[TraceStore, Clock, list[tuple[int, str]]]:
    clock = Clock()
    dropped: list[tuple[int, str]] = []
    s = TraceStore(
        max_traces, ttl, lambda tid, state, reason: dropped.append((tid, reason)), clock, grace_seconds=grace
    )
    return s, clock, dropped


def test_pop_expired_takes_the_front_entries_at_or_before_the_deadline_and_stops_at_the_first_live_one() -> None:
    items = OrderedDict([("a", 1.0), ("b", 2.0), ("c", 5.0), ("d", 3.0)])  # "d" is behind a live entry: kept
    assert pop_expired(items, 2.0, float) == [("a", 1.0), ("b", 2.0)]
    assert list(items) == ["c", "d"]
    assert pop_expired(items, 4.0, float) == [] and pop_expired(OrderedDict(), 9.0, float) == []


def test_the_least_recently_seen_trace_is_evicted_at_the_bound() -> None:
    s, clock, dropped = store(max_traces=2)
    a, b = s.get(1), s.get(2)
    assert a is not None and b is not None and len(s) == 2
    clock.now += 1
    assert s.get(1) is a  # seen again: now the youngest
    s.get(3)
    assert dropped == [(2, "evicted")] and len(s) == 2 and s.knows(1) and s.knows(3) and not s.knows(2)


def test_a_trace_whose_root_never_ends_expires_after_the_ttl() -> None:
    s, clock, dropped = store(ttl=10.0)
    s.get(1)
    clock.now += 5
    s.get(2)
    clock.now += 6  # 11 s after trace 1 was last seen, 6 s after trace 2
    s.expire()
    assert dropped == [(1, "expired")] and s.is_live(2) and not s.is_live(1)


def test_finish_is_first_once_and_a_span_after_its_root_joins_the_finished_state() -> None:
    s, _, dropped = store()
    state = s.get(7)
    assert s.finish(7) == (state, True)
    assert state is not None and state.finished
    assert not s.is_live(7) and s.knows(7)
    assert s.get(7) is state  # a late span scores against the finished trace's history
    assert s.finish(7) == (state, False)  # a second root of the trace is not counted again
    assert dropped == [] and len(s) == 0


def test_a_state_says_whether_it_is_still_among_the_live_traces() -> None:
    """``TraceState.live`` (what the call stage reads before holding a failed call's span) follows the store: False
    once the state left the live traces, evicted, expired, finished or drained."""
    s, clock, _ = store(max_traces=2, ttl=10.0)
    evicted, expired, finished, drained = s.get(1), s.get(2), None, None
    assert evicted is not None and expired is not None and evicted.live and expired.live
    clock.now += 1
    s.get(2)
    s.get(3)  # trace 1, the least recently seen, is evicted
    assert not evicted.live and expired.live
    clock.now += 20
    finished = s.get(4)
    assert not expired.live  # expired when trace 4 came
    assert finished is not None and finished.live
    s.finish(4)
    assert not finished.live and finished.finished
    drained = s.get(5)
    assert drained is not None and drained.live
    s.drain()
    assert not drained.live


def test_a_trace_remembered_only_by_its_id_gives_a_finished_state_kept_nowhere() -> None:
    s, _, _ = store(max_traces=2)
    s.get(1)
    s.finish(1)
    s._finished.clear()  # the bounded record of finished states let it go; its id is still remembered
    late = s.get(1)
    assert isinstance(late, TraceState) and late.finished and len(s) == 0 and not s.knows(1)


def test_a_held_root_leaves_once_when_its_window_ends_or_at_a_flush() -> None:
    s, clock, dropped = store(grace=2.0)
    for tid in (1, 2):
        s.get(tid)
        assert s.hold_root(tid, ("span", {}, None, None))
    assert not s.hold_root(1, ("again", {}, None, None))  # one held root per trace
    assert s.finish(1)[1] is False  # a root ending while one is held does not finish the trace
    assert s.held_roots == 2
    clock.now += 2.5
    s.expire()
    assert dropped == [(1, WINDOW), (2, WINDOW)] and s.held_roots == 0 and len(s) == 0
    s.get(3)
    s.hold_root(3, ("span", {}, None, None))
    s.release_held()
    assert dropped[-1] == (3, FLUSH) and s.held_roots == 0


def test_drain_returns_every_live_state_and_forgets_the_finished_ones() -> None:
    s, _, dropped = store()
    s.get(1)
    s.get(2)
    s.finish(2)
    drained = s.drain()
    assert [tid for tid, _ in drained] == [1] and len(s) == 0 and not s.knows(2) and dropped == []
