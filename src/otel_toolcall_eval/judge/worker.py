"""The judge's background worker: its own thread and asyncio event loop, a bounded queue, bounded concurrency.

``submit`` is called on the application thread and never blocks: a ``deque`` append (atomic in CPython), a
length check for the bound (overflow is dropped and counted) and, only when the loop is parked, one
``call_soon_threadsafe`` to wake it. ``force_flush`` waits for every submitted item to finish; ``shutdown``
drains until its deadline, then counts what is left as dropped and returns: it never waits past the deadline,
also when an item keeps the worker's loop busy (the cancellation then completes on the daemon thread).

After ``os.fork`` the child has no worker thread and must not judge its parent's queue: the project's at-fork
registry (``otel_toolcall_eval._fork``) gives every worker in the child fresh state and locks, and the thread
starts again on the child's first submit.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Generic, TypeVar

from otel_toolcall_eval import _fork

logger = logging.getLogger("otel_toolcall_eval.judge")

T = TypeVar("T")
S = TypeVar("S")


class Worker(Generic[T, S]):
    """Runs ``process(item, session)`` for submitted items, at most ``concurrency`` at a time.

    ``session`` opens once per worker thread (e.g. an ``httpx.AsyncClient``) and is closed when it stops;
    ``tick`` runs every ``interval`` seconds in the worker thread (the sampler's rate update).
    """

    def __init__(
        self,
        process: Callable[[T, S], Awaitable[None]],
        session: Callable[[], contextlib.AbstractAsyncContextManager[S]],
        *,
        concurrency: int,
        queue_size: int,
        on_drop: Callable[[str, int], None],
        tick: Callable[[], None] = lambda: None,
        interval: float = 5.0,
        name: str = "toolcall-eval-judge",
    ) -> None:
        self._process = process
        self._session = session
        self._concurrency = concurrency
        self._queue_size = queue_size
        self._on_drop = on_drop
        self._tick = tick
        self._interval = interval
        self._name = name
        self._init_state()
        _fork.reinit_after_fork(self)

    def _init_state(self) -> None:
        self._queue: deque[T] = deque()
        self._submitted = 0  # both counters change under _cond; unfinished = submitted - finished
        self._finished = 0
        self._dropped_at_shutdown = 0
        self._cond = threading.Condition()
        self._start_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wakeup: asyncio.Event | None = None
        self._parked = False
        self._stopping = False  # drain, then stop
        self._abort = False  # stop now, drop what is left
        self._closed = False  # no more submits
        self._crash_logged = False

    def _after_fork_in_child(self) -> None:
        self._init_state()

    # --- application thread --------------------------------------------------------------------
    def submit(self, item: T) -> bool:
        """Queue an item without blocking; ``False`` (and a counted drop) when full or shut down."""
        if self._closed:
            self._on_drop("shutdown", 1)
            return False
        if len(self._queue) >= self._queue_size:
            self._on_drop("queue_full", 1)
            return False
        with self._cond:
            self._submitted += 1
        self._queue.append(item)
        if self._thread is None:
            self._start()
        elif self._parked:
            self._wake()
        return True

    @property
    def queued(self) -> int:
        return len(self._queue)

    @property
    def unfinished(self) -> int:
        return self._submitted - self._finished

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _wake(self) -> None:
        loop, event = self._loop, self._wakeup
        if loop is None or event is None:
            return  # the loop is starting; it reads the queue before it first parks
        self._parked = False
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
            loop.call_soon_threadsafe(event.set)

    def _start(self) -> None:
        with self._start_lock:
            if self._thread is not None or self._closed:
                return
            thread = threading.Thread(target=self._thread_main, name=self._name, daemon=True)
            self._thread = thread
            thread.start()

    # --- lifecycle -----------------------------------------------------------------------------
    def force_flush(self, timeout: float) -> bool:
        """Wait until every submitted item has been processed; ``False`` on timeout."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._submitted > self._finished:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(min(remaining, 0.5))
        return True

    def shutdown(self, timeout: float) -> int:
        """Stop accepting, drain for up to ``timeout`` seconds, then drop the rest; returns how many dropped.

        Every wait is bounded by one deadline: at the deadline what is unfinished is counted as dropped (here,
        so the count is final when this returns) and the worker is told to cancel it on its own thread."""
        timeout = max(0.0, timeout)
        deadline = time.monotonic() + timeout
        # the last part of the time is for cancelling what is left (asyncio cancellation takes milliseconds)
        drain_until = deadline - min(0.5, timeout / 4)
        self._closed = True
        thread = self._thread
        if thread is None:  # never started (nothing submitted, or a start raced with this shutdown)
            dropped = len(self._queue)
            self._queue.clear()
            self._on_drop("shutdown", dropped)
            self._done(dropped)
            return dropped
        self._stopping = True
        self._wake_always()
        thread.join(max(0.0, drain_until - time.monotonic()))
        if not thread.is_alive():
            return self._dropped_at_shutdown
        with self._cond:
            self._abort = True
            dropped = self._submitted - self._finished
            self._finished = self._submitted  # settled now: a flush waiting on them returns
            self._dropped_at_shutdown = dropped
            self._cond.notify_all()
        self._on_drop("shutdown", dropped)
        self._wake_always()
        thread.join(max(0.0, deadline - time.monotonic()))
        return dropped

    def _wake_always(self) -> None:
        loop, event = self._loop, self._wakeup
        if loop is not None and event is not None:
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(event.set)

    # --- worker thread -------------------------------------------------------------------------
    def _thread_main(self) -> None:
        loop = asyncio.new_event_loop()
        crashed = False
        try:
            loop.run_until_complete(self._main(loop))
        except Exception:  # the worker must not die silently
            crashed = True
            if not self._crash_logged:
                self._crash_logged = True
                logger.exception("toolcall-eval judge worker stopped unexpectedly; queued calls are dropped")
        finally:
            with contextlib.suppress(Exception):
                loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()
            self._loop = None
            if crashed:  # drop what it held and let the next submit start a fresh thread
                left = len(self._queue)
                self._queue.clear()
                self._on_drop("worker_error", left)
                with self._cond:
                    self._finished = self._submitted
                self._thread = None
            with self._cond:
                self._cond.notify_all()

    async def _main(self, loop: asyncio.AbstractEventLoop) -> None:
        self._wakeup = asyncio.Event()
        self._loop = loop
        async with self._opened() as session:
            await self._run(session)

    @contextlib.asynccontextmanager
    async def _opened(self) -> AsyncIterator[S]:
        async with self._session() as session:
            yield session

    async def _run(self, session: S) -> None:
        assert self._wakeup is not None
        wakeup = self._wakeup
        tasks: set[asyncio.Task[None]] = set()
        next_tick = time.monotonic() + self._interval
        while True:
            while self._queue and len(tasks) < self._concurrency and not self._abort:
                task = asyncio.get_running_loop().create_task(self._one(self._queue.popleft(), session))
                tasks.add(task)
                task.add_done_callback(functools.partial(_finished, tasks, wakeup))
            if self._abort:
                await self._cancel(tasks)
                return
            if self._stopping and not self._queue and not tasks:
                return
            now = time.monotonic()
            if now >= next_tick:
                self._safe_tick()
                next_tick = now + self._interval
            self._parked = True
            if self._queue and len(tasks) < self._concurrency:  # raced with a submit: do not sleep
                self._parked = False
                continue
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(wakeup.wait(), timeout=max(0.0, next_tick - time.monotonic()))
            wakeup.clear()
            self._parked = False

    async def _one(self, item: T, session: S) -> None:
        try:
            await self._process(item, session)
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.warning("toolcall-eval judge: processing an item failed", exc_info=True)
        finally:
            self._done(1)

    async def _cancel(self, tasks: set[asyncio.Task[None]]) -> None:
        """After the shutdown deadline: what is left was counted as dropped by ``shutdown`` already."""
        self._queue.clear()
        running = [t for t in tasks if not t.done()]
        for t in running:
            t.cancel()
        await asyncio.gather(*running, return_exceptions=True)

    def _done(self, count: int) -> None:
        with self._cond:
            if not self._abort:  # once aborted, ``shutdown`` settled every unfinished item
                self._finished += count
            self._cond.notify_all()

    def _safe_tick(self) -> None:
        try:
            self._tick()
        except Exception:
            logger.warning("toolcall-eval judge: the periodic update failed", exc_info=True)


def _finished(tasks: set[asyncio.Task[None]], wakeup: asyncio.Event, task: asyncio.Task[None]) -> None:
    """A task is done: free its slot and wake the loop to start the next item."""
    tasks.discard(task)
    wakeup.set()
