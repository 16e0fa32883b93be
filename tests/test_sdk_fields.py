"""``_sdk``'s direct reads of span, span-context, status and event fields give what the public properties give, and any span type
that is not the SDK's own (or overrides a property) takes the properties."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from opentelemetry.sdk.trace import Event, ReadableSpan, TracerProvider
from opentelemetry.sdk.util import BoundedList
from opentelemetry.trace import SpanContext, Status, StatusCode

from otel_toolcall_eval import _sdk

ids = st.integers(min_value=1, max_value=(1 << 64) - 1)


@given(ids, ids, st.booleans(), st.one_of(st.none(), st.tuples(ids, st.booleans())))
def test_span_ids_and_context_items_are_what_the_properties_return(
    trace_id: int, span_id: int, remote: bool, parent: tuple[int, bool] | None
) -> None:
    ctx = SpanContext(trace_id, span_id, remote)
    parent_ctx = None if parent is None else SpanContext(trace_id, parent[0], parent[1])
    span = ReadableSpan(name="s", context=ctx, parent=parent_ctx)
    assert _sdk.span_ids(span) == (span.context, span.parent)
    assert (_sdk.trace_id_of(ctx), _sdk.span_id_of(ctx), _sdk.is_remote(ctx)) == (trace_id, span_id, remote)


def test_the_sdk_spans_take_the_direct_reads_and_the_probes_hold() -> None:
    assert _sdk.CONTEXT_ITEMS
    assert ReadableSpan in _sdk.CONTEXT_SPANS
    with TracerProvider().get_tracer("t").start_as_current_span("live") as live:
        assert isinstance(live, ReadableSpan)  # the SDK's live span is a ReadableSpan too
        assert _sdk.span_ids(live) == (live.get_span_context(), None)


class _Overriding(ReadableSpan):
    """A span type of someone else's that computes its context: the direct read would bypass it."""

    @property
    def context(self) -> Any:
        return SpanContext(7, 8, False)


def test_a_span_type_overriding_the_properties_is_read_through_them() -> None:
    span = _Overriding(name="o", context=SpanContext(1, 2, False))
    assert _Overriding not in _sdk.CONTEXT_SPANS
    ctx, parent = _sdk.span_ids(span)
    assert ctx is not None and _sdk.trace_id_of(ctx) == 7 and parent is None


@given(
    st.one_of(st.none(), st.integers(min_value=0, max_value=1 << 62)),
    st.one_of(st.none(), st.integers(min_value=0, max_value=1 << 62)),
    st.sampled_from([StatusCode.UNSET, StatusCode.OK, StatusCode.ERROR]),
    st.lists(st.sampled_from(["exception", "retry", "log"]), max_size=4),
)
def test_times_status_and_events_read_directly_are_what_the_properties_return(
    start: int | None, end: int | None, code: StatusCode, names: list[str]
) -> None:
    description = "boom" if code is StatusCode.ERROR else None
    events = BoundedList.from_seq(8, [Event(n, {"i": i}) for i, n in enumerate(names)])
    span = ReadableSpan(name="s", start_time=start, end_time=end, status=Status(code, description), events=events)
    assert _sdk.span_times(span) == (span.start_time, span.end_time)
    error = span.status.status_code is StatusCode.ERROR
    assert _sdk.error_status(span) == (error, span.status.description if error else None)
    assert [e.name for e in _sdk.event_items(span)] == [e.name for e in span.events] == names
    assert len(_sdk.event_items(span)) == len(names)
