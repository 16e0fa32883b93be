"""Flush, shutdown and the timer of one pipeline, on one deadline.

``force_flush(T)`` and ``shutdown(T)`` score what is queued first; the queue, the judge and the downstream
processors share one deadline, T from the call. The timer (``_ticker.Ticker``) wakes at ``timer_period`` and
lets go what waits without a span to trigger it: traces past their TTL, held spans past their time, roots whose
grace window ended, idle sessions.
"""

from __future__ import annotations

from functools import partial

from otel_toolcall_eval._deadline import Deadline
from otel_toolcall_eval.online.held_spans import FLUSH, SHUTDOWN
from otel_toolcall_eval.online.pipeline import Pipeline


def timer_period(idle_seconds: float | None, hold_seconds: float | None, grace_seconds: float | None = None) -> float:
    """How often the timer wakes: a quarter of the idle time (sessions), of the hold time (held failed spans) and
    of the root grace window, the shortest, but at least every 60 s and at most every second. An idle session is
    emitted between ``session_idle_seconds`` and that plus the period after its last turn; a held span goes at most
    a period after ``max_hold_seconds``, a held root a period after its window (sooner with traffic: every new
    trace ends the windows that are over)."""
    quarters = [t / 4 for t in (idle_seconds, hold_seconds, grace_seconds) if t is not None]
    return min(max(min(quarters, default=60.0), 1.0), 60.0)


class Lifecycle:
    """The pipeline's flush, shutdown and timer tick (never raise: each part's failure is contained)."""

    def __init__(self, pipeline: Pipeline) -> None:
        self.pipeline = pipeline
        self._shutdown = False

    def shutdown(self, timeout_millis: float = 30000) -> None:
        """Score and forward what is queued, let the judge drain, then shut the downstream processors down:
        the queue and the judge share one deadline, ``timeout_millis`` from now. A span that ends meanwhile is
        scored inline and forwarded."""
        if self._shutdown:
            return
        self._shutdown = True
        p = self.pipeline
        safe = p.contained.safe
        deadline = Deadline.after_millis(timeout_millis)
        background = p.background
        if background is not None:  # score and forward what is queued before the state is drained
            safe(lambda: background.shutdown(deadline.remaining()), "background.shutdown")
        ticker = p.ticker
        if ticker is not None:
            safe(lambda: ticker.stop(deadline.remaining()), "timer.stop")
        for trace_id, state in p.store.drain():
            if state.root is not None:  # a held root: out now, with its verdict
                p.release_root(trace_id, state)
                continue
            p.record_unfinished(trace_id, state, "shutdown")  # their held failed spans go, classified
        held = p.held
        if held is not None:  # what is left (a slot of a span still being scored): out without a class
            safe(lambda: held.release_all(SHUTDOWN), "held.shutdown")
        for hook in p.hooks.on_shutdown:  # after the unfinished traces joined their sessions, reached the judge
            safe(partial(hook, deadline), "hook.on_shutdown")
        p.downstream.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Score and forward what is queued, wait for the judge, then flush the downstream processors: all
        within one deadline, ``timeout_millis`` from now."""
        p = self.pipeline
        safe = p.contained.safe
        deadline = Deadline.after_millis(timeout_millis)
        ok = True
        background = p.background
        if background is not None:  # spans queued before the flush reach the downstream before it flushes
            ok = bool(safe(lambda: background.flush(deadline.remaining()), "background.flush"))
        p.store.expire()
        if p.grace:  # held roots go now, with their verdicts (whose end decides their failed calls' classes)
            safe(p.store.release_held, "store.release_held")
        held = p.held
        if held is not None:  # the exporter must get every span: held ones go, without a class still undecided
            safe(lambda: held.release_all(FLUSH), "held.flush")
        for hook in p.hooks.on_flush:  # open sessions emitted (a flush may be the last chance), the judge waited for
            ok = bool(safe(partial(hook, deadline), "hook.on_flush")) and ok
        return p.downstream.force_flush(deadline) and ok

    def tick(self) -> bool:
        """The timer: traces past their TTL (a root that never ends), held spans past their time and idle sessions
        go without waiting for a span. Expiry first: an expired trace's held spans leave classified and its turn
        joins its session before the session's idleness is judged. False when nothing is left to watch (no trace
        in flight, nothing held, no open session): the timer then parks until the next held span or session turn."""
        p = self.pipeline
        safe = p.contained.safe
        store = p.store
        safe(store.expire, "store.expire")
        held = p.held
        if held is not None:
            safe(held.expire, "held.expire")
        watching = False
        for hook in p.hooks.on_tick:  # idle sessions
            watching = bool(safe(hook, "hook.on_tick")) or watching
        return bool(len(store) or (held is not None and len(held)) or watching)
