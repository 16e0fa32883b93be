"""The last stage on its own (``online/forward.py``): every span to every downstream processor, each contained."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor

from otel_toolcall_eval._deadline import Deadline
from otel_toolcall_eval.online.contain import RateLimitedLog
from otel_toolcall_eval.online.forward import FanOut
from tests.helpers import Recorder


class _Broken(SpanProcessor):
    def on_end(self, span: ReadableSpan) -> None:
        raise RuntimeError("exporter down")

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        raise RuntimeError("exporter down")

    def shutdown(self) -> None:
        raise RuntimeError("exporter down")


@pytest.mark.parametrize("downstream", [1, 3])
def test_forward_hands_the_span_to_each_downstream_processor_once(downstream: int) -> None:
    recorders = tuple(Recorder() for _ in range(downstream))
    fan = FanOut(recorders, RateLimitedLog())
    span = ReadableSpan(name="s")
    fan.forward(span)
    assert [r.ended for r in recorders] == [[span]] * downstream


def test_one_failing_processor_costs_the_others_nothing_and_nothing_raises() -> None:
    first, last = Recorder(), Recorder()
    fan = FanOut((first, _Broken(), last), RateLimitedLog())
    span = ReadableSpan(name="s")
    fan.forward(span)
    assert first.ended == [span] and last.ended == [span]
    assert fan.force_flush(Deadline.after_millis(1000)) is False  # the broken one could not flush
    fan.shutdown()
    FanOut((_Broken(),), RateLimitedLog()).forward(span)  # the one-processor path is contained too


def test_the_sdk_no_op_hooks_are_not_called() -> None:
    """``on_start`` / ``_on_ending`` go only to processors that override the SDK's no-ops (the hot path)."""
    fan = FanOut((Recorder(), _Broken()), RateLimitedLog())
    assert len(fan.on_start_to) == 1 and len(fan.on_ending_to) == 1
