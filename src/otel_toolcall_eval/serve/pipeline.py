"""Between the receivers and the next hop: a bounded queue of received batches, one scoring thread, the export.

The queue is counted in spans and takes a request whole or not at all, so a receiver can answer "retry" before
anything of the request was kept (never a partial, silent drop). The one worker feeds each batch to the
processor trace by trace in end order (``replay.engine.end_order``), as a live process ends them; the
processor's ``TraceStore`` keeps per-trace state across batches. The processor forwards to a
``BatchSpanProcessor``, which drops spans silently when its own queue is full: the worker therefore never hands
it more than its queue holds (``_ExportWindow`` counts spans handed over until the exporter reports them done),
so a slow next hop slows scoring, then fills this queue, then turns into retryable answers to the senders.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Sequence
from typing import Final

from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from otel_toolcall_eval._sdk import stash, stashed
from otel_toolcall_eval.replay.engine import end_order
from otel_toolcall_eval.serve.metrics import EXPORTED, SCORED, ServeMetrics

WEIGHT: Final = "_toolcall_eval_bytes"  # a received span's share of its request's encoded size (``ByteBudget``)
SpanKey = tuple[int, int]  # (trace id, span id): the scored copy the processor forwards keeps the context

logger = logging.getLogger("otel_toolcall_eval.serve")


class ByteBudget:
    """Bytes taken and given back, at most ``limit`` in use, except by a taker alone (so a request of the largest
    size ``max_message_bytes`` allows is taken when nothing else is held): ``peak`` is the most ever in use. The
    in-flight budget never needs that exception: a request whose estimate alone exceeds it is refused first
    (``Intake.reserve``).

    Two of them bound the service's memory: the requests in flight (``serve.max_inflight_bytes``: each reserves
    its estimated decoding cost, ``Reservation``), and the spans accepted and not yet exported
    (``serve.max_queue_bytes``: a request's encoded size, spread over its spans, ``weigh``, and given back as the
    exporter reports each span done, ``CountingExporter``), which covers the queue, the scoring, the spans the
    processor holds and the export queue at once, so a next hop that does not answer turns into retryable
    refusals before memory grows."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._lock = threading.Lock()
        self.used = 0
        self.peak = 0

    def take(self, n: int, mine: int = 0) -> bool:
        """``n`` more bytes for a taker already holding ``mine`` of them; ``False`` (nothing taken) when over."""
        with self._lock:
            if self.used > mine and self.used + n > self.limit:
                return False
            self.used += n
            self.peak = max(self.peak, self.used)
            return True

    def give(self, n: int) -> None:
        with self._lock:
            self.used = max(0, self.used - n)

    def reservation(self) -> Reservation:
        return Reservation(self)


class Reservation:
    """One request's share of a ``ByteBudget``, grown as its cost becomes known and given back by ``close``."""

    def __init__(self, budget: ByteBudget) -> None:
        self._budget = budget
        self.amount = 0

    def grow_to(self, total: int) -> bool:
        """Hold ``total`` bytes in all (never less than held already); ``False`` when the budget has no room."""
        extra = total - self.amount
        if extra <= 0:
            return True
        if not self._budget.take(extra, self.amount):
            return False
        self.amount = total
        return True

    def close(self) -> None:
        self._budget.give(self.amount)
        self.amount = 0


def weigh(spans: Sequence[ReadableSpan], nbytes: int) -> None:
    """Stash each span's share of ``nbytes`` (the processor's scored copy carries it to the exporter)."""
    if not spans:
        return
    share, rest = divmod(nbytes, len(spans))
    for n, span in enumerate(spans):
        stash(span, WEIGHT, share + (1 if n < rest else 0))


def weight(spans: Sequence[ReadableSpan]) -> int:
    """What ``weigh`` stashed on ``spans`` in all (0 for spans the service made itself)."""
    return sum(stashed(span, WEIGHT) or 0 for span in spans)


class SpanQueue:
    """Received batches waiting for the worker, at most ``max_spans`` spans (one larger batch when empty)."""

    def __init__(self, max_spans: int) -> None:
        self._max = max_spans
        self._cond = threading.Condition()
        self._batches: deque[list[ReadableSpan]] = deque()
        self._spans = 0
        self._closed = False

    def offer(self, spans: list[ReadableSpan]) -> bool:
        """Keep the whole batch, or nothing when it does not fit (the caller answers with a retryable code)."""
        with self._cond:
            if self._closed or (self._spans and self._spans + len(spans) > self._max):
                return False
            self._batches.append(spans)
            self._spans += len(spans)
            self._cond.notify()
            return True

    def take(self) -> list[ReadableSpan] | None:
        """The next batch; ``None`` once closed and empty."""
        with self._cond:
            while not self._batches:
                if self._closed:
                    return None
                self._cond.wait()
            batch = self._batches.popleft()
            self._spans -= len(batch)
            return batch

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    @property
    def max_spans(self) -> int:
        return self._max

    @property
    def closed(self) -> bool:
        return self._closed

    def __len__(self) -> int:
        return self._spans


