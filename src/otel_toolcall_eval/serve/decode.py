"""Request bodies to spans: OTLP/HTTP protobuf or JSON, identity, gzip or deflate; every failure one exception.

Decompression is bounded (``max_bytes`` of output, so a small gzip bomb cannot take the memory), and decoding
goes through ``replay.otlp``, the one path from OTLP messages to ``ReadableSpan``.

The work of a request is bounded before it is done whole (``Limits``, from ``serve:``): its memory is estimated
from its size and, for JSON, its structure (``estimate``: a scan in C over the body with its strings blanked,
counting the values it would become), so the receivers can refuse it (retryable) before a Python object is made
when the requests in flight would take more than ``serve.max_inflight_bytes``; then, on the parsed structure and
before any span or attribute object is built, a span with too many attributes (on itself, an event or a link),
an array or key-value list with too many values, or values nested too deep, is refused alone (OTLP partial
success, as an invalid span is). Measured (issue 28): a JSON span of small attributes costs ~23x its size and
~22 us per attribute through protobuf's ``ParseDict``, a protobuf body ~5x its size.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.trace.v1.trace_pb2 import TracesData
from opentelemetry.sdk.trace import ReadableSpan

from otel_toolcall_eval.replay.otlp import request_from_json, spans_from_request
from otel_toolcall_eval.serve.encode import remember

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
_WBITS = {"gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}
# a JSON string, escapes included (the unrolled form: no backtracking per character)
_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
# Memory per byte and per JSON value while a request is decoded, at its peak (tests/serve/test_fuzz.py checks the
# estimate stays above what tracemalloc sees): the body, its parsed form and the protobuf message it becomes. Per
# byte, orjson's peak while it parses long strings is ~13x the body (measured: 50 strings of 20 KB); per value, a
# small attribute costs ~200 bytes of Python objects and protobuf message.
JSON_BYTE_COST = 16
JSON_VALUE_COST = 200
PROTOBUF_BYTE_COST = 6


@dataclass(frozen=True)
class Limits:
    """Per-request bounds on the structure of what is decoded (``serve.max_span_attributes`` ...)."""

    max_attributes: int = 1_024
    max_array_values: int = 4_096
    max_depth: int = 8


def estimate(body: bytes, content_type: str | None) -> int:
    """The memory a body will take while it is decoded, in bytes, found without decoding it: for JSON, its size
    and the number of values it holds (every ``:`` and ``,`` outside strings starts one), counted in C."""
    if media_type(content_type) != JSON:
        return len(body) * PROTOBUF_BYTE_COST
    skeleton = _JSON_STRING.sub(b'""', body)
    return len(body) * JSON_BYTE_COST + (skeleton.count(b":") + skeleton.count(b",") + 1) * JSON_VALUE_COST


class BadPayload(ValueError):
    """The body cannot be read; ``status`` is the HTTP status to answer with (400, 413 or 415)."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


def partial_success(invalid: list[str]) -> ExportTraceServiceResponse:
    """The OTLP answer to a request some of whose spans were refused: how many, and the first reason (bounded)."""
    response = ExportTraceServiceResponse()
    if invalid:
        response.partial_success.rejected_spans = len(invalid)
        more = f" (and {len(invalid) - 1} more)" if len(invalid) > 1 else ""
        response.partial_success.error_message = f"invalid spans refused: {invalid[0][:300]}{more}"
    return response


def media_type(content_type: str | None) -> str:
    return (content_type or "").split(";", 1)[0].strip().lower()


def decompress(body: bytes, encoding: str | None, max_bytes: int) -> bytes:
    name = (encoding or "identity").strip().lower()
    if name in ("", "identity"):
        return body
    wbits = _WBITS.get(name)
    if wbits is None:
        raise BadPayload(f"unsupported Content-Encoding {name[:40]!r}", 415)
    inflater = zlib.decompressobj(wbits)
    try:
        out = inflater.decompress(body, max_bytes + 1)
    except zlib.error as exc:
        raise BadPayload(f"body is not valid {name}: {exc}") from None
    if len(out) > max_bytes:
        raise BadPayload(f"decompressed body exceeds {max_bytes} bytes", 413)
    if not inflater.eof:
        raise BadPayload(f"body is truncated {name}")
    return out


