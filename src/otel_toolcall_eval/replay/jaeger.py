"""Jaeger's JSON trace format (UI download and the ``/api/traces`` response) to ``ReadableSpan``.

Jaeger keeps OTel fields as tags: ``span.kind``, ``otel.status_code``/``otel.status_description``,
``otel.scope.name``/``otel.scope.version``, and span events as logs whose ``event`` field is the name.
Times are microseconds.

The document is untrusted: every structural field is type-checked as it is read, and a wrong one raises
``JaegerFormatError`` naming its path (``data[0].spans[3].spanID``). A tag whose value does not fit its
declared type keeps its text instead of losing the span.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags

from otel_toolcall_eval.replay.errors import RecordError

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
_HEX = frozenset("0123456789abcdefABCDEF")
_INT64 = (-(2**63), 2**63 - 1)
_MAX_MICROS = (2**64 - 1) // 1000  # OTLP times are unsigned 64-bit nanoseconds


class JaegerFormatError(RecordError):
    pass


def _list(value: Any, where: str) -> list[Any]:
    """A JSON array; absent (None) is empty."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise JaegerFormatError(where, f"expected a list, got {type(value).__name__}")
    return value


def _object(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise JaegerFormatError(where, f"expected an object, got {type(value).__name__}")
    return value


def _int(value: Any, where: str, low: int, high: int) -> int:
    """An integer (or its decimal text, as some exporters write) within ``[low, high]``."""
    if isinstance(value, str) and value.strip().lstrip("-").isdigit() and len(value) <= 25:
        value = int(value)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool):
        raise JaegerFormatError(where, f"expected an integer, got {type(value).__name__}")
    if not low <= value <= high:
        raise JaegerFormatError(where, f"{value} is out of range")
    return value


def _tags(items: Any, where: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for tag in _list(items, where):
        if not isinstance(tag, Mapping) or "key" not in tag:
            continue
        value: Any = tag.get("value")
        if value is None:
            continue
        kind = str(tag.get("type", "string")).lower()
        try:
            if kind in ("int64", "int"):
                value = int(value)
                if not _INT64[0] <= value <= _INT64[1]:  # OTel ints are 64-bit: keep the text
                    value = str(value)
            elif kind in ("float64", "float"):
                value = float(value)
            elif kind == "bool":
                value = value if isinstance(value, bool) else str(value).lower() == "true"
            elif not isinstance(value, str):
                value = str(value)
        except (TypeError, ValueError, OverflowError):
            value = str(value)  # a mistyped tag keeps its text rather than losing the span
        out[str(tag["key"])] = value
    return out


def _id(text: Any, where: str, digits: int) -> int:
    """A hex id of at most ``digits`` digits (Jaeger drops leading zeros), not zero."""
    if not isinstance(text, str) or not text or len(text) > digits or not _HEX.issuperset(text):
        raise JaegerFormatError(where, f"{text!r} is not an id of 1 to {digits} hex digits")
    value = int(text, 16)
    if value == 0:
        raise JaegerFormatError(where, "all zeros (an invalid id)")
    return value


def spans_from_jaeger(document: Any) -> Iterator[ReadableSpan]:
    """Accepts ``{"data": [trace, ...]}``, a single trace ``{"traceID", "spans", "processes"}`` or a list of traces."""
    if isinstance(document, Mapping) and "data" in document:
        traces = [(f"data[{t}]", x) for t, x in enumerate(_list(document["data"], "data"))]
    elif isinstance(document, Mapping) and "spans" in document:
        traces = [("", document)]
    elif isinstance(document, list):
        traces = [(f"[{t}]", x) for t, x in enumerate(document)]
    else:
        raise JaegerFormatError("", "expected a Jaeger trace document with 'data' or 'spans'")
    for where, item in traces:
        trace = _object(item, where or "trace")
        at = f"{where}." if where else ""
        raw_processes = trace.get("processes")
        processes = {}
        if raw_processes is not None:
            for key, process in _object(raw_processes, f"{at}processes").items():
                processes[str(key)] = _process(process, f"{at}processes.{key}")
        for s, span in enumerate(_list(trace.get("spans"), f"{at}spans")):
            yield _span(_object(span, f"{at}spans[{s}]"), processes, f"{at}spans[{s}]")


def _process(process: Any, where: str) -> Resource:
    process = _object(process, where)
    attrs = _tags(process.get("tags"), f"{where}.tags")
    attrs["service.name"] = str(process.get("serviceName", "unknown_service"))
    return Resource(attrs)


def _span(span: Mapping[str, Any], processes: Mapping[str, Resource], where: str) -> ReadableSpan:
    trace_id = _id(span.get("traceID"), f"{where}.traceID", 32)
    context = SpanContext(
        trace_id, _id(span.get("spanID"), f"{where}.spanID", 16), False, TraceFlags(TraceFlags.SAMPLED)
    )
    tags = _tags(span.get("tags"), f"{where}.tags")
    parent = None
    links = []
    for r, ref in enumerate(_list(span.get("references"), f"{where}.references")):
        at = f"{where}.references[{r}]"
        ref = _object(ref, at)
        ref_ctx = SpanContext(
            _id(ref.get("traceID", span.get("traceID")), f"{at}.traceID", 32),
            _id(ref.get("spanID"), f"{at}.spanID", 16),
            False,
        )
        if ref.get("refType", "CHILD_OF") == "CHILD_OF" and parent is None and ref_ctx.trace_id == trace_id:
            parent = ref_ctx
        else:
            links.append(Link(ref_ctx))
    if parent is None and span.get("parentSpanID"):
        parent = SpanContext(trace_id, _id(span["parentSpanID"], f"{where}.parentSpanID", 16), False)
    start_us = _int(span.get("startTime", 0), f"{where}.startTime", 0, _MAX_MICROS)
    end_us = start_us + _int(span.get("duration", 0), f"{where}.duration", 0, _MAX_MICROS - start_us)
    events = []
    for n, log in enumerate(_list(span.get("logs"), f"{where}.logs")):
        at = f"{where}.logs[{n}]"
        log = _object(log, at)
        fields = _tags(log.get("fields"), f"{at}.fields")
        name = str(fields.pop("event", "log"))
        timestamp = _int(log.get("timestamp", start_us), f"{at}.timestamp", 0, _MAX_MICROS)
        events.append(Event(name, fields, timestamp * 1000))
    code = str(tags.get("otel.status_code", "")).upper()
    if code == "ERROR" or (tags.get("error") is True and code != "OK"):
        description = tags.get("otel.status_description")
        status = Status(StatusCode.ERROR, None if description is None else str(description))
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
        instrumentation_scope=InstrumentationScope(
            str(scope_name), None if scope_version is None else str(scope_version)
        ),
    )


def _scope(name: Any, version: Any) -> InstrumentationScope:
    return InstrumentationScope(str(name), None if version is None else str(version))
