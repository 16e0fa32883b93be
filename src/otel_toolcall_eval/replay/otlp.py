"""OTLP protobuf <-> ``ReadableSpan``, and the OTLP JSON encoding (hex ids, integer enums, int64 as strings).

Every input (OTLP JSON, the Collector file exporter's JSON lines or length-prefixed protobuf, Tempo's
responses) is turned into the protobuf message first, so there is one decoding path to spans, and one place
that validates what the message cannot: protobuf's JSON mapping accepts ids of any length (and base64 of
anything), so ``_span`` checks them, and every failure is a ``RecordError`` naming the field.
"""

from __future__ import annotations

import base64
import binascii
import re
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
from otel_toolcall_eval.replay.errors import RecordError

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


def spans_from_request(
    message: trace_pb2.TracesData | ExportTraceServiceRequest, invalid: list[str] | None = None
) -> Iterator[ReadableSpan]:
    """The spans of one message; a ``RecordError`` names the first invalid field (ids of the wrong length).

    With ``invalid``, an invalid span is skipped and its error appended there instead (the scoring service's
    OTLP partial success: the valid spans of a request are kept, the others counted and named)."""
    for i, rs in enumerate(message.resource_spans):
        resource = Resource(_attributes(rs.resource.attributes), rs.schema_url)
        for j, ss in enumerate(rs.scope_spans):
            scope = InstrumentationScope(ss.scope.name, ss.scope.version or None, ss.schema_url or None)
            for k, span in enumerate(ss.spans):
                try:
                    yield _span(span, resource, scope)
                except RecordError as exc:
                    located = exc.inside(f"resourceSpans[{i}].scopeSpans[{j}].spans[{k}]")
                    if invalid is None:
                        raise located from None
                    invalid.append(str(located))


def _id(value: bytes, size: int, field: str, *, optional: bool = False) -> int:
    """An id as the SDK holds it: exactly ``size`` bytes and not all zeros (an invalid id in OTel)."""
    if optional and not value:
        return 0
    if len(value) != size:
        raise RecordError(field, f"{len(value)} bytes, expected {size} ({size * 2} hex digits)")
    number = int.from_bytes(value, "big")
    if number == 0:
        raise RecordError(field, "all zeros (an invalid id)")
    return number


def _span(span: trace_pb2.Span, resource: Resource, scope: InstrumentationScope) -> ReadableSpan:
    trace_id = _id(span.trace_id, 16, "traceId")
    flags = TraceFlags((span.flags & 0xFF) | TraceFlags.SAMPLED)  # recorded, hence sampled
    context = SpanContext(trace_id, _id(span.span_id, 8, "spanId"), False, flags, _trace_state(span.trace_state))
    parent = None
    if span.parent_span_id:
        remote = bool(span.flags & _HAS_IS_REMOTE and span.flags & _IS_REMOTE)
        parent = SpanContext(trace_id, _id(span.parent_span_id, 8, "parentSpanId"), remote, flags)
    events = [Event(e.name, _attributes(e.attributes), e.time_unix_nano) for e in span.events]
    links = [
        Link(
            SpanContext(
                _id(link.trace_id, 16, f"links[{n}].traceId"), _id(link.span_id, 8, f"links[{n}].spanId"), False
            ),
            _attributes(link.attributes),
        )
        for n, link in enumerate(span.links)
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
    """OTLP JSON (``resourceSpans``, Tempo's ``batches`` or ``{"trace": {...}}``) to protobuf; ``RecordError``
    names the field protobuf's JSON mapping rejected."""
    if isinstance(obj, dict) and "trace" in obj:
        obj = obj["trace"]
        if not isinstance(obj, dict):
            raise RecordError("trace", f"expected an object, got {type(obj).__name__}")
    if isinstance(obj, dict) and "batches" in obj and "resourceSpans" not in obj:
        obj = {"resourceSpans": obj["batches"]}
        if not isinstance(obj["resourceSpans"], list):
            raise RecordError("batches", "expected a list")
    if not isinstance(obj, dict):
        raise RecordError("", f"expected an OTLP JSON object, got {type(obj).__name__}")
    if _json.too_deep(obj):  # the id conversion and protobuf's JSON parser both recurse
        raise RecordError("", f"nested deeper than {_json.MAX_DEPTH} levels")
    _check_shape(obj, trace_pb2.TracesData.DESCRIPTOR)
    message = trace_pb2.TracesData()
    try:
        json_format.ParseDict(_convert_ids(obj, _id_to_base64), message, ignore_unknown_fields=True)
    except json_format.ParseError as exc:
        raise _parse_error(str(exc)) from None
    except (ValueError, TypeError, RecursionError) as exc:  # a defensive net: ParseDict wraps most of these
        raise RecordError("", f"not OTLP JSON: {exc}") from None
    return message


def _check_shape(document: dict[str, Any], descriptor: Any) -> None:
    """Every message-typed field an object and every repeated one a list. protobuf's ``ParseDict`` checks the
    scalars, but with unknown fields ignored it takes a string where a message belongs for an empty message
    (it iterates the string's characters as field names), so ``"attributes": [{"key": "k", "value": "v"}]``
    would lose the value silently."""
    stack: list[tuple[Any, Any, str]] = [(document, descriptor, "")]
    while stack:
        value, desc, where = stack.pop()
        if not isinstance(value, dict):
            raise RecordError(where, f"expected an object, got {type(value).__name__}")
        fields = _message_fields(desc)
        for key, item in value.items():
            field = fields.get(key)
            if field is None or item is None:
                continue
            path = f"{where}.{key}" if where else key
            if _repeated(field):
                if not isinstance(item, list):
                    raise RecordError(path, f"expected a list, got {type(item).__name__}")
                if field.message_type is not None:
                    stack.extend((x, field.message_type, f"{path}[{n}]") for n, x in enumerate(item))
            elif field.message_type is not None:
                stack.append((item, field.message_type, path))


_FIELDS: dict[str, dict[str, Any]] = {}


def _message_fields(descriptor: Any) -> dict[str, Any]:
    """A message's fields by both JSON spellings (``spanId`` and ``span_id``)."""
    fields = _FIELDS.get(descriptor.full_name)
    if fields is None:
        fields = {}
        for field in descriptor.fields:
            fields[field.name] = fields[field.json_name] = field
        _FIELDS[descriptor.full_name] = fields
    return fields


_FAILED_FIELD = re.compile(r"Failed to parse (\w+) field: ")


def _parse_error(text: str) -> RecordError:
    """protobuf words a nested failure ``Failed to parse a field: Failed to parse b field: what``: ``a.b: what``."""
    fields = _FAILED_FIELD.findall(text)
    what = _FAILED_FIELD.sub("", text).split(" at TracesData", 1)[0].strip().rstrip(".")
    return RecordError(".".join(fields), what[:200] or "invalid")


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


def _repeated(field: Any) -> bool:
    """``FieldDescriptor.is_repeated`` where protobuf has it (6+); the label on protobuf 5, which still works."""
    flag = getattr(field, "is_repeated", None)
    if flag is not None:
        return bool(flag)
    return bool(field.label == field.LABEL_REPEATED)
