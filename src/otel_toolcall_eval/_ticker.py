"""One daemon thread per processor that calls ``tick`` every ``period`` seconds: lets idle sessions and failed
spans held too long go when no span arrives to trigger it (an agent that stopped talking).

Started lazily (``ensure_started``: the first session turn, the first held span), so a processor that needs
neither never has the thread; stopped by ``stop`` within a deadline (``shutdown``); in a forked child the
thread does not exist, so the registry (``_fork``) resets it and the child starts its own on first use.
``wait`` is injectable: a test replaces the wall-clock wait by an event it sets, one tick at a time. The thread
holds its owner's ``tick`` weakly: a processor dropped without ``shutdown`` is not kept alive by its timer, whose
thread ends at its next wake-up.

An idle timer costs nothing: a ``tick`` that returns False says nothing is left to watch (nothing held, no open
session, no trace in flight); after two such ticks in a row the thread parks (a wait without a timeout) until
``ensure_started`` is called again (the next held span or session turn) or ``stop``. The first empty tick
publishes the intent to park and the second confirms it, so a span held in between is never missed: it finds
the intent published and wakes the thread.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable

from mypy_extensions import mypyc_attr

from otel_toolcall_eval import _fork


class _WeakBound:
    """A bound method held weakly, called back when its owner goes: ``weakref.WeakMethod`` for any bound method,
    compiled ones included (in the compiled build the owner's methods are built-in methods, which ``WeakMethod``
    rejects); calling it gives the bound method again, or None once the owner is gone."""

    __slots__ = ("_name", "_owner")

    def __init__(self, method: Callable[[], bool | None], callback: Callable[[object], None]) -> None:
        owner = getattr(method, "__self__", None)
        if owner is None:
            raise TypeError(f"argument should be a bound method, not {type(method).__name__}")
        self._owner = weakref.ref(owner, callback)
        self._name: str = method.__name__

    def __call__(self) -> Callable[[], bool | None] | None:
        owner = self._owner()
        return None if owner is None else getattr(owner, self._name)


@mypyc_attr(native_class=False)  # registered with ``_fork`` by weak reference: a native class has none
class Ticker:
    """``tick`` (a bound method, held weakly) must not raise (what it calls is contained); if it does anyway, the
    thread goes on. It returns False when nothing is left to watch (None or True: keep ticking)."""

    def __init__(
        self,
        period: float,
        tick: Callable[[], bool | None],
        *,
        name: str = "toolcall-eval-timer",
        wait: Callable[[threading.Event, float | None], bool] | None = None,
    ) -> None:
        self.period = period
        # the callback wakes a parked thread once the owner is gone, so that it ends
        self._tick = _WeakBound(tick, self._owner_gone)
        self._name = name
        self._wait = wait or _wall_clock_wait
        self._init_state()
        _fork.reinit_after_fork(self)

    def _init_state(self) -> None:
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._stopped = False
        self._poke = threading.Event()  # wakes a parked thread (``ensure_started``, ``stop``)
        self._parked = False  # True from the first empty tick until the thread is poked
        # the thread runs and has not published ``_parked``: ``ensure_started`` would do nothing, so an owner's hot
        # path reads this instead of calling it. Only the thread sets it, True while ``_parked`` is False (which
        # only the thread makes True, after clearing this): never True when a poke is due.
        self.awake = False

    def _after_fork_in_child(self) -> None:
        stopped = self._stopped
        self._init_state()
        self._stopped = stopped  # a processor shut down before the fork stays so in the child

    @property
    def running(self) -> bool:
        thread = self._thread
        return thread is not None and thread.is_alive()

    def ensure_started(self) -> None:
        """Start the thread if it is not running, wake it if it is parked (once stopped, never again). Cheap when
        it runs."""
        if self._parked:
            self._parked = False
            self._poke.set()
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
        self._poke.set()
        if thread is None or thread is threading.current_thread():
            return True
        thread.join(max(0.0, timeout_seconds))
        return not thread.is_alive()

    def _owner_gone(self, _: object) -> None:
        """Run by the garbage collector once the owner is collected: wakes a parked thread, which then ends. (A
        collection on the timer thread inside ``_poke``'s own lock would block here; only that orphaned thread,
        which nothing else waits for, would stay parked: what it would do without this callback.)"""
        self._poke.set()

    def _run(self) -> None:
        park = False
        self.awake = True
        while True:
            if park:  # until the next held span or session turn, or stop: no wake-up meanwhile
                self._wait(self._poke, None)
                self._parked = park = False
                self.awake = True
                if self._stopped or self._tick() is None:  # stopped, or the owner is gone (``_owner_gone``)
                    return
                continue  # what woke it was just held or opened: its first tick is a period away
            if self._wait(self._stop, self.period):
                return
            tick = self._tick()
            if tick is None:  # the owner is gone
                return
            try:
                busy = tick()
            except Exception:  # noqa: BLE001 - the tick contains its own failures; the timer outlives one
                busy = None
            finally:
                del tick
            if busy is not False:
                if not self._parked:
                    self.awake = True
                continue
            if self._parked:  # published by the previous tick and not poked since: nothing came, park
                park = True
            else:  # what is held or opened from now on finds this and pokes the thread (an older poke is spent)
                self._poke.clear()
                self.awake = False
                self._parked = True


def _wall_clock_wait(stop: threading.Event, seconds: float | None) -> bool:
    """Sleep ``seconds`` (None: no limit) or until ``stop`` is set; True when it was set."""
    return stop.wait(seconds)
