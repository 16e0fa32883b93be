"""Recognise and read a recorded-trace file, whatever wrote it.

- the Collector ``file`` exporter: OTLP JSON lines, or ``format: proto`` (length-prefixed protobuf); with
  ``compression: zstd`` in both of its layouts: each message a zstd frame behind a 4-byte length (the default),
  or the whole file one zstd stream (the ``exporter.file.nativeCompression`` feature gate);
- plain OTLP JSON (an ``ExportTraceServiceRequest`` / ``TracesData`` object) and protobuf;
- Jaeger's JSON (UI download, ``/api/traces`` response); Tempo's trace-by-id JSON.
Errors name the file and line; a bad line does not lose the good ones before it (``strict=False``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from google.protobuf.message import DecodeError
from opentelemetry.proto.trace.v1 import trace_pb2
from opentelemetry.sdk.trace import ReadableSpan

from otel_toolcall_eval.errors import ToolcallEvalError
from otel_toolcall_eval.replay.jaeger import JaegerFormatError, spans_from_jaeger
from otel_toolcall_eval.replay.otlp import (
    decode_length_prefixed,
    length_prefixed,
    request_from_json,
    spans_from_request,
)


class ReplayInputError(ToolcallEvalError, ValueError):
    """A recorded-trace file that cannot be read; the message names the file and line."""


@dataclass
class ReadReport:
    spans: list[ReadableSpan] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    format: str = ""


def spans_from_document(obj: Any) -> Iterator[ReadableSpan]:
    """One parsed JSON document of any supported shape."""
    if isinstance(obj, dict) and ("data" in obj or ("spans" in obj and "traceID" in obj)):
        yield from spans_from_jaeger(obj)
    elif isinstance(obj, dict) and ({"resourceSpans", "batches", "trace"} & set(obj)):
        yield from spans_from_request(request_from_json(obj))
    else:
        keys = sorted(obj)[:5] if isinstance(obj, dict) else type(obj).__name__
        raise ReplayInputError(f"not OTLP JSON or Jaeger JSON (top-level keys: {keys})")


ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


def read_file(path: str | Path, *, strict: bool = True) -> ReadReport:
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ReplayInputError(f"{path}: cannot read: {exc.strerror}") from None
    report = ReadReport()
    compression = ""
    if data[:4] == ZSTD_MAGIC or data[4:8] == ZSTD_MAGIC:
        data, compression = _decompress(path, data), "+zstd"
    head = data.lstrip()[:1]
    if head in (b"{", b"["):
        _read_json(path, data, report, strict)
    else:
        _read_proto(path, data, report)
    report.format += compression
    return report


def _decompress(path: Path, data: bytes) -> bytes:
    """A zstd-compressed file exporter file, as the uncompressed file exporter would have written it."""
    try:
        import zstandard
    except ImportError:
        raise ReplayInputError(
            f"{path}: zstd-compressed; reading it needs the zstandard package: pip install 'otel-toolcall-eval[zstd]'"
        ) from None
    try:
        if data[:4] == ZSTD_MAGIC:  # native compression: one stream (possibly several frames) over the whole file
            with zstandard.ZstdDecompressor().stream_reader(data, read_across_frames=True) as reader:
                return reader.read()
        # the default layout: every message compressed on its own, each frame behind its 4-byte length
        messages = [zstandard.ZstdDecompressor().decompressobj().decompress(frame) for frame in length_prefixed(data)]
    except zstandard.ZstdError as exc:
        raise ReplayInputError(f"{path}: corrupt zstd data: {exc}") from None
    except ValueError as exc:
        raise ReplayInputError(f"{path}: not a length-prefixed zstd file: {exc}") from None
    if all(m.lstrip()[:1] in (b"{", b"[") for m in messages):
        return b"\n".join(messages) + b"\n"  # JSON messages: the JSON lines the exporter writes uncompressed
    return b"".join(len(m).to_bytes(4, "big") + m for m in messages)


def _read_json(path: Path, data: bytes, report: ReadReport, strict: bool) -> None:
    try:
        document = orjson.loads(data)
    except orjson.JSONDecodeError:
        document = None
    if document is not None:  # one JSON document
        report.format = "jaeger-json" if isinstance(document, dict) and "data" in document else "otlp-json"
        try:
            report.spans.extend(spans_from_document(document))
        except (ReplayInputError, JaegerFormatError, ValueError) as exc:
            raise ReplayInputError(f"{path}: {exc}") from None
        return
    report.format = "otlp-jsonl"
    for number, line in enumerate(data.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            report.spans.extend(spans_from_document(orjson.loads(line)))
        except (orjson.JSONDecodeError, ReplayInputError, JaegerFormatError, ValueError) as exc:
            message = f"{path}:{number}: {str(exc)[:200]}"
            if strict:
                raise ReplayInputError(message) from None
            report.errors.append(message)


def _read_proto(path: Path, data: bytes, report: ReadReport) -> None:
    # A plain TracesData starts with field 1's tag (0x0A); the file exporter's frames with a length
    # whose first byte is 0 for any message under 16 MiB.
    if data[:1] != b"\x0a":
        try:
            report.spans.extend(s for m in decode_length_prefixed(data) for s in spans_from_request(m))
            report.format = "otlp-proto-file"
            return
        except (ValueError, DecodeError) as exc:
            raise ReplayInputError(f"{path}: not a length-prefixed OTLP protobuf file: {exc}") from None
    message = trace_pb2.TracesData()
    try:
        message.ParseFromString(data)
    except DecodeError as exc:
        raise ReplayInputError(f"{path}: neither JSON nor OTLP protobuf: {exc}") from None
    report.format = "otlp-proto"
    report.spans.extend(spans_from_request(message))
