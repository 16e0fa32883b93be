"""OTLP protobuf <-> ``ReadableSpan``, and the OTLP JSON encoding (hex ids, integer enums, int64 as strings).

Every input (OTLP JSON, the Collector file exporter's JSON lines or length-prefixed protobuf, Tempo's
responses) is turned into the protobuf message first, so there is one decoding path to spans.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from google.protobuf import json_format
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1 import common_pb2
from opentelemetry.proto.trace.v1 import trace_pb2
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags, TraceState

from otel_toolcall_eval import _json

_KINDS = {
    trace_pb2.Span.SPAN_KIND_INTERNAL: SpanKind.INTERNAL,
    trace_pb2.Span.SPAN_KIND_SERVER: SpanKind.SERVER,
    trace_pb2.Span.SPAN_KIND_CLIENT: SpanKind.CLIENT,
    trace_pb2.Span.SPAN_KIND_PRODUCER: SpanKind.PRODUCER,
    trace_pb2.Span.SPAN_KIND_CONSUMER: SpanKind.CONSUMER,
}
_STATUS = {0: StatusCode.UNSET, 1: StatusCode.OK, 2: StatusCode.ERROR}
_HAS_IS_REMOTE = 0x100
_IS_REMOTE = 0x200
_ID_FIELDS = ("traceId", "spanId", "parentSpanId")


def any_value(value: common_pb2.AnyValue) -> Any:
    """An attribute value as the SDK holds it; a kvlist (not an OTel attribute type) becomes JSON text."""
    kind = value.WhichOneof("value")
    if kind == "string_value":
        return value.string_value
    if kind == "bool_value":
        return value.bool_value
    if kind == "int_value":
        return value.int_value
    if kind == "double_value":
        return value.double_value
    if kind == "array_value":
        return tuple(any_value(v) for v in value.array_value.values)
    if kind == "kvlist_value":
        return _json.dumps({kv.key: any_value(kv.value) for kv in value.kvlist_value.values})
    if kind == "bytes_value":
        return base64.b64encode(value.bytes_value).decode()
    return None


def _attributes(kvs: Iterable[common_pb2.KeyValue]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kv in kvs:
        v = any_value(kv.value)
        if v is not None:
            out[kv.key] = v
    return out


def _trace_state(text: str) -> TraceState | None:
    return TraceState.from_header([text]) if text else None


def spans_from_request(message: trace_pb2.TracesData | ExportTraceServiceRequest) -> Iterator[ReadableSpan]:
    for rs in message.resource_spans:
        resource = Resource(_attributes(rs.resource.attributes), rs.schema_url)
        for ss in rs.scope_spans:
            scope = InstrumentationScope(ss.scope.name, ss.scope.version or None, ss.schema_url or None)
            for span in ss.spans:
                yield _span(span, resource, scope)


def _span(span: trace_pb2.Span, resource: Resource, scope: InstrumentationScope) -> ReadableSpan:
    trace_id = int.from_bytes(span.trace_id, "big")
    flags = TraceFlags((span.flags & 0xFF) | TraceFlags.SAMPLED)  # recorded, hence sampled
    context = SpanContext(trace_id, int.from_bytes(span.span_id, "big"), False, flags, _trace_state(span.trace_state))
    parent = None
    if span.parent_span_id:
        remote = bool(span.flags & _HAS_IS_REMOTE and span.flags & _IS_REMOTE)
        parent = SpanContext(trace_id, int.from_bytes(span.parent_span_id, "big"), remote, flags)
    events = [Event(e.name, _attributes(e.attributes), e.time_unix_nano) for e in span.events]
    links = [
        Link(
            SpanContext(int.from_bytes(link.trace_id, "big"), int.from_bytes(link.span_id, "big"), False),
            _attributes(link.attributes),
        )
        for link in span.links
    ]
    status = Status(_STATUS.get(span.status.code, StatusCode.UNSET), span.status.message or None)
    return ReadableSpan(
        name=span.name,
        context=context,
        parent=parent,
        resource=resource,
        attributes=_attributes(span.attributes),
        events=events,
        links=links,
        kind=_KINDS.get(span.kind, SpanKind.INTERNAL),
        status=status,
        start_time=span.start_time_unix_nano,
        end_time=span.end_time_unix_nano,
        instrumentation_scope=scope,
    )


def _id_to_base64(value: Any) -> Any:
    """OTLP JSON carries ids as hex; protobuf's JSON mapping wants base64. Tempo answers in base64 already."""
    if isinstance(value, str) and len(value) in (16, 32):
        try:
            return base64.b64encode(bytes.fromhex(value)).decode()
        except ValueError:
            return value
    return value


def _convert_ids(obj: Any, convert: Any) -> Any:
    if isinstance(obj, dict):
        return {k: (convert(v) if k in _ID_FIELDS else _convert_ids(v, convert)) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_convert_ids(v, convert) for v in obj]
    return obj


def request_from_json(obj: Any) -> trace_pb2.TracesData:
    """OTLP JSON (``resourceSpans``, Tempo's ``batches`` or ``{"trace": {...}}``) to protobuf."""
    if isinstance(obj, dict) and "trace" in obj and isinstance(obj["trace"], dict):
        obj = obj["trace"]
    if isinstance(obj, dict) and "batches" in obj and "resourceSpans" not in obj:
        obj = {"resourceSpans": obj["batches"]}
    message = trace_pb2.TracesData()
    json_format.ParseDict(_convert_ids(obj, _id_to_base64), message, ignore_unknown_fields=True)
    return message


def _id_to_hex(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return base64.b64decode(value, validate=True).hex()
        except (binascii.Error, ValueError):
            return value
    return value


def encode_json(spans: Sequence[ReadableSpan]) -> dict[str, Any]:
    """The spans as one OTLP JSON ``TracesData`` object (what the Collector file exporter writes per line)."""
    message = encode_spans(spans)
    as_dict = json_format.MessageToDict(message, use_integers_for_enums=True)
    result: dict[str, Any] = _convert_ids(as_dict, _id_to_hex)
    return result


def length_prefixed(data: bytes) -> Iterator[bytes]:
    """The messages of the Collector file exporter's framing: each preceded by its 4-byte big-endian length."""
    offset = 0
    while offset < len(data):
        if offset + 4 > len(data):
            raise ValueError(f"truncated length prefix at byte {offset}")
        size = int.from_bytes(data[offset : offset + 4], "big")
        offset += 4
        if offset + size > len(data):
            raise ValueError(f"message at byte {offset - 4} claims {size} bytes, only {len(data) - offset} remain")
        yield data[offset : offset + size]
        offset += size


def decode_length_prefixed(data: bytes) -> Iterator[trace_pb2.TracesData]:
    """The Collector file exporter's ``format: proto``: each message preceded by its 4-byte big-endian length."""
    for body in length_prefixed(data):
        message = trace_pb2.TracesData()
        message.ParseFromString(body)
        yield message
