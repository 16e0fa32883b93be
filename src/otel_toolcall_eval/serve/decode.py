"""Request bodies to spans: OTLP/HTTP protobuf or JSON, identity, gzip or deflate; every failure one exception.

Decompression is bounded (``max_bytes`` of output, so a small gzip bomb cannot take the memory), and decoding
goes through ``replay.otlp``, the one path from OTLP messages to ``ReadableSpan``.
"""

from __future__ import annotations

import zlib

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
    message: ExportTraceServiceRequest | TracesData, max_spans: int, invalid: list[str] | None
) -> list[ReadableSpan]:
    """The spans, once their number is known to fit the queue: a request the queue can never take is refused
    before a Python object is built per span (retrying it would not help: 413 / INVALID_ARGUMENT).

    With ``invalid``, invalid spans are skipped and described there (OTLP partial success); a request none of
    whose spans is valid is still refused whole."""
    count = sum(len(ss.spans) for rs in message.resource_spans for ss in rs.scope_spans)
    if count > max_spans:
        raise BadPayload(f"{count} spans in one request; at most {max_spans} (serve.max_queue_spans)", 413)
    spans = list(spans_from_request(message, invalid))
    if invalid and not spans:
        raise BadPayload(f"no valid span: {invalid[0]}")
    if not invalid:  # every span decoded, in order: the export can re-send what arrived (``serve.encode``)
        remember(message, spans)
    return spans


def decode_spans(
    body: bytes, content_type: str | None, max_spans: int, invalid: list[str] | None = None
) -> list[ReadableSpan]:
    kind = media_type(content_type)
    try:
        if kind == PROTOBUF:
            message = ExportTraceServiceRequest()
            message.ParseFromString(body)
            return _counted(message, max_spans, invalid)
        if kind == JSON:
            obj = orjson.loads(body)
            if not isinstance(obj, dict):
                raise BadPayload("an OTLP JSON body is an object with resourceSpans")
            return _counted(request_from_json(obj), max_spans, invalid)
    except BadPayload:
        raise
    except Exception as exc:  # noqa: BLE001 - protobuf, JSON and span errors alike mean a bad body
        raise BadPayload(f"not a valid OTLP {kind} trace request ({type(exc).__name__})") from None
    raise BadPayload(f"unsupported Content-Type {kind[:60]!r}: use {PROTOBUF} or {JSON}", 415)


def spans_from_message(
    message: ExportTraceServiceRequest, max_spans: int, invalid: list[str] | None = None
) -> list[ReadableSpan]:
    """The gRPC receiver's path (gRPC has decoded and decompressed the message already)."""
    try:
        return _counted(message, max_spans, invalid)
    except BadPayload:
        raise
    except Exception as exc:  # noqa: BLE001
        raise BadPayload(f"not a valid OTLP trace request ({type(exc).__name__})") from None
