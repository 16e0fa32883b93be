"""One daemon thread per processor that calls ``tick`` every ``period`` seconds: lets idle sessions and failed
spans held too long go when no span arrives to trigger it (an agent that stopped talking).

Started lazily (``ensure_started``: the first session turn, the first held span), so a processor that needs
neither never has the thread; stopped by ``stop`` within a deadline (``shutdown``); in a forked child the
thread does not exist, so the registry (``_fork``) resets it and the child starts its own on first use.
``wait`` is injectable: a test replaces the wall-clock wait by an event it sets, one tick at a time. The thread
holds its owner's ``tick`` weakly: a processor dropped without ``shutdown`` is not kept alive by its timer, whose
thread ends at its next wake-up.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable

from otel_toolcall_eval import _fork


class Ticker:
    """``tick`` (a bound method, held weakly) must not raise (what it calls is contained); if it does anyway, the
    thread goes on."""

    def __init__(
        self,
        period: float,
        tick: Callable[[], None],
        *,
        name: str = "toolcall-eval-timer",
        wait: Callable[[threading.Event, float], bool] | None = None,
    ) -> None:
        self.period = period
        self._tick = weakref.WeakMethod(tick)
        self._name = name
        self._wait = wait or _wall_clock_wait
        self._init_state()
        _fork.reinit_after_fork(self)

    def _init_state(self) -> None:
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._stopped = False

    def _after_fork_in_child(self) -> None:
        stopped = self._stopped
        self._init_state()
        self._stopped = stopped  # a processor shut down before the fork stays so in the child

    @property
    def running(self) -> bool:
        thread = self._thread
        return thread is not None and thread.is_alive()

    def ensure_started(self) -> None:
        """Start the thread if it is not running (once stopped, never again). Cheap when it runs."""
        if self._thread is not None or self._stopped:
            return
        with self._lock:
            if self._thread is not None or self._stopped:
                return
            thread = threading.Thread(target=self._run, name=self._name, daemon=True)
            thread.start()
            self._thread = thread

    def stop(self, timeout_seconds: float) -> bool:
        """Stop the thread and wait for it at most ``timeout_seconds``; True when it ended."""
        with self._lock:
            self._stopped = True
            thread = self._thread
        self._stop.set()
        if thread is None or thread is threading.current_thread():
            return True
        thread.join(max(0.0, timeout_seconds))
        return not thread.is_alive()

    def _run(self) -> None:
        while not self._wait(self._stop, self.period):
            tick = self._tick()
            if tick is None:  # the owner is gone
                return
            try:
                tick()
            except Exception:  # noqa: BLE001 - the tick contains its own failures; the timer outlives one
                continue
            finally:
                del tick


def _wall_clock_wait(stop: threading.Event, seconds: float) -> bool:
    """Sleep ``seconds`` or until stopped; True when stopped."""
    return stop.wait(seconds)
