"""``ToolCallEvalSpanExporter``: the processor's scoring in the shape of a ``SpanExporter`` that wraps yours.

Pick the processor (``ToolCallEvalProcessor``) when you build the exporting span processor yourself: it scores as
spans end, before the batch, and is what ``opentelemetry-instrument`` gets (docs/zero-code.md). Pick this exporter
when something else owns the span processor that exports and only lets you hand it an exporter (Langfuse's client,
Traceloop's ``init(exporter=...)``): wrapping its exporter scores each batch on the exporting thread and sends the
scored copies on, every span once. The scores are the same: the processor runs inside, inline, in the order the
spans arrive in the batches (a batch processor exports in end order, as the processor sees them otherwise).

A failed tool span that the processor holds until its recovery class is known (``limits.max_held_spans``) goes out
with a later batch, or at ``force_flush`` / ``shutdown``.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from otel_toolcall_eval.config import EvalConfig
from otel_toolcall_eval.processor import ToolCallEvalProcessor


class _Collect(SpanProcessor):
    """What the processor forwards, kept until the exporter sends it."""

    def __init__(self) -> None:
        self._spans: list[ReadableSpan] = []
        self._lock = threading.Lock()

    def on_end(self, span: ReadableSpan) -> None:
        with self._lock:
            self._spans.append(span)

    def take(self) -> list[ReadableSpan]:
        with self._lock:
            spans, self._spans = self._spans, []
        return spans


class ToolCallEvalSpanExporter(SpanExporter):
    """Scores the spans of each batch and exports the scored copies through ``exporter``.

    Args:
        exporter: the exporter that sends (an ``OTLPSpanExporter``, the owner's own).
        config: as for ``ToolCallEvalProcessor``; scoring runs inline here (the exporting thread is not the
            application's), whatever ``evaluation.mode`` says.
        **processor_options: the processor's keyword arguments (``meter_provider``, ``judge``, ...).
    """

    def __init__(self, exporter: SpanExporter, config: EvalConfig | None = None, **processor_options: Any) -> None:
        config = config or EvalConfig()
        config = config.model_copy(update={"evaluation": config.evaluation.model_copy(update={"mode": "inline"})})
        self.exporter = exporter
        self._collect = _Collect()
        self.processor = ToolCallEvalProcessor(self._collect, config, **processor_options)
        self._lock = threading.Lock()  # one batch scored at a time: the processor's trace state sees them in order

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        with self._lock:
            for span in spans:
                self.processor.on_end(span)  # never raises: an unscorable span is forwarded as it is
            return self._send()

    def _send(self) -> SpanExportResult:
        scored = self._collect.take()
        return self.exporter.export(scored) if scored else SpanExportResult.SUCCESS

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        with self._lock:
            flushed = self.processor.force_flush(timeout_millis)
            sent = self._send() is SpanExportResult.SUCCESS
        return flushed and sent and self.exporter.force_flush(timeout_millis)

    def shutdown(self) -> None:
        with self._lock:
            self.processor.shutdown()  # releases what it holds (to the collector), then stops its threads
            self._send()
        self.exporter.shutdown()
