"""Replay: feed recorded spans to ``ToolCallEvalProcessor`` in the order a live process would have ended them.

Per trace, spans are sorted by end time (a parent after its children at equal times), so chat spans that
carry tool definitions arrive before the tool calls they caused and the root arrives last, exactly as online.
Scores already on the spans (from an earlier run) are dropped first, so replaying twice gives the same scores.

Everything here runs once per span of a recording, next to the processor's own work, so it avoids per-span
Python frames where a C-level call does the same (``map``, a substring search, ``dict.__getitem__`` as a sort key),
and collects the output in a list instead of the SDK's export pipeline.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from opentelemetry.metrics import MeterProvider
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor

from otel_toolcall_eval import _sdk
from otel_toolcall_eval.attributes import PREFIX
from otel_toolcall_eval.config import EvalConfig
from otel_toolcall_eval.conventions import ConventionRegistry
from otel_toolcall_eval.conventions.base import plain_attributes
from otel_toolcall_eval.online.enrich import with_attributes
from otel_toolcall_eval.processor import ToolCallEvalProcessor

_SEP = "\x00"
_MARK = _SEP + PREFIX


@dataclass
class ReplayResult:
    spans: list[ReadableSpan]  # every input span, scored where it is a tool span or a root
    traces: int


class _Collect(SpanProcessor):
    """The replay's sink: keeps what ``SimpleSpanProcessor(InMemorySpanExporter())`` would (sampled spans, in
    order) without the export machinery it runs per span (context attach, a lock, a one-span export call)."""

    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []

    def on_end(self, span: ReadableSpan) -> None:
        context = span.context
        if context is not None and context.trace_flags.sampled:
            self.spans.append(span)


def _unscored(span: ReadableSpan) -> ReadableSpan:
    """The span without ``toolcall_eval.*`` attributes; the same object when it has none (the usual case)."""
    # The SDK's ReadableSpan holds a plain dict (or BoundedAttributes) here; its ``attributes`` property would wrap
    # it in a proxy first. Any other span type is read through the property, copied once in C.
    attrs: Any = _sdk.raw_attributes(span)
    if attrs is None:
        attrs = plain_attributes(span.attributes)
    # One C-level search over the joined keys instead of a ``startswith`` per key (a key holding NUL could match
    # falsely: the filter below then keeps every key, so the copy equals the span).
    if not attrs or _MARK not in _SEP + _SEP.join(attrs):
        return span
    return with_attributes(span, {k: v for k, v in attrs.items() if not k.startswith(PREFIX)})


def end_order(spans: Iterable[ReadableSpan]) -> list[list[ReadableSpan]]:
    """Spans grouped per trace (traces in order of first start), each group in the order spans ended."""
    traces: dict[int, list[ReadableSpan]] = {}
    first_start: dict[int, int] = {}
    for span in spans:
        context = span.context
        if context is None:
            continue
        trace_id = context.trace_id
        start = span.start_time or 0
        group = traces.get(trace_id)
        if group is None:
            traces[trace_id] = [span]
            first_start[trace_id] = start
        else:
            group.append(span)
            if start < first_start[trace_id]:
                first_start[trace_id] = start
    groups = [traces[t] for t in sorted(traces, key=first_start.__getitem__)]  # stable: ties keep first-seen order
    for group in groups:
        _sort_by_end(group)
    return groups


def _sort_by_end(group: list[ReadableSpan]) -> None:
    """Stable sort by end time; at equal times a span that is another's parent goes after the others."""
    ends = [s.end_time or 0 for s in group]
    if len(set(ends)) == len(ends):  # no equal end times (the usual case with nanosecond clocks): ends decide
        keys: list[Any] = ends
    else:
        parents = {s.parent.span_id for s in group if s.parent is not None}
        keys = [(end, s.context.span_id in parents) for end, s in zip(ends, group, strict=True)]
    order = sorted(range(len(group)), key=keys.__getitem__)
    group[:] = [group[i] for i in order]


def replay_spans(
    spans: Iterable[ReadableSpan],
    config: EvalConfig | None = None,
    *,
    conventions: ConventionRegistry | None = None,
    downstream: Sequence[SpanProcessor] = (),
    meter_provider: MeterProvider | None = None,
) -> ReplayResult:
    """Score recorded spans with the online processor; ``downstream`` processors also receive them."""
    sink = _Collect()
    # No judge on replay: a backfill over old traces must not spend the live judge budget.
    processor = ToolCallEvalProcessor(
        [sink, *downstream], config, conventions=conventions, meter_provider=meter_provider, judge=False
    )
    groups = end_order(map(_unscored, spans))
    on_end = processor.on_end
    for group in groups:
        for span in group:
            on_end(span)
    processor.force_flush()
    processor.shutdown()
    return ReplayResult(sink.spans, len(groups))
