"""The service's own metrics, through the processor's MeterProvider: what came in, what was scored and exported,
what was refused and why, and how full the queue is.

Counters are observable over in-process tallies (as in ``otel_toolcall_eval.online.metrics``): the receiving threads
only bump a dict entry under a lock, and the SDK reads the totals when its reader collects. ``snapshot`` gives
the same totals to tests and to the shutdown summary.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Final

from opentelemetry import metrics as metrics_api
from opentelemetry.metrics import CallbackOptions, MeterProvider, Observation

from otel_toolcall_eval._version import __version__

RECEIVED: Final = "toolcall_eval.serve.spans.received"
SCORED: Final = "toolcall_eval.serve.spans.scored"
EXPORTED: Final = "toolcall_eval.serve.spans.exported"
REJECTED_SPANS: Final = "toolcall_eval.serve.spans.rejected"
REJECTED_REQUESTS: Final = "toolcall_eval.serve.requests.rejected"
QUEUE_SIZE: Final = "toolcall_eval.serve.queue.size"
ADDED_LATENCY: Final = "toolcall_eval.serve.added_latency"
# Seconds, the SDK's default histogram boundaries being milliseconds-sized: the service adds milliseconds
# normally, seconds when a slow next hop backs the export queue up.
LATENCY_BUCKETS: Final = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)

# why these carry no source (the metrics reference says it): they count requests and spans as they arrive and
# leave, before a span is read or its trace has a source; the scores' metrics split by source
NOT_BY_SOURCE: Final = (
    "transport: requests and spans as they arrive and leave, counted before a span is read (a refused request "
    "is never decoded) or its trace has a source; the scoring metrics split by source"
)

# name -> (label key, unit, description); the label's values are fixed strings chosen by the service
_COUNTERS: Final = {
    RECEIVED: ("protocol", "{span}", "spans accepted into the scoring queue, by receiver (grpc, http)"),
    SCORED: ("", "{span}", "spans run through the processor"),
    EXPORTED: (
        "result",
        "{span}",
        "spans handed to the next hop, by result (ok, failed, timed_out: no answer within the export timeout)",
    ),
    REJECTED_SPANS: ("reason", "{span}", "spans refused: retryable (queue_full, shutting_down) or invalid"),
    REJECTED_REQUESTS: ("reason", "{request}", "requests refused, by reason (bad_payload, too_large, queue_full ...)"),
}


class ServeMetrics:
    def __init__(self, meter_provider: MeterProvider | None = None, queue_size: Callable[[], int] = lambda: 0) -> None:
        self._lock = threading.Lock()
        self._tallies: dict[tuple[str, str], int] = {}
        meter = (meter_provider or metrics_api.get_meter_provider()).get_meter("otel_toolcall_eval.serve", __version__)
        for name, (label, unit, description) in _COUNTERS.items():
            meter.create_observable_counter(name, [self._observer(name, label)], unit=unit, description=description)
        self._queue_size = queue_size
        meter.create_observable_gauge(
            QUEUE_SIZE, [self._observe_queue], unit="{span}", description="received spans waiting to be scored"
        )
        self._latency = meter.create_histogram(
            ADDED_LATENCY,
            unit="s",
            description="per span, from its request's arrival to the next hop's answer to its export",
            explicit_bucket_boundaries_advisory=list(LATENCY_BUCKETS),
        )

    def latency(self, seconds: float) -> None:
        self._latency.record(seconds)

    def add(self, name: str, amount: int, value: str = "") -> None:
        with self._lock:
            key = (name, value)
            self._tallies[key] = self._tallies.get(key, 0) + amount

    def total(self, name: str, value: str | None = None) -> int:
        """The tally of ``name`` (for one label value, or summed over all)."""
        with self._lock:
            return sum(n for (k, v), n in self._tallies.items() if k == name and (value is None or v == value))

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return {f"{k}{'{' + v + '}' if v else ''}": n for (k, v), n in sorted(self._tallies.items())}

    def _observer(self, name: str, label: str) -> Callable[[CallbackOptions], Iterable[Observation]]:
        def observe(options: CallbackOptions) -> Iterable[Observation]:
            with self._lock:
                items = [(v, n) for (k, v), n in self._tallies.items() if k == name]
            return [Observation(n, {label: v} if label else {}) for v, n in items]

        return observe

    def _observe_queue(self, options: CallbackOptions) -> Iterable[Observation]:
        return [Observation(self._queue_size())]
