"""The export's encoding: a received span goes out as the protobuf message it arrived in, plus the attributes the
processor added, instead of being re-encoded field by field in Python.

Why: the SDK's ``encode_spans`` builds every message of every span in Python (ids, times, each attribute's
``KeyValue`` and ``AnyValue``, events, links, and a JSON dump of the resource per span to group by it): in the
service it was the largest single cost, about half of the CPU per span, and it grows with every score attribute.
Here ``remember`` (at decode) keeps, on each decoded ``ReadableSpan``, its received ``Span`` message, the resource
and scope it came under, and the attribute dict it was decoded to; the processor's scored copy carries the same
entry (its state is a copy of the span's). At export, a span whose original attributes are all still there, same
objects, in the same order, is the original message's serialization with its added attributes' bytes appended
(``KeyValue`` bytes cached per key and value, and per run of a span's added attributes, since most scores repeat;
a run with floats as the bytes between them),
and the request is put together as bytes and sent as is (``Serialized``); every other span (nothing remembered, an
attribute replaced or removed, a value type not handled here) goes through the SDK's ``encode_spans`` as before.
So the next hop receives exactly what the sender sent (its flags and dropped counts too) with the scores added,
over either protocol (``grpc_exporter``, ``http_exporter``: the SDK's exporters with this encoder in place of theirs).

The received request stays alive until its last span is exported: memory stays bounded by the queue and the
export window, as the decoded spans are.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from itertools import compress, islice, repeat
from operator import is_, not_
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
_CACHE_MAX: Final = 4096  # distinct (key, value) pairs kept encoded
_CACHE_STR: Final = 64  # longer strings (explanations, reasons) are encoded each time, not cached
_RUN_TYPES: Final = frozenset((bool, int, str))  # a run of only these is cached whole
_SEGMENT_TYPES: Final = frozenset((bool, int, str, float))  # and with floats, as the bytes between them
_RUNS_MAX: Final = 1024  # distinct runs kept, each at most _RUN_MAX_BYTES encoded: at most ~2 MiB with their keys
_RUN_MAX_BYTES: Final = 1024
_KEY_TAG: Final = b"\x0a"  # KeyValue.key: field 1, length-delimited
_DOUBLE_VALUE: Final = b"\x12\x09\x21"  # KeyValue.value (field 2, 9 bytes): AnyValue.double_value (field 4, 64-bit)
_DOUBLE: Final = struct.Struct("<d")


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
    """``Span.attributes`` entries as wire bytes, cached for short scalar values; and a span's whole run of added
    attributes, cached as one ``bytes`` when it has only booleans, integers and strings: most tool spans get the
    same scores as an earlier one (measured: encoding a scored tool span's dozen added attributes one by one cost
    ~30 k instructions more than passing it through; one lookup of the run costs a tenth of that). A run with
    floats (a root's latencies and costs, new on every trace) is cached as the bytes between its floats, each
    segment ending with the next float's key (``_float_prefix``), keyed by everything but the floats' values,
    which are written in between (8 bytes each): a root's run is one lookup and a ``struct.pack`` per float,
    instead of its 15-odd attributes encoded one by one (measured: 15.9 -> ~5 us a root, ~1 us a span of the
    serve figure's traffic). A run with an array is encoded attribute by attribute and not kept. A run's key
    holds the value types beside the values, since ``True == 1`` and they hash alike."""

    def __init__(self) -> None:
        self._cache: dict[tuple[str, type, Any], bytes] = {}
        self._runs: dict[tuple[tuple[str, ...], tuple[Any, ...], tuple[type, ...]], bytes] = {}
        self._segments: dict[tuple[tuple[str, ...], tuple[Any, ...], tuple[type, ...]], tuple[bytes, ...]] = {}

    def join(self, names: tuple[str, ...], values: tuple[Any, ...]) -> bytes | None:
        """The wire bytes of the attributes ``names`` = ``values`` in order; ``None`` when a value is of a type not
        handled here."""
        if not names:
            return b""
        types = tuple(map(type, values))
        if float in types:
            return self._with_floats(names, values, types)
        key = (names, values, types) if _RUN_TYPES.issuperset(types) else None
        if key is not None:
            hit = self._runs.get(key)
            if hit is not None:
                return hit
        out = self._each(names, values)
        if out is not None and key is not None and len(out) <= _RUN_MAX_BYTES:  # the key's strings are in ``out``
            if len(self._runs) >= _RUNS_MAX:
                self._runs.clear()
            self._runs[key] = out
        return out

    def _each(self, names: tuple[str, ...], values: tuple[Any, ...]) -> bytes | None:
        parts = []
        for name, value in zip(names, values, strict=True):
            part = self.encode(name, value)
            if part is None:
                return None
            parts.append(part)
        return b"".join(parts)

    def _with_floats(self, names: tuple[str, ...], values: tuple[Any, ...], types: tuple[type, ...]) -> bytes | None:
        if not _SEGMENT_TYPES.issuperset(types):
            return self._each(names, values)
        is_float = tuple(map(is_, types, repeat(float)))
        key = (names, tuple(compress(values, map(not_, is_float))), types)
        segments = self._segments.get(key)
        if segments is None:
            parts: list[bytes] = []
            pending: list[bytes] = []
            for name, value in zip(names, values, strict=True):
                if type(value) is float:
                    pending.append(_float_prefix(name))
                    parts.append(b"".join(pending))
                    pending = []
                else:
                    part = self.encode(name, value)
                    if part is None:
                        return None
                    pending.append(part)
            parts.append(b"".join(pending))
            segments = tuple(parts)
            if sum(map(len, segments)) <= _RUN_MAX_BYTES:
                if len(self._segments) >= _RUNS_MAX:
                    self._segments.clear()
                self._segments[key] = segments
        floats = tuple(compress(values, is_float))
        packed = struct.pack(f"<{len(floats)}d", *floats)
        out = [segments[0]]
        for n, segment in enumerate(segments[1:]):
            out.append(packed[8 * n : 8 * n + 8])
            out.append(segment)
        return b"".join(out)

    def encode(self, key: str, value: Any) -> bytes | None:
        if type(value) is float:  # a latency or a cost: new on every trace, so written directly and not kept
            return _float_prefix(key) + _DOUBLE.pack(value)
        cacheable = type(value) in (bool, int) or (type(value) is str and len(value) <= _CACHE_STR)
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


def _float_prefix(key: str) -> bytes:
    """A float attribute's ``Span.attributes`` field up to the double's 8 bytes: its tag and length, the key, and
    the value's tags (the body's length does not depend on the value)."""
    body = _field(_KEY_TAG, key.encode()) + _DOUBLE_VALUE
    return _ATTRIBUTES_TAG + _varint(len(body) + _DOUBLE.size) + body


def _added(span: ReadableSpan, original: dict[str, Any]) -> tuple[tuple[str, ...], tuple[Any, ...]] | None:
    """The names and values of the attributes appended to ``original``, or ``None`` when one of its entries changed
    (slow path). In C calls only (``map``, ``islice``): this runs for every exported span."""
    attributes = own_attributes(span)
    if attributes is original:
        return (), ()
    n = len(original)
    if type(attributes) is not dict or len(attributes) < n:
        return None
    # the same object under every original key (a missing key gives None, never an attribute's value)
    if not all(map(is_, map(attributes.get, original), original.values())):
        return None
    return tuple(islice(attributes, n, None)), tuple(islice(attributes.values(), n, None))


class Serialized:
    """A serialized ``ExportTraceServiceRequest``, handed to the SDK's exporters where they take the request
    message: the HTTP exporter asks it for ``SerializePartialToString``, the gRPC one sends it as is
    (``_sdk.grpc_span_exporter`` with ``raw=True``: its stub does not serialize)."""

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data

    def SerializePartialToString(self) -> bytes:  # the protobuf method the HTTP exporter calls
        return self.data

    def SerializeToString(self) -> bytes:  # the one ``_sdk``'s raw gRPC stub calls
        return self.data


def _field(tag: bytes, body: bytes) -> bytes:
    """One length-delimited field: its tag, the body's length as a varint, the body."""
    n = len(body)
    if n < 0x80:
        return tag + bytes((n,)) + body
    if n < 0x4000:  # most spans: two bytes, without _varint's loop
        return tag + bytes(((n & 0x7F) | 0x80, n >> 7)) + body
    return tag + _varint(n) + body


# ExportTraceServiceRequest.resource_spans, ResourceSpans.resource, ScopeSpans.scope: field 1;
# ResourceSpans.scope_spans, ScopeSpans.spans: field 2; both schema_url: field 3 (all length-delimited)
_FIELD_1: Final = b"\x0a"
_FIELD_2: Final = b"\x12"
_FIELD_3: Final = b"\x1a"


class ReceivedSpanEncoder:
    """The request bytes are put together here, not built as messages and serialized: a received span is its
    message's serialization with the added attributes' bytes appended (a repeated field may continue anywhere in a
    message), so the scores are never parsed into the message only to be encoded again (measured per scored tool
    span: ``CopyFrom`` 5 k, ``MergeFromString`` of the scores 7 k and their re-encoding 20 k instructions)."""

    def __init__(self) -> None:
        self._attributes = _Attributes()

    def encode(self, spans: Sequence[ReadableSpan]) -> ExportTraceServiceRequest:
        """The request as a message (what tests compare); the exporters send ``encode_bytes``."""
        return ExportTraceServiceRequest.FromString(self.encode_bytes(spans))

    def serialized(self, spans: Sequence[ReadableSpan]) -> Serialized:
        return Serialized(self.encode_bytes(spans))

    def encode_bytes(self, spans: Sequence[ReadableSpan]) -> bytes:
        blocks: dict[int, tuple[Any, list[bytes]]] = {}
        slow: list[ReadableSpan] = []
        join = self._attributes.join
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
            extra = join(*added)
            if extra is None:
                slow.append(span)
                continue
            entry = blocks.get(id(block))
            if entry is None:
                entry = blocks[id(block)] = (block, [])
            entry[1].append(_field(_FIELD_2, pb.SerializeToString() + extra))
        out = []
        for (resource, resource_schema, scope, scope_schema), items in blocks.values():
            scope_spans = _field(_FIELD_1, scope.SerializeToString()) + b"".join(items)
            if scope_schema:
                scope_spans += _field(_FIELD_3, scope_schema.encode())
            resource_spans = _field(_FIELD_1, resource.SerializeToString()) + _field(_FIELD_2, scope_spans)
            if resource_schema:
                resource_spans += _field(_FIELD_3, resource_schema.encode())
            out.append(_field(_FIELD_1, resource_spans))
        if slow:  # two serialized messages one after the other are their merge: the resource_spans add up
            out.append(encode_spans(slow).SerializeToString())
        return b"".join(out)


def grpc_exporter(**kwargs: Any) -> SpanExporter:
    """The SDK's OTLP/gRPC span exporter (retries, compression, headers, timeouts) with the encoding above."""
    return grpc_span_exporter(ReceivedSpanEncoder().serialized, raw=True, **kwargs)


def http_exporter(**kwargs: Any) -> SpanExporter:
    """The SDK's OTLP/HTTP span exporter with the encoding above: its body is the same serialized
    ``ExportTraceServiceRequest`` the gRPC exporter sends."""
    return http_span_exporter(ReceivedSpanEncoder().serialized, **kwargs)