def _counted(
    message: ExportTraceServiceRequest | TracesData, max_spans: int, invalid: list[str] | None, limits: Limits | None
) -> list[ReadableSpan]:
    """The spans, once their number is known to fit the queue: a request the queue can never take is refused
    before a Python object is built per span (retrying it would not help: 413 / INVALID_ARGUMENT).

    With ``invalid``, invalid spans are skipped and described there (OTLP partial success); a request none of
    whose spans is valid is still refused whole."""
    count = sum(len(ss.spans) for rs in message.resource_spans for ss in rs.scope_spans)
    if count > max_spans:
        raise BadPayload(f"{count} spans in one request; at most {max_spans} (serve.max_queue_spans)", 413)
    if limits is not None:
        _bounded(_bound_message, message, limits, invalid)
    spans = list(spans_from_request(message, invalid))
    if invalid and not spans:
        raise BadPayload(f"no valid span: {invalid[0]}")
    if not invalid:  # every span decoded, in order: the export can re-send what arrived (``serve.encode``)
        remember(message, spans)
    return spans


def decode_spans(
    body: bytes,
    content_type: str | None,
    max_spans: int,
    invalid: list[str] | None = None,
    limits: Limits | None = None,
) -> list[ReadableSpan]:
    """``limits``: spans over them are refused into ``invalid`` (or the request, without ``invalid``)."""
    kind = media_type(content_type)
    try:
        if kind == PROTOBUF:
            message = ExportTraceServiceRequest()
            message.ParseFromString(body)
            return _counted(message, max_spans, invalid, limits)
        if kind == JSON:
            obj = orjson.loads(body)
            if not isinstance(obj, dict):
                raise BadPayload("an OTLP JSON body is an object with resourceSpans")
            if limits is not None:  # before protobuf's ParseDict, the costly part: ~22 us per attribute
                _bounded(_bound_json, obj, limits, invalid)
            return _counted(request_from_json(obj), max_spans, invalid, None)
    except BadPayload:
        raise
    except Exception as exc:  # noqa: BLE001 - protobuf, JSON and span errors alike mean a bad body
        raise BadPayload(f"not a valid OTLP {kind} trace request ({type(exc).__name__})") from None
    raise BadPayload(f"unsupported Content-Type {kind[:60]!r}: use {PROTOBUF} or {JSON}", 415)


def spans_from_message(
    message: ExportTraceServiceRequest,
    max_spans: int,
    invalid: list[str] | None = None,
    limits: Limits | None = None,
) -> list[ReadableSpan]:
    """The gRPC receiver's path (gRPC has decoded and decompressed the message already)."""
    try:
        return _counted(message, max_spans, invalid, limits)
    except BadPayload:
        raise
    except Exception as exc:  # noqa: BLE001
        raise BadPayload(f"not a valid OTLP trace request ({type(exc).__name__})") from None


# --- structural bounds -----------------------------------------------------------------------------------------
# Both walks look at attribute counts (a C ``len``) and descend only into array and key-value-list values, so a
# well-formed span costs a few lookups per attribute. An offending span is removed from the message (or the JSON
# object) and named in ``refused``; resource or scope attributes over the bound refuse every span under them.


def _bounded(
    bound: Callable[[Any, Limits, list[str]], None], document: Any, limits: Limits, invalid: list[str] | None
) -> None:
    """Run ``bound`` over ``document``: the spans it removes are named in ``invalid`` (or refuse the request)."""
    refused: list[str] = []
    bound(document, limits, refused)
    if refused:
        if invalid is None:
            raise BadPayload(refused[0])
        invalid.extend(refused)


def _pb_value(value: Any, limits: Limits, depth: int) -> str | None:
    kind = value.WhichOneof("value")
    if kind != "array_value" and kind != "kvlist_value":
        return None
    if depth >= limits.max_depth:
        return f"values nested deeper than {limits.max_depth} (serve.max_value_depth)"
    values = value.array_value.values if kind == "array_value" else value.kvlist_value.values
    if len(values) > limits.max_array_values:
        return f"{len(values)} values in one array; at most {limits.max_array_values} (serve.max_array_values)"
    for item in values:
        problem = _pb_value(item if kind == "array_value" else item.value, limits, depth + 1)
        if problem is not None:
            return problem
    return None


