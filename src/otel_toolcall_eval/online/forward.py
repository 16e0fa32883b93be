"""The last stage: hand a span (scored or as it came) to the downstream processors, each call contained.

What the SDK's ``SynchronousMultiSpanProcessor`` does for a provider's processors: one failing processor does not
stop the others. With one downstream processor (the usual case) the pipeline calls its ``on_end`` itself, without a
move into this module (``Pipeline._forward_only``).
"""

from __future__ import annotations

from collections.abc import Callable

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

from otel_toolcall_eval import _sdk
from otel_toolcall_eval._deadline import Deadline
from otel_toolcall_eval.online.contain import RateLimitedLog


class FanOut:
    """The downstream processors. Hooks a processor inherits as the SDK's no-ops are not called (the hot path)."""

    __slots__ = ("_log", "ending_hook", "on_ending_to", "on_start_to", "processors", "start_hook")

    def __init__(self, processors: tuple[SpanProcessor, ...], log: RateLimitedLog) -> None:
        self.processors = processors
        self._log = log
        self.on_start_to = tuple(p for p in processors if _sdk.wants_on_start(p))
        self.on_ending_to = tuple(p for p in processors if _sdk.wants_on_ending(p))
        # what the face binds the SDK's ``on_start`` and ``_on_ending`` to (called for every span): these, or, when
        # no downstream processor overrides the SDK's no-op (a ``BatchSpanProcessor``), that no-op itself (what the
        # SDK would call without the processor: one frame, no loop)
        first = processors[0]
        self.start_hook: Callable[..., None] = self.on_start if self.on_start_to else first.on_start
        self.ending_hook: Callable[[Span], None] = self.on_ending if self.on_ending_to else _sdk.own_on_ending(first)

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        for p in self.on_start_to:
            try:
                p.on_start(span, parent_context=parent_context)
            except Exception:  # noqa: BLE001
                self._log.error("downstream.on_start", "downstream on_start failed")

    def on_ending(self, span: Span) -> None:
        for p in self.on_ending_to:
            try:
                _sdk.on_ending(p, span)
            except Exception:  # noqa: BLE001
                self._log.error("downstream._on_ending", "downstream _on_ending failed")

    def forward(self, span: ReadableSpan) -> None:
        """Every span leaves the online side through here, exactly once (or through ``Pipeline._forward_only``)."""
        for p in self.processors:
            try:
                p.on_end(span)
            except Exception:  # noqa: BLE001
                self._log.error("downstream.on_end", "downstream on_end failed")

    def force_flush(self, deadline: Deadline) -> bool:
        ok = True
        for p in self.processors:
            try:
                ok = bool(p.force_flush(deadline.remaining_millis())) and ok
            except Exception:  # noqa: BLE001
                self._log.error("downstream.force_flush", "downstream force_flush failed")
                ok = False
        return ok

    def shutdown(self) -> None:
        """The SDK's ``SpanProcessor.shutdown()`` takes no timeout: each processor bounds its own."""
        for p in self.processors:
            try:
                p.shutdown()
            except Exception:  # noqa: BLE001
                self._log.error("downstream.shutdown", "downstream shutdown failed")
