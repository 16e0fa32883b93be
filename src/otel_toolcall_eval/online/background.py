"""The background evaluation queue: ``on_end`` appends the span, one worker thread scores and forwards it.

Modelled on the SDK's ``BatchSpanProcessor`` worker: a ``deque`` the application thread appends to without a
lock, an ``Event`` that wakes the worker only when enough spans wait (or after ``max_delay``), so the
application thread pays an append and a length check per span. Unlike a batch exporter it never drops: a full
queue makes ``on_end`` wait for room (back-pressure, counted), so every span is scored and forwarded.

An idle worker costs nothing: after a whole ``max_delay`` in which no span arrived it parks (a wait without a
timeout) instead of waking every ``max_delay`` for ever, and the first span queued after that wakes it (one
``Event.set`` on the application thread per idle period, not per span). While spans flow it keeps the timed
wait, so a span still waits at most ``max_delay``.

One worker keeps the order spans ended in, which the trace state relies on (a chat span's tool definitions
before the tool calls it caused, the root last).
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable
from typing import Any

from mypy_extensions import mypyc_attr
from opentelemetry.sdk.trace import ReadableSpan

from otel_toolcall_eval import _fork


class _Marker:
    """Put in the queue by ``flush``: set once every span queued before it has been processed."""

    __slots__ = ("done",)

    def __init__(self) -> None:
        self.done = threading.Event()


@mypyc_attr(native_class=False)
class BackgroundQueue:
    """Bounded FIFO of ended spans processed by one daemon thread (started on first use, restarted after fork).

    ``process`` must not raise (the processor contains evaluation and forwarding failures); if it does anyway,
    the worker goes on with the next span rather than dying with the queue full.
    """

    def __init__(
        self,
        process: Callable[[ReadableSpan], None],
        *,
        max_size: int,
        max_delay_seconds: float,
        on_wait: Callable[[], None] | None = None,
        name: str = "toolcall-eval",
        wait: Callable[[threading.Event, float | None], bool] | None = None,
    ) -> None:
        self._process = process
        self._max = max_size
        self._delay = max_delay_seconds
        self._on_wait = on_wait
        self._name = name
        # how the worker waits for its event (None: until set); a test counts the wake-ups through it
        self._wait = wait or _event_wait
        # wake the worker once this many spans wait: batches amortise the wake-up, well before the queue is full
        self._wake_at = max(1, min(512, max_size // 4))
        # a waiting on_end resumes once a batch fits again, not at the first free slot (no hand-off per span)
        self._resume_at = max_size - self._wake_at
        self._queue: collections.deque[Any] = collections.deque()
        self._wake = threading.Event()
        self._room = threading.Condition(threading.Lock())
        self._waiters = 0
        self._start_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._worker_ident: int | None = None
        self._stopped = False
        # True while the worker is parked without a timeout: the next ``submit`` must wake it
        self._idle = False
        _fork.reinit_after_fork(self)

    def __len__(self) -> int:
        return len(self._queue)

    def submit(self, span: ReadableSpan) -> bool:
        """Queue ``span``; False when the queue is stopped (the caller then processes it itself). Raises only
        before the span is queued (a worker that cannot start: the caller processes it); once queued it is the
        queue's, whatever fails after (True): the worker, a flush or shutdown processes it, exactly once."""
        if (self._stopped or self._thread is None) and not self._start():
            return False
        queue = self._queue
        queue.append(span)
        try:  # a try costs nothing until it catches (3.11): no frame of its own on the application thread
            if self._stopped:  # raced with shutdown, which may have drained the queue already: exactly one of this
                try:  # removal and the drain's popleft succeeds (both atomic), so the span is processed exactly once
                    queue.remove(span)
                except ValueError:
                    return True  # the worker or the drain took it
                return False
            if self._idle:  # the worker is parked (no span for a whole max_delay): wake it, once per idle period
                self._idle = False
                self._wake.set()
            size = len(queue)
            if size >= self._wake_at:
                self._wake.set()
                # the worker itself ends spans too (a downstream exporter that is instrumented, judge verdicts): it
                # must never wait for itself; what it adds is processed next, a few spans past the bound
                if size > self._max and threading.get_ident() != self._worker_ident:
                    self._wait_for_room()
        except Exception:  # noqa: BLE001 - e.g. no thread can start at interpreter exit: shutdown drains the queue
            pass
        return True

    def flush(self, timeout_seconds: float) -> bool:
        """Wait until every span queued so far has been processed (the worker forwarded it)."""
        if self._thread is None:  # never started: nothing was queued
            return not self._queue
        if not self._alive() and not self._start():  # a worker that died is replaced; once stopped, none runs
            return not self._queue
        if threading.get_ident() == self._worker_ident:  # a flush from inside the worker cannot wait for itself
            return False
        marker = _Marker()
        self._queue.append(marker)
        self._wake.set()
        return marker.done.wait(timeout_seconds)

    def shutdown(self, timeout_seconds: float = 30.0) -> bool:
        """Process what is queued, then stop the worker; later ``submit`` calls return False."""
        with self._start_lock:
            self._stopped = True
        thread = self._thread
        if thread is None:
            return True
        self._wake.set()
        thread.join(timeout_seconds)
        if thread.is_alive():
            return False
        while True:  # appended by a thread that raced the stop: still processed, here
            try:
                item = self._queue.popleft()
            except IndexError:  # empty (a racing ``submit`` may take its span back: see there)
                break
            if type(item) is _Marker:
                item.done.set()
            else:
                self._process(item)
        return True

    # --- internals -------------------------------------------------------------------------------
    def _start(self) -> bool:
        """Start the worker, or start it again if it died (checked on the slow paths only: a full queue, a
        flush); False once stopped."""
        with self._start_lock:
            if self._stopped:
                return False
            if self._thread is None or not self._thread.is_alive():
                thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                thread.start()
                self._thread = thread
            return True

    def _wait_for_room(self) -> None:
        if self._on_wait is not None:
            self._on_wait()
        if not self._alive() and not self._start():
            return  # stopped: shutdown processes what is left
        with self._room:
            self._waiters += 1
            try:
                while len(self._queue) > self._resume_at and self._alive():
                    self._wake.set()
                    self._room.wait(0.05)
            finally:
                self._waiters -= 1

    def _alive(self) -> bool:
        thread = self._thread
        return thread is not None and thread.is_alive()

    def _run(self) -> None:
        self._worker_ident = threading.get_ident()
        self._idle = False
        queue = self._queue
        timeout: float | None = self._delay
        while True:
            woken = self._wait(self._wake, timeout)
            self._wake.clear()
            self._idle = False
            processed = bool(queue)
            while queue:
                try:
                    item = queue.popleft()
                except IndexError:  # a ``submit`` that raced shutdown took its span back
                    break
                if type(item) is _Marker:
                    item.done.set()
                    continue
                try:
                    self._process(item)
                except Exception:  # noqa: BLE001 - process() is expected to contain its own failures
                    continue
                if self._waiters and len(queue) <= self._resume_at:
                    with self._room:
                        self._room.notify_all()
            if self._stopped and not queue:
                with self._room:
                    self._room.notify_all()
                return
            timeout = self._delay
            if woken or processed:
                continue
            # a whole max_delay without a span: park until a submit, a flush or shutdown sets the event. Idle is
            # published before the queue is looked at again, so a span appended after this look finds it set
            # (and wakes the worker) and one appended before it is seen here
            self._idle = True
            if queue or self._stopped:
                self._idle = False
            else:
                timeout = None

    def _after_fork_in_child(self) -> None:
        """In a forked child the worker thread does not exist: start afresh (queued spans belong to the parent)."""
        self._queue = collections.deque()
        self._wake = threading.Event()
        self._room = threading.Condition(threading.Lock())
        self._waiters = 0
        self._start_lock = threading.Lock()
        self._thread = None
        self._worker_ident = None
        self._idle = False


def _event_wait(event: threading.Event, timeout: float | None) -> bool:
    """Wait until ``event`` is set or ``timeout`` seconds passed (None: no limit); True when it was set."""
    return event.wait(timeout)
