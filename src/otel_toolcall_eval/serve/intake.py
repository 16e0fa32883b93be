"""What both receivers share: the token check, admission into the queue, readiness, and requests in progress.

Kept apart from the transports so that gRPC and HTTP answer the same way: a full queue is ``FULL`` (HTTP 429,
gRPC UNAVAILABLE), a service shutting down is ``CLOSING`` (HTTP 503, gRPC UNAVAILABLE), requests in flight
holding all of ``serve.max_inflight_bytes`` is ``BUSY`` (HTTP 503, gRPC UNAVAILABLE), all with a retry delay.
"""

from __future__ import annotations

import enum
import hmac
import threading
import time

from opentelemetry.sdk.trace import ReadableSpan

from otel_toolcall_eval.serve.decode import BadPayload, Limits
from otel_toolcall_eval.serve.metrics import RECEIVED, REJECTED_REQUESTS, REJECTED_SPANS, ServeMetrics
from otel_toolcall_eval.serve.pipeline import Arrivals, ByteBudget, Reservation, SpanQueue, weigh


class Admission(enum.Enum):
    ACCEPTED = "accepted"
    FULL = "queue_full"
    CLOSING = "shutting_down"
    BUSY = "memory_busy"  # the requests in flight hold serve.max_inflight_bytes


class Intake:
    def __init__(
        self,
        queue: SpanQueue,
        metrics: ServeMetrics,
        token: str | None,
        retry_after: int,
        max_bytes: int,
        arrivals: Arrivals | None = None,
        *,
        held: ByteBudget | None = None,
        inflight: ByteBudget | None = None,
        limits: Limits | None = None,
    ) -> None:
        self.queue = queue
        self.arrivals = arrivals
        self.metrics = metrics
        self.retry_after = retry_after
        self.max_bytes = max_bytes
        self.held = held or ByteBudget(1 << 62)  # spans accepted and not yet exported, in encoded bytes
        self.inflight = inflight or ByteBudget(1 << 62)  # requests being read and decoded, in estimated bytes
        self.limits = limits or Limits()
        self._expected = None if token is None else token.encode()
        self._cond = threading.Condition()
        self._active = 0
        self.closing = False

    def authorized(self, header: str | None) -> bool:
        if self._expected is None:
            return True
        scheme, _, given = (header or "").strip().partition(" ")
        # the scheme is case-insensitive (RFC 9110 11.1); the token compared in constant time
        ok = hmac.compare_digest(given.strip().encode("utf-8", "replace"), self._expected)
        return ok and scheme.lower() == "bearer"

    def admit(self, spans: list[ReadableSpan], protocol: str, invalid: int = 0, nbytes: int = 0) -> Admission:
        """``invalid``: spans of the request refused as invalid (OTLP partial success), counted once it is taken;
        ``nbytes``: the request's encoded size, held against ``serve.max_queue_bytes`` until its spans are exported."""
        if self.closing:
            outcome = Admission.CLOSING
        elif not spans or self._offer(spans, nbytes):
            self.metrics.add(RECEIVED, len(spans), protocol)
            if invalid:
                self.metrics.add(REJECTED_SPANS, invalid, "invalid")
            return Admission.ACCEPTED
        else:
            outcome = Admission.CLOSING if self.queue.closed else Admission.FULL
        self.metrics.add(REJECTED_SPANS, len(spans), outcome.value)
        self.reject(outcome.value)
        return outcome

    def _offer(self, spans: list[ReadableSpan], nbytes: int) -> bool:
        if not self.held.take(nbytes):
            return False
        weigh(spans, nbytes)
        # stamped first: once queued, the scoring thread may export a span before ``offer`` returns
        now = time.monotonic()
        if self.arrivals is not None:
            self.arrivals.stamp(spans, now)
        if self.queue.offer(spans):
            return True
        self.held.give(nbytes)
        if self.arrivals is not None:
            self.arrivals.pop(spans)
        return False

    def reserve(self, reservation: Reservation, total: int) -> bool:
        """Hold ``total`` bytes of ``serve.max_inflight_bytes`` for a request; ``False`` when the requests in flight
        leave no room now (retryable). A request that alone would need more can never be taken: ``BadPayload``
        (413 / INVALID_ARGUMENT, not retried), so the bound holds for every request, the largest included."""
        limit = self.inflight.limit
        if total > limit:
            raise BadPayload(
                f"reading and decoding this request would take ~{total:,} bytes; at most {limit:,} "
                "(serve.max_inflight_bytes): send smaller batches",
                413,
            )
        return reservation.grow_to(total)

    def busy(self) -> Admission:
        """A request refused because the requests in flight hold ``serve.max_inflight_bytes`` (retryable)."""
        self.reject(Admission.BUSY.value)
        return Admission.BUSY

    def reject(self, reason: str) -> None:
        self.metrics.add(REJECTED_REQUESTS, 1, reason)

    def ready(self) -> bool:
        """Ready to take traffic: not shutting down, the queue not full in spans nor in bytes."""
        held = self.held
        return not self.closing and len(self.queue) < self.queue.max_spans and held.used < held.limit

    # --- requests in progress: shutdown waits for them before it closes the queue -------------------------
    def begin(self) -> None:
        with self._cond:
            self._active += 1

    def end(self) -> None:
        with self._cond:
            self._active -= 1
            self._cond.notify_all()

    def wait_idle(self, deadline: float) -> bool:
        with self._cond:
            while self._active:
                timeout = deadline - time.monotonic()
                if timeout <= 0:
                    return False
                self._cond.wait(timeout)
            return True
