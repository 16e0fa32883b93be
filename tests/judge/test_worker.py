"""The judge's worker on its own: bounded queue, concurrency, flush, shutdown, a crashed session."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import Counter
from collections.abc import AsyncIterator, Iterator

import pytest

from otel_toolcall_eval.judge.worker import Worker


class Gate:
    """Items block in ``process`` until the test opens the gate; records what ran and how many at once."""

    def __init__(self) -> None:
        self.open = threading.Event()
        self.done: list[int] = []
        self.running = 0
        self.peak = 0
        self.started = threading.Semaphore(0)
        self.drops: Counter[str] = Counter()

    async def process(self, item: int, session: str) -> None:
        assert session == "session"
        self.running += 1
        self.peak = max(self.peak, self.running)
        self.started.release()
        try:
            while not self.open.is_set():
                await asyncio.sleep(0.005)
            self.done.append(item)
        finally:
            self.running -= 1

    def drop(self, reason: str, count: int) -> None:
        self.drops[reason] += count


@contextlib.asynccontextmanager
async def session() -> AsyncIterator[str]:
    yield "session"


@pytest.fixture
def gate() -> Iterator[Gate]:
    g = Gate()
    yield g
    g.open.set()


def make(gate: Gate, **kw: int) -> Worker[int, str]:
    return Worker(
        gate.process, session, concurrency=kw.get("concurrency", 2), queue_size=kw.get("queue", 3), on_drop=gate.drop
    )


def test_bounded_queue_drops_and_counts_overflow_and_flush_waits(gate: Gate) -> None:
    worker = make(gate)
    assert worker.submit(0) and worker.submit(1)
    assert gate.started.acquire(timeout=10) and gate.started.acquire(timeout=10)  # both slots busy
    accepted = [worker.submit(i) for i in range(2, 10)]
    assert accepted == [True, True, True] + [False] * 5  # three wait, the rest overflow
    assert gate.drops == {"queue_full": 5} and worker.queued == 3 and worker.unfinished == 5
    assert worker.force_flush(0.05) is False  # still running: flush times out, says so
    gate.open.set()
    assert worker.force_flush(10) is True
    assert sorted(gate.done) == [0, 1, 2, 3, 4] and gate.peak == 2
    assert worker.shutdown(5) == 0 and not worker.alive


def test_shutdown_drains_when_it_can_and_drops_the_rest_when_it_cannot(gate: Gate) -> None:
    draining = make(gate)
    for i in range(3):
        draining.submit(i)
    threading.Timer(0.1, gate.open.set).start()
    assert draining.shutdown(10) == 0 and sorted(gate.done) == [0, 1, 2]
    assert draining.submit(99) is False and gate.drops == {"shutdown": 1}  # closed: dropped, counted

    stuck = Gate()
    worker = make(stuck, concurrency=1)
    for i in range(3):
        worker.submit(i)
    assert stuck.started.acquire(timeout=10)
    assert worker.shutdown(0.1) == 3  # one cancelled mid-call, two never started
    assert stuck.drops == {"shutdown": 3} and stuck.done == []
    assert worker._thread is not None
    worker._thread.join(10)  # the cancellation completes on the worker's own thread, after the deadline
    assert not worker.alive and stuck.done == [] and stuck.drops == {"shutdown": 3}  # counted once
    assert worker.force_flush(1) is True  # nothing left to wait for


def test_a_session_that_fails_drops_the_queue_and_the_next_submit_starts_afresh(gate: Gate) -> None:
    attempts: list[int] = []

    @contextlib.asynccontextmanager
    async def flaky() -> AsyncIterator[str]:
        attempts.append(1)
        if len(attempts) == 1:
            raise OSError("cannot open the client")
        yield "session"

    worker: Worker[int, str] = Worker(gate.process, flaky, concurrency=1, queue_size=10, on_drop=gate.drop)
    worker.submit(1)
    assert worker.force_flush(10) is True  # the failed start released what it held
    assert gate.drops == {"worker_error": 1}
    gate.open.set()
    worker.submit(2)
    assert worker.force_flush(10) is True and gate.done == [2] and len(attempts) == 2
    worker.shutdown(5)


def test_the_periodic_tick_runs_in_the_worker_thread(gate: Gate) -> None:
    ticks: list[str] = []
    ticked = threading.Event()

    def tick() -> None:
        ticks.append(threading.current_thread().name)
        ticked.set()

    worker: Worker[int, str] = Worker(
        gate.process, session, concurrency=1, queue_size=1, on_drop=gate.drop, tick=tick, interval=0.01
    )
    gate.open.set()
    worker.submit(1)
    assert ticked.wait(10)
    worker.shutdown(5)
    assert set(ticks) == {"toolcall-eval-judge"}
