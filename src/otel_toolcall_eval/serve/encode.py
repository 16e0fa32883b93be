"""The export's encoding: a received span goes out as the protobuf message it arrived in, plus the attributes the
processor added, instead of being re-encoded field by field in Python.

Why: the SDK's ``encode_spans`` builds every message of every span in Python (ids, times, each attribute's
``KeyValue`` and ``AnyValue``, events, links, and a JSON dump of the resource per span to group by it): in the
service it was the largest single cost, about half of the CPU per span, and it grows with every score attribute.
Here ``remember`` (at decode) keeps, on each decoded ``ReadableSpan``, its received ``Span`` message, the resource
and scope it came under, and the attribute dict it was decoded to; the processor's scored copy carries the same
entry (its state is a copy of the span's). At export, a span whose original attributes are all still there, same
objects, in the same order, is the original message copied in C with its added attributes appended (their
``KeyValue`` bytes cached per key and value, since most scores repeat); every other span (nothing remembered, an
attribute replaced or removed, a value type not handled here) goes through the SDK's ``encode_spans`` as before.
So the next hop receives exactly what the sender sent (its flags and dropped counts too) with the scores added,
over either protocol (``grpc_exporter``, ``http_exporter``: the SDK's exporters with this encoder in place of theirs).

The received request stays alive until its last span is exported: memory stays bounded by the queue and the
export window, as the decoded spans are.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import islice
from typing import Any, Final

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import TracesData
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter

from otel_toolcall_eval._sdk import grpc_span_exporter, http_span_exporter, own_attributes, stash, stashed

ORIGINAL: Final = "_toolcall_eval_received"  # the ReadableSpan attribute holding (message, block, attributes)
_ATTRIBUTES_TAG: Final = b"\x4a"  # Span.attributes: field 9, length-delimited
_MISSING: Final = object()
_CACHE_MAX: Final = 4096  # distinct (key, value) pairs kept encoded
_CACHE_STR: Final = 64  # longer strings (explanations, reasons) are encoded each time, not cached


def remember(message: ExportTraceServiceRequest | TracesData, spans: Sequence[ReadableSpan]) -> None:
    """Attach to each span decoded from ``message`` (every one of them, in order) what it arrived as."""
    it = iter(spans)
    for rs in message.resource_spans:
        for ss in rs.scope_spans:
            block = (rs.resource, rs.schema_url, ss.scope, ss.schema_url)
            for pb in ss.spans:
                span = next(it)
                attributes = own_attributes(span)
                # a repeated key collapses into one dict entry: that span is encoded the SDK's way
                if type(attributes) is dict and len(attributes) == len(pb.attributes):
                    stash(span, ORIGINAL, (pb, block, attributes))


def _varint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _any_value(value: Any) -> AnyValue | None:
    """The SDK's encoding (``_encode_value``) for the types scores use; ``None`` for any other."""
    if isinstance(value, bool):
        return AnyValue(bool_value=value)
    if isinstance(value, str):
        return AnyValue(string_value=value)
    if isinstance(value, int):
        return AnyValue(int_value=value)
    if isinstance(value, float):
        return AnyValue(double_value=value)
    if isinstance(value, (tuple, list)):
        items = [_any_value(v) for v in value]
        values = [v for v in items if v is not None]
        if len(values) != len(items):
            return None
        out = AnyValue()
        out.array_value.values.extend(values)
        return out
    return None


class _Attributes:
    """``Span.attributes`` entries as wire bytes, cached for short scalar values."""

    def __init__(self) -> None:
        self._cache: dict[tuple[str, type, Any], bytes] = {}

    def encode(self, key: str, value: Any) -> bytes | None:
        cacheable = type(value) in (bool, int, float) or (type(value) is str and len(value) <= _CACHE_STR)
        if cacheable:
            hit = self._cache.get((key, type(value), value))
            if hit is not None:
                return hit
        any_value = _any_value(value)
        if any_value is None:
            return None
        body: bytes = KeyValue(key=key, value=any_value).SerializeToString()
        field = _ATTRIBUTES_TAG + _varint(len(body)) + body
        if cacheable:
            if len(self._cache) >= _CACHE_MAX:
                self._cache.clear()
            self._cache[(key, type(value), value)] = field
        return field


def _added(span: ReadableSpan, original: dict[str, Any]) -> list[tuple[str, Any]] | None:
    """The attributes appended to ``original``, or ``None`` when one of its entries changed (slow path)."""
    attributes = own_attributes(span)
    if attributes is original:
        return []
    if type(attributes) is not dict or len(attributes) < len(original):
        return None
    get = attributes.get
    for key, value in original.items():
        if get(key, _MISSING) is not value:
            return None
    return list(islice(attributes.items(), len(original), None))


class ReceivedSpanEncoder:
    def __init__(self) -> None:
        self._attributes = _Attributes()

    def encode(self, spans: Sequence[ReadableSpan]) -> ExportTraceServiceRequest:
        request = ExportTraceServiceRequest()
        blocks: dict[int, tuple[Any, list[tuple[Any, bytes]]]] = {}
        slow: list[ReadableSpan] = []
        encode_attribute = self._attributes.encode
        for span in spans:
            received = stashed(span, ORIGINAL)
            if received is None:
                slow.append(span)
                continue
            pb, block, original = received
            added = _added(span, original)
            if added is None:
                slow.append(span)
                continue
            parts = [encode_attribute(key, value) for key, value in added]
            if None in parts:
                slow.append(span)
                continue
            entry = blocks.get(id(block))
            if entry is None:
                entry = blocks[id(block)] = (block, [])
            entry[1].append((pb, b"".join(parts)))  # type: ignore[arg-type]  # None was ruled out above
        for (resource, resource_schema, scope, scope_schema), items in blocks.values():
            rs = request.resource_spans.add()
            rs.resource.CopyFrom(resource)
            rs.schema_url = resource_schema
            ss = rs.scope_spans.add()
            ss.scope.CopyFrom(scope)
            ss.schema_url = scope_schema
            out = ss.spans
            for pb, extra in items:
                copy = out.add()
                copy.CopyFrom(pb)
                if extra:
                    copy.MergeFromString(extra)
        if slow:
            request.resource_spans.extend(encode_spans(slow).resource_spans)
        return request


def grpc_exporter(**kwargs: Any) -> SpanExporter:
    """The SDK's OTLP/gRPC span exporter (retries, compression, headers, timeouts) with the encoding above."""
    return grpc_span_exporter(ReceivedSpanEncoder().encode, **kwargs)


def http_exporter(**kwargs: Any) -> SpanExporter:
    """The SDK's OTLP/HTTP span exporter with the encoding above: its body is the same serialized
    ``ExportTraceServiceRequest`` the gRPC exporter sends."""
    return http_span_exporter(ReceivedSpanEncoder().encode, **kwargs)
