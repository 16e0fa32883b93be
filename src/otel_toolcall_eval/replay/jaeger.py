"""Jaeger's JSON trace format (UI download and the ``/api/traces`` response) to ``ReadableSpan``.

Jaeger keeps OTel fields as tags: ``span.kind``, ``otel.status_code``/``otel.status_description``,
``otel.scope.name``/``otel.scope.version``, and span events as logs whose ``event`` field is the name.
Times are microseconds.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags

_KINDS = {
    "internal": SpanKind.INTERNAL,
    "server": SpanKind.SERVER,
    "client": SpanKind.CLIENT,
    "producer": SpanKind.PRODUCER,
    "consumer": SpanKind.CONSUMER,
}
_META_TAGS = frozenset(
    {
        "span.kind",
        "otel.status_code",
        "otel.status_description",
        "otel.scope.name",
        "otel.scope.version",
        "otel.library.name",
        "otel.library.version",
        "internal.span.format",
    }
)


class JaegerFormatError(ValueError):
    pass


def _tags(items: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for tag in items or ():
        if not isinstance(tag, Mapping) or "key" not in tag:
            continue
        value: Any = tag.get("value")
        if value is None:
            continue
        kind = str(tag.get("type", "string")).lower()
        try:
            if kind in ("int64", "int"):
                value = int(value)
            elif kind in ("float64", "float"):
                value = float(value)
            elif kind == "bool":
                value = value if isinstance(value, bool) else str(value).lower() == "true"
            elif not isinstance(value, str):
                value = str(value)
        except (TypeError, ValueError):
            value = str(value)  # a mistyped tag keeps its text rather than losing the span
        out[str(tag["key"])] = value
    return out


def _id(text: Any, what: str) -> int:
    try:
        return int(str(text), 16)
    except ValueError:
        raise JaegerFormatError(f"{what} {text!r} is not hex") from None


def spans_from_jaeger(document: Any) -> Iterator[ReadableSpan]:
    """Accepts ``{"data": [trace, ...]}``, a single trace ``{"traceID", "spans", "processes"}`` or a list of traces."""
    if isinstance(document, Mapping) and "data" in document:
        traces = document["data"] or []
    elif isinstance(document, Mapping) and "spans" in document:
        traces = [document]
    elif isinstance(document, list):
        traces = document
    else:
        raise JaegerFormatError("expected a Jaeger trace document with 'data' or 'spans'")
    for trace in traces:
        processes = {k: _process(v) for k, v in (trace.get("processes") or {}).items()}
        for span in trace.get("spans") or ():
            yield _span(span, processes)


def _process(process: Mapping[str, Any]) -> Resource:
    attrs = _tags(process.get("tags"))
    attrs["service.name"] = process.get("serviceName", "unknown_service")
    return Resource(attrs)


def _span(span: Mapping[str, Any], processes: Mapping[str, Resource]) -> ReadableSpan:
    trace_id = _id(span.get("traceID"), "traceID")
    context = SpanContext(trace_id, _id(span.get("spanID"), "spanID"), False, TraceFlags(TraceFlags.SAMPLED))
    tags = _tags(span.get("tags"))
    parent = None
    links = []
    for ref in span.get("references") or ():
        ref_ctx = SpanContext(
            _id(ref.get("traceID", span.get("traceID")), "traceID"), _id(ref.get("spanID"), "spanID"), False
        )
        if ref.get("refType", "CHILD_OF") == "CHILD_OF" and parent is None and ref_ctx.trace_id == trace_id:
            parent = ref_ctx
        else:
            links.append(Link(ref_ctx))
    if parent is None and span.get("parentSpanID"):
        parent = SpanContext(trace_id, _id(span["parentSpanID"], "parentSpanID"), False)
    start_us = int(span.get("startTime", 0))
    end_us = start_us + int(span.get("duration", 0))
    events = []
    for log in span.get("logs") or ():
        fields = _tags(log.get("fields"))
        name = str(fields.pop("event", "log"))
        events.append(Event(name, fields, int(log.get("timestamp", start_us)) * 1000))
    code = str(tags.get("otel.status_code", "")).upper()
    if code == "ERROR" or (tags.get("error") is True and code != "OK"):
        status = Status(StatusCode.ERROR, tags.get("otel.status_description"))
    elif code == "OK":
        status = Status(StatusCode.OK)
    else:
        status = Status(StatusCode.UNSET)
    scope_name = tags.get("otel.scope.name") or tags.get("otel.library.name") or ""
    scope_version = tags.get("otel.scope.version") or tags.get("otel.library.version")
    kind = _KINDS.get(str(tags.get("span.kind", "internal")).lower(), SpanKind.INTERNAL)
    attributes = {k: v for k, v in tags.items() if k not in _META_TAGS and not (k == "error" and v is True)}
    return ReadableSpan(
        name=str(span.get("operationName", "")),
        context=context,
        parent=parent,
        resource=processes.get(str(span.get("processID")), Resource({})),
        attributes=attributes,
        events=events,
        links=links,
        kind=kind,
        status=status,
        start_time=start_us * 1000,
        end_time=end_us * 1000,
        instrumentation_scope=InstrumentationScope(str(scope_name), scope_version),
    )
