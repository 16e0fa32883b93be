"""Recognise and read a recorded-trace file, whatever wrote it.

- the Collector ``file`` exporter: OTLP JSON lines, or ``format: proto`` (length-prefixed protobuf); with
  ``compression: zstd`` in both of its layouts: each message a zstd frame behind a 4-byte length (the default),
  or the whole file one zstd stream (the ``exporter.file.nativeCompression`` feature gate);
- plain OTLP JSON (an ``ExportTraceServiceRequest`` / ``TracesData`` object) and protobuf;
- Jaeger's JSON (UI download, ``/api/traces`` response); Tempo's trace-by-id JSON.

Files are untrusted. Line-based layouts (JSON lines, length-prefixed messages, zstd streams) are read one
record at a time, never whole, in time linear in the input; a whole-file document is read only up to
``ReadLimits.max_record_bytes``. Every record counts, empty ones included: ``ReadLimits.max_empty_records``
records in a row that hold no span end the read (a file of zeros is an endless run of empty length-prefixed
messages), and a file in which nothing decodes to a span is a ``ReplayInputError`` (``file: holds no trace``),
never an empty replay that exits 0.
Every record is validated as it is decoded (``otlp``, ``jaeger``), and a bad one is a ``ReplayInputError``
naming the file, the line or message, the field and what is wrong; ``strict=False`` (``--lenient``) skips
the record instead and keeps every other one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from itertools import chain
from pathlib import Path
from typing import IO, Any

import orjson
from google.protobuf.message import DecodeError
from opentelemetry.proto.trace.v1 import trace_pb2
from opentelemetry.sdk.trace import ReadableSpan

from otel_toolcall_eval import _json
from otel_toolcall_eval.replay.errors import RecordError, ReplayInputError
from otel_toolcall_eval.replay.jaeger import spans_from_jaeger
from otel_toolcall_eval.replay.otlp import request_from_json, spans_from_request
from otel_toolcall_eval.replay.streams import (
    ZSTD_MAGIC,
    Budget,
    ReadLimits,
    RecordTooLarge,
    StreamError,
    inflate,
    inflating,
    lines,
    messages,
    prefixed,
    too_large,
)

__all__ = ["ReadLimits", "ReadReport", "RecordError", "ReplayInputError", "read_file", "spans_from_document"]

DEFAULT_LIMITS = ReadLimits()


@dataclass
class ReadReport:
    spans: list[ReadableSpan] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    format: str = ""


def spans_from_document(obj: Any) -> list[ReadableSpan]:
    """One parsed JSON document of any supported shape, all its spans or a ``RecordError``."""
    if _json.too_deep(obj):  # every decoder below walks it recursively
        raise RecordError("", f"nested deeper than {_json.MAX_DEPTH} levels")
    try:
        if isinstance(obj, dict) and ("data" in obj or ("spans" in obj and "traceID" in obj)):
            return list(spans_from_jaeger(obj))
        if isinstance(obj, dict) and ({"resourceSpans", "batches", "trace"} & set(obj)):
            return list(spans_from_request(request_from_json(obj)))
    except RecursionError:  # a last guard; the depth check above keeps the walks shallow
        raise RecordError("", "nested too deeply to decode") from None
    keys = sorted(obj)[:5] if isinstance(obj, dict) else type(obj).__name__
    raise RecordError("", f"not OTLP JSON or Jaeger JSON (top-level keys: {keys})")


def _spans_from_message(body: bytes) -> list[ReadableSpan]:
    message = trace_pb2.TracesData()
    try:
        message.ParseFromString(body)
    except (DecodeError, RecursionError) as exc:
        raise RecordError("", f"not an OTLP protobuf message: {exc}") from None
    return list(spans_from_request(message))


def read_file(path: str | Path, *, strict: bool = True, limits: ReadLimits = DEFAULT_LIMITS) -> ReadReport:
    path = Path(path)
    try:
        handle = open(path, "rb")  # noqa: SIM115 - closed below
    except OSError as exc:
        raise ReplayInputError(f"{path}: cannot read: {exc.strerror}") from None
    reader = _Reader(path, strict, limits)
    try:
        with handle:
            reader.read(handle)
    except StreamError as exc:
        raise ReplayInputError(f"{path}: {exc}") from None
    except OSError as exc:
        raise ReplayInputError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if not reader.report.spans:
        raise ReplayInputError(f"{path}: holds no trace: {reader.nothing()}")
    return reader.report


class _Reader:
    def __init__(self, path: Path, strict: bool, limits: ReadLimits) -> None:
        self.path = path
        self.strict = strict
        self.limits = limits
        self.budget = Budget(limits.max_decompressed_bytes)
        self.report = ReadReport()
        self.records = 0  # every record read, blank and empty ones included
        self.empty_run = 0  # records in a row that held no span

    def nothing(self) -> str:
        """What was read, for a file in which nothing decoded to a span."""
        if not self.records:
            return "the file is empty"
        what = f"{self.records:,} record{'s' if self.records != 1 else ''}"
        kind = f" read as {self.report.format}" if self.report.format else ""
        skipped = f" ({len(self.report.errors):,} skipped as unreadable)" if self.report.errors else ""
        return f"{what}{kind}, none with a span{skipped}"

    def _empty(self, where: str) -> None:
        """One more record that held no span; past ``max_empty_records`` in a row, not a trace file."""
        self.empty_run += 1
        if self.empty_run > self.limits.max_empty_records:
            at = f" (to {where})" if where else ""
            raise StreamError(f"not a trace file: {self.limits.max_empty_records:,} records in a row{at} hold no span")

    def read(self, handle: IO[bytes]) -> None:
        head = handle.read(8)
        if head[:4] == ZSTD_MAGIC:  # native compression: one stream (possibly several frames) over the file
            self._plain(inflating(prefixed(head, handle), self.budget))
            self.report.format += "+zstd"
        elif head[4:8] == ZSTD_MAGIC:  # the default layout: every message one zstd frame behind its length
            self._framed_zstd(prefixed(head, handle))
        else:
            self._plain(prefixed(head, handle))

    def _plain(self, stream: IO[bytes]) -> None:
        head = stream.read(64)  # read, not peeked: a decompressing stream's first read may be one byte
        stream = prefixed(head, stream)
        first = head.lstrip()[:1]
        if first in (b"{", b"[") or not head.strip():
            self._json(stream)
        elif head[:1] == b"\x0a":  # a plain TracesData starts with field 1's tag; a framed file with a length
            self.report.format = "otlp-proto"
            body = stream.read(self.limits.max_record_bytes + 1)
            if len(body) > self.limits.max_record_bytes:
                raise StreamError(f"a protobuf message: {too_large(self.limits)}")
            self._record("", partial(_spans_from_message, body))
        else:
            self.report.format = "otlp-proto-file"
            try:
                for index, offset, body in messages(stream, self.limits):
                    if not body:  # an empty message holds nothing: counted, not decoded
                        self.records += 1
                        if self.empty_run >= self.limits.max_empty_records:
                            self._empty(f"message {index} (byte {offset})")
                        self.empty_run += 1
                        continue
                    self._record(f"message {index} (byte {offset})", partial(_spans_from_message, body))
            except StreamError as exc:
                if exc.framing:
                    raise StreamError(f"not a length-prefixed OTLP protobuf file: {exc}") from None
                raise

    def _framed_zstd(self, stream: IO[bytes]) -> None:
        kind = ""
        try:
            for index, offset, frame in messages(stream, self.limits):
                where = f"message {index} (byte {offset})"
                try:
                    body = inflate(frame, self.budget, self.limits)
                except RecordTooLarge as exc:
                    self._bad(where, str(exc))
                    continue
                except StreamError as exc:
                    if "inflates past" in str(exc):
                        raise
                    raise StreamError(f"{where}: {exc}") from None
                is_json = body.lstrip()[:1] in (b"{", b"[")
                kind = kind or ("otlp-jsonl+zstd" if is_json else "otlp-proto-file+zstd")
                decode = partial(_json_record if is_json else _spans_from_message, body)
                self._record(where, decode)
        except StreamError as exc:
            if exc.framing:
                raise StreamError(f"not a length-prefixed zstd file: {exc}") from None
            raise
        self.report.format = kind or "otlp-proto-file+zstd"

    def _json(self, stream: IO[bytes]) -> None:
        """JSON lines, or one document over the whole file. Lines when the first or second non-blank line is
        JSON by itself (a bad first line does not hide the good ones) and there are two; one document
        otherwise (a pretty-printed one, or a file of one line)."""
        numbered = lines(stream, self.limits)
        peeked: list[tuple[int, bytes | None]] = []
        for number, line in numbered:
            self.records += 1
            if line is None or line.strip():
                peeked.append((number, line))
                if len(peeked) == 2:
                    break
            else:
                self._empty(f"line {number}")
        parsed = [_parses(line) for _, line in peeked]
        single = len(peeked) == 1 and peeked[0][1] is not None
        if single or (len(peeked) == 2 and not any(parsed) and None not in (line for _, line in peeked)):
            self._document(peeked, stream)
            return
        self.report.format = "otlp-jsonl"
        self.records -= len(peeked)  # counted again below
        for number, line in chain(peeked, numbered):
            self.records += 1
            if line is None:
                self._bad(f"{number}", too_large(self.limits), line_number=True)
            elif line.strip():
                self._record(str(number), partial(_json_record, line), line_number=True)
            else:
                self._empty(f"line {number}")

    def _document(self, peeked: list[tuple[int, bytes | None]], stream: IO[bytes]) -> None:
        """The whole file as one document (bounded); when it is not one either, its lines, each reported."""
        self.records = 0  # one document, or its lines counted again below
        start = b"".join(line for _, line in peeked if line is not None)
        rest = stream.read(self.limits.max_record_bytes + 1 - len(start))
        data = start + rest
        if len(data) > self.limits.max_record_bytes:
            raise StreamError(f"a JSON document: {too_large(self.limits)}")
        try:
            document = orjson.loads(data)
        except orjson.JSONDecodeError:
            # not one document either: the lines of what was read, each reported on its own
            self.report.format = "otlp-jsonl"
            for number, line in enumerate(data.splitlines(), start=peeked[0][0]):
                self.records += 1
                if line.strip():
                    self._record(str(number), partial(_json_record, line), line_number=True)
                else:
                    self._empty(f"line {number}")
            return
        self.report.format = "jaeger-json" if isinstance(document, dict) and "data" in document else "otlp-json"
        self._record("", partial(spans_from_document, document))

    def _record(self, where: str, decode: Callable[[], list[ReadableSpan]], *, line_number: bool = False) -> None:
        """Decode one record: its spans all go in, or (a ``RecordError``) none do and the error is reported."""
        if not line_number:
            self.records += 1  # a line was counted as it was read
        try:
            spans = decode()
        except RecordError as exc:
            self._bad(where, str(exc)[:300], line_number=line_number)
            return
        if spans:
            self.empty_run = 0
            self.report.spans.extend(spans)
        else:
            self._empty(f"line {where}" if line_number else where)

    def _bad(self, where: str, what: str, *, line_number: bool = False) -> None:
        if not where:
            message = f"{self.path}: {what}"
        elif line_number:
            message = f"{self.path}:{where}: {what}"
        else:
            message = f"{self.path}: {where}: {what}"
        if self.strict or not where:  # a whole-file document has nothing else to go on with
            raise ReplayInputError(message)
        self.report.errors.append(message)
        self._empty(f"line {where}" if line_number else where)


def _parses(line: bytes | None) -> bool:
    if line is None:
        return False
    try:
        orjson.loads(line)
    except orjson.JSONDecodeError:
        return False
    return True


def _json_record(text: bytes) -> list[ReadableSpan]:
    return spans_from_document(_loads(text))


def _loads(text: bytes) -> Any:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError as exc:  # also JSON nested deeper than orjson's 1,024 levels
        raise RecordError("", f"not valid JSON: {exc}") from None