def _pb_attributes(kvs: Any, limits: Limits) -> str | None:
    if len(kvs) > limits.max_attributes:
        return f"{len(kvs)} attributes; at most {limits.max_attributes} (serve.max_span_attributes)"
    for kv in kvs:
        problem = _pb_value(kv.value, limits, 0)
        if problem is not None:
            return f"attribute {kv.key[:100]!r}: {problem}"
    return None


def _pb_span(span: Any, limits: Limits) -> str | None:
    problem = _pb_attributes(span.attributes, limits)
    for n, event in enumerate(span.events):
        problem = problem or _located(f"events[{n}]", _pb_attributes(event.attributes, limits))
    for n, link in enumerate(span.links):
        problem = problem or _located(f"links[{n}]", _pb_attributes(link.attributes, limits))
    return problem


def _located(where: str, problem: str | None) -> str | None:
    return None if problem is None else f"{where}: {problem}"


def _bound_message(message: ExportTraceServiceRequest | TracesData, limits: Limits, refused: list[str]) -> None:
    for i, rs in enumerate(message.resource_spans):
        outer = _pb_attributes(rs.resource.attributes, limits)
        for j, ss in enumerate(rs.scope_spans):
            block = outer or _pb_attributes(ss.scope.attributes, limits)
            bad = []
            for k, span in enumerate(ss.spans):
                problem = block or _pb_span(span, limits)
                if problem is not None:
                    bad.append(k)
                    refused.append(f"resourceSpans[{i}].scopeSpans[{j}].spans[{k}]: {problem}")
            for k in reversed(bad):
                del ss.spans[k]


def _json_value(value: Any, limits: Limits, depth: int) -> str | None:
    if not isinstance(value, dict):
        return None
    if "arrayValue" in value:
        inner, key = value["arrayValue"], None  # its values are AnyValues
    elif "kvlistValue" in value:
        inner, key = value["kvlistValue"], "value"  # its values are KeyValues
    else:
        return None
    if depth >= limits.max_depth:
        return f"values nested deeper than {limits.max_depth} (serve.max_value_depth)"
    values = inner.get("values") if isinstance(inner, dict) else None
    if not isinstance(values, list):
        return None  # not OTLP: ParseDict names it
    if len(values) > limits.max_array_values:
        return f"{len(values)} values in one array; at most {limits.max_array_values} (serve.max_array_values)"
    for item in values:
        problem = _json_value(item.get(key) if key is not None and isinstance(item, dict) else item, limits, depth + 1)
        if problem is not None:
            return problem
    return None


def _json_attributes(owner: Any, limits: Limits) -> str | None:
    kvs = owner.get("attributes") if isinstance(owner, dict) else None
    if not isinstance(kvs, list):
        return None
    if len(kvs) > limits.max_attributes:
        return f"{len(kvs)} attributes; at most {limits.max_attributes} (serve.max_span_attributes)"
    for kv in kvs:
        if isinstance(kv, dict):
            problem = _json_value(kv.get("value"), limits, 0)
            if problem is not None:
                return f"attribute {str(kv.get('key'))[:100]!r}: {problem}"
    return None


def _json_span(span: Any, limits: Limits) -> str | None:
    problem = _json_attributes(span, limits)
    for field in ("events", "links"):
        items = span.get(field) if isinstance(span, dict) else None
        for n, item in enumerate(items if isinstance(items, list) else ()):
            problem = problem or _located(f"{field}[{n}]", _json_attributes(item, limits))
    return problem


def _items(owner: Any, field: str) -> list[Any]:
    items = owner.get(field) if isinstance(owner, dict) else None
    return items if isinstance(items, list) else []


def _bound_json(document: dict[str, Any], limits: Limits, refused: list[str]) -> None:
    for i, rs in enumerate(_items(document, "resourceSpans")):
        outer = _json_attributes(rs.get("resource") if isinstance(rs, dict) else None, limits)
        for j, ss in enumerate(_items(rs, "scopeSpans")):
            block = outer or _json_attributes(ss.get("scope") if isinstance(ss, dict) else None, limits)
            spans = _items(ss, "spans")
            keep = []
            for k, span in enumerate(spans):
                problem = block or _json_span(span, limits)
                if problem is None:
                    keep.append(span)
                else:
                    refused.append(f"resourceSpans[{i}].scopeSpans[{j}].spans[{k}]: {problem}")
            if len(keep) != len(spans):
                ss["spans"] = keep
