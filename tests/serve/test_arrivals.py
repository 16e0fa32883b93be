"""The service's arrival times (for ``toolcall_eval.serve.added_latency``) are bounded: a sender cannot grow them."""

from __future__ import annotations

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanContext

from otel_toolcall_eval.serve.pipeline import Arrivals


def span(n: int) -> ReadableSpan:
    return ReadableSpan(name=f"s{n}", context=SpanContext(trace_id=1, span_id=n, is_remote=False))


def test_past_the_bound_the_oldest_arrivals_are_forgotten() -> None:
    arrivals = Arrivals(3)
    arrivals.stamp([span(n) for n in range(1, 6)], now=10.0)
    assert len(arrivals) == 3
    assert arrivals.pop([span(1), span(2)]) == []  # the oldest two went
    assert arrivals.pop([span(3), span(5), span(9)]) == [10.0, 10.0]
    assert arrivals.pop([span(3)]) == [] and len(arrivals) == 1  # popped once only
