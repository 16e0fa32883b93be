"""Replay: feed recorded spans to ``ToolCallEvalProcessor`` in the order a live process would have ended them.

Per trace, spans are sorted by end time (a parent after its children at equal times), so chat spans that
carry tool definitions arrive before the tool calls they caused and the root arrives last, exactly as online.
Scores already on the spans (from an earlier run) are dropped first, so replaying twice gives the same scores.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from opentelemetry.metrics import MeterProvider
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_toolcall_eval.attributes import PREFIX
from otel_toolcall_eval.config import EvalConfig
from otel_toolcall_eval.conventions import ConventionRegistry
from otel_toolcall_eval.processor import ToolCallEvalProcessor


@dataclass
class ReplayResult:
    spans: list[ReadableSpan]  # every input span, scored where it is a tool span or a root
    traces: int


def _unscored(span: ReadableSpan) -> ReadableSpan:
    attrs = span.attributes or {}
    if not any(k.startswith(PREFIX) for k in attrs):
        return span
    return ReadableSpan(
        name=span.name,
        context=span.context,
        parent=span.parent,
        resource=span.resource,
        attributes={k: v for k, v in attrs.items() if not k.startswith(PREFIX)},
        events=span.events,
        links=span.links,
        kind=span.kind,
        status=span.status,
        start_time=span.start_time,
        end_time=span.end_time,
        instrumentation_scope=span.instrumentation_scope,
    )


def end_order(spans: Iterable[ReadableSpan]) -> list[list[ReadableSpan]]:
    """Spans grouped per trace (traces in order of first start), each group in the order spans ended."""
    traces: dict[int, list[ReadableSpan]] = defaultdict(list)
    for span in spans:
        if span.context is not None:
            traces[span.context.trace_id].append(span)
    groups = []
    for group in sorted(traces.values(), key=lambda g: min(s.start_time or 0 for s in g)):
        parents = {s.parent.span_id for s in group if s.parent is not None}
        group.sort(key=lambda s: (s.end_time or 0, s.context.span_id in parents if s.context else False))
        groups.append(group)
    return groups


def replay_spans(
    spans: Iterable[ReadableSpan],
    config: EvalConfig | None = None,
    *,
    conventions: ConventionRegistry | None = None,
    downstream: Sequence[SpanProcessor] = (),
    meter_provider: MeterProvider | None = None,
) -> ReplayResult:
    """Score recorded spans with the online processor; ``downstream`` processors also receive them."""
    sink = InMemorySpanExporter()
    # No judge on replay: a backfill over old traces must not spend the live judge budget.
    processor = ToolCallEvalProcessor(
        [SimpleSpanProcessor(sink), *downstream],
        config,
        conventions=conventions,
        meter_provider=meter_provider,
        judge=False,
    )
    groups = end_order(_unscored(s) for s in spans)
    for group in groups:
        for span in group:
            processor.on_end(span)
    processor.force_flush()
    processor.shutdown()
    return ReplayResult(list(sink.get_finished_spans()), len(groups))
