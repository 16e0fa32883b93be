"""What both receivers share: the token check, admission into the queue, readiness, and requests in progress.

Kept apart from the transports so that gRPC and HTTP answer the same way: a full queue is ``FULL`` (HTTP 429,
gRPC UNAVAILABLE), a service shutting down is ``CLOSING`` (HTTP 503, gRPC UNAVAILABLE), both with a retry delay.
"""

from __future__ import annotations

import enum
import hmac
import threading
import time

from opentelemetry.sdk.trace import ReadableSpan

from otel_toolcall_eval.serve.metrics import RECEIVED, REJECTED_REQUESTS, REJECTED_SPANS, ServeMetrics
from otel_toolcall_eval.serve.pipeline import Arrivals, SpanQueue


class Admission(enum.Enum):
    ACCEPTED = "accepted"
    FULL = "queue_full"
    CLOSING = "shutting_down"


class Intake:
    def __init__(
        self,
        queue: SpanQueue,
        metrics: ServeMetrics,
        token: str | None,
        retry_after: int,
        max_bytes: int,
        arrivals: Arrivals | None = None,
    ) -> None:
        self.queue = queue
        self.arrivals = arrivals
        self.metrics = metrics
        self.retry_after = retry_after
        self.max_bytes = max_bytes
        self._expected = None if token is None else f"Bearer {token}".encode()
        self._cond = threading.Condition()
        self._active = 0
        self.closing = False

    def authorized(self, header: str | None) -> bool:
        if self._expected is None:
            return True
        given = (header or "").strip().encode("utf-8", "replace")
        return hmac.compare_digest(given, self._expected)

    def admit(self, spans: list[ReadableSpan], protocol: str, invalid: int = 0) -> Admission:
        """``invalid``: spans of the request refused as invalid (OTLP partial success), counted once it is taken."""
        if self.closing:
            outcome = Admission.CLOSING
        elif not spans or self._offer(spans):
            self.metrics.add(RECEIVED, len(spans), protocol)
            if invalid:
                self.metrics.add(REJECTED_SPANS, invalid, "invalid")
            return Admission.ACCEPTED
        else:
            outcome = Admission.CLOSING if self.queue.closed else Admission.FULL
        self.metrics.add(REJECTED_SPANS, len(spans), outcome.value)
        self.reject(outcome.value)
        return outcome

    def _offer(self, spans: list[ReadableSpan]) -> bool:
        # stamped first: once queued, the scoring thread may export a span before ``offer`` returns
        now = time.monotonic()
        if self.arrivals is not None:
            self.arrivals.stamp(spans, now)
        if self.queue.offer(spans):
            return True
        if self.arrivals is not None:
            self.arrivals.pop(spans)
        return False

    def reject(self, reason: str) -> None:
        self.metrics.add(REJECTED_REQUESTS, 1, reason)

    def ready(self) -> bool:
        """Ready to take traffic: not shutting down and the queue not full."""
        return not self.closing and len(self.queue) < self.queue.max_spans

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