class Arrivals:
    """When each accepted span arrived, until its export finishes: the service's added latency per span.

    Bounded in entries (the queue, the export queue and a margin for spans the processor holds): past the bound the
    oldest arrival is forgotten (a span lost or held that long is no latency sample worth the memory), so a sender
    cannot grow it."""

    def __init__(self, max_entries: int) -> None:
        self._max = max_entries
        self._lock = threading.Lock()
        self._times: OrderedDict[SpanKey, float] = OrderedDict()

    def stamp(self, spans: Sequence[ReadableSpan], now: float) -> None:
        with self._lock:
            times = self._times
            for span in spans:
                ctx = span.context
                if ctx is not None:
                    times[(ctx.trace_id, ctx.span_id)] = now
            while len(times) > self._max:
                times.popitem(last=False)

    def pop(self, spans: Sequence[ReadableSpan]) -> list[float]:
        with self._lock:
            times = self._times
            out = []
            for span in spans:
                ctx = span.context
                t = None if ctx is None else times.pop((ctx.trace_id, ctx.span_id), None)
                if t is not None:
                    out.append(t)
            return out

    def __len__(self) -> int:
        return len(self._times)


class _ExportWindow:
    """Spans handed to the BatchSpanProcessor and not yet reported by the exporter: at most ``limit``."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._cond = threading.Condition()
        self._open = 0

    def acquire(self, n: int, deadline: Callable[[], float | None]) -> bool:
        """Room for ``n`` more spans; ``False`` once ``deadline()`` (re-read: shutdown sets it) has passed."""
        with self._cond:
            while self._open and self._open + n > self.limit:
                until = deadline()
                timeout = 0.5 if until is None else min(0.5, until - time.monotonic())
                if timeout <= 0:
                    return False
                self._cond.wait(timeout)
            self._open += n
            return True

    def release(self, n: int) -> None:
        with self._cond:
            self._open = max(0, self._open - n)
            self._cond.notify_all()

    def idle(self, deadline: float) -> bool:
        with self._cond:
            while self._open:
                timeout = deadline - time.monotonic()
                if timeout <= 0:
                    return False
                self._cond.wait(timeout)
            return True


class Borrowed(SpanExporter):
    """An exporter shared by several ``BatchSpanProcessor``s (the scored spans', the judge's verdict spans'):
    their shutdowns leave it open, and its owner (``Service.stop``) shuts it down once, after both."""

    def __init__(self, inner: SpanExporter) -> None:
        self._inner = inner

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return self._inner.export(spans)

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self._inner.force_flush(timeout_millis)


class CountingExporter(SpanExporter):
    """The real exporter, counting results and closing the export window as batches finish."""

    def __init__(
        self,
        inner: SpanExporter,
        window: _ExportWindow,
        metrics: ServeMetrics,
        arrivals: Arrivals | None = None,
        held: ByteBudget | None = None,
        timeout: float | None = None,
    ) -> None:
        self._inner = inner
        self._window = window
        self._metrics = metrics
        self._arrivals = arrivals
        self._held = held
        # a failed export that took the exporter's whole timeout was not answered in time: the next hop may have
        # it (a late answer; OTLP is at-least-once), so it is counted apart from a refusal (``timed_out``)
        self._slow = None if timeout is None else timeout * 0.95

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        result = SpanExportResult.FAILURE
        started = time.monotonic()
        try:
            result = self._inner.export(spans)
        except Exception:
            logger.warning("export to the next hop raised", exc_info=True)
        finally:
            ok = result is SpanExportResult.SUCCESS
            late = not ok and self._slow is not None and time.monotonic() - started >= self._slow
            self._metrics.add(EXPORTED, len(spans), "ok" if ok else "timed_out" if late else "failed")
            if self._arrivals is not None:
                arrived = self._arrivals.pop(spans)
                if ok:
                    now = time.monotonic()
                    for t in arrived:
                        self._metrics.latency(now - t)
            if late:
                logger.warning("toolcall-eval serve: %d spans not acknowledged by the next hop in time", len(spans))
            elif not ok:
                logger.warning("toolcall-eval serve: %d spans not accepted by the next hop", len(spans))
            self._window.release(len(spans))
            if self._held is not None:
                self._held.give(weight(spans))
        return result

    def shutdown(self) -> None:
        self._inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self._inner.force_flush(timeout_millis)


class ScoringWorker:
    """The one thread that runs received batches through the processor."""

    def __init__(
        self,
        queue: SpanQueue,
        processor: SpanProcessor,
        window: _ExportWindow,
        metrics: ServeMetrics,
        chunk: int,
    ) -> None:
        self._queue = queue
        self._processor = processor
        self._window = window
        self._metrics = metrics
        self._chunk = max(1, min(chunk, window.limit))
        self._deadline: float | None = None
        self.lost = 0  # spans taken from the queue but not scored before the shutdown deadline
        self._thread = threading.Thread(target=self._run, name="toolcall-eval-serve-score", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def join(self, deadline: float) -> bool:
        """Wait for the queue to drain (``SpanQueue.close`` first); after ``deadline`` the rest is counted lost."""
        self._deadline = deadline
        self._thread.join(max(0.0, deadline - time.monotonic()))
        return not self._thread.is_alive()

    def _get_deadline(self) -> float | None:
        return self._deadline

    def _run(self) -> None:
        while (batch := self._queue.take()) is not None:
            try:
                self._score(batch)
            except Exception:
                self.lost += len(batch)
                logger.warning("toolcall-eval serve: scoring a batch failed", exc_info=True)

    def _score(self, batch: list[ReadableSpan]) -> None:
        """One batch, trace by trace in end order, in chunks the export window has room for."""
        ordered = [span for group in end_order(batch) for span in group]
        for start in range(0, len(ordered), self._chunk):
            chunk = ordered[start : start + self._chunk]
            if not self._window.acquire(len(chunk), self._get_deadline):
                self.lost += len(ordered) - start
                break
            on_end = self._processor.on_end  # never raises: the processor forwards every span exactly once
            for span in chunk:
                on_end(span)
            self._metrics.add(SCORED, len(chunk))
