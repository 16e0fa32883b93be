"""Fuzz targets for the scoring service's decoders (issue 28): OTLP/JSON and protobuf bodies, random bytes, OTLP-shaped
documents with random nesting, sizes and types, and corrupted protobuf. Whatever arrives, decoding returns spans or
raises ``BadPayload`` (an HTTP 4xx / gRPC INVALID_ARGUMENT), never another exception; every span it returns keeps
within the structural limits; the memory estimate the receivers reserve is never below what the decoding uses.
Bounded: a fixed number of examples each, a few seconds in all (the HTTP head parser's fuzz target runs against a
live service in tests/integration/test_serve_hostile.py).
"""

from __future__ import annotations

import base64
import tracemalloc
from typing import Any

import orjson
import pytest
from google.protobuf import json_format
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from otel_toolcall_eval.serve.decode import JSON, PROTOBUF, BadPayload, Limits, decode_spans, estimate

LIMITS = Limits(max_attributes=8, max_array_values=6, max_depth=3)
FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

_SCALAR = st.one_of(
    st.builds(lambda s: {"stringValue": s}, st.text(max_size=20)),
    st.builds(lambda b: {"boolValue": b}, st.booleans()),
    st.builds(lambda i: {"intValue": str(i)}, st.integers(-(2**63), 2**63 - 1)),
    st.builds(lambda f: {"doubleValue": f}, st.floats(allow_nan=False, allow_infinity=False)),
    st.builds(lambda b: {"bytesValue": base64.b64encode(b).decode()}, st.binary(max_size=8)),
    st.just({}),
)
_VALUE = st.recursive(
    _SCALAR,
    lambda inner: st.one_of(
        st.builds(lambda vs: {"arrayValue": {"values": vs}}, st.lists(inner, max_size=9)),
        st.builds(
            lambda kvs: {"kvlistValue": {"values": kvs}},
            st.lists(st.builds(lambda k, v: {"key": k, "value": v}, st.text(max_size=5), inner), max_size=9),
        ),
    ),
    max_leaves=12,
)
_ATTRIBUTES = st.lists(st.builds(lambda k, v: {"key": k, "value": v}, st.text(max_size=8), _VALUE), max_size=10)
_HEX16 = st.binary(min_size=16, max_size=16).map(bytes.hex)
_HEX8 = st.binary(min_size=8, max_size=8).map(bytes.hex)
_SPAN = st.fixed_dictionaries(
    {
        "traceId": st.one_of(_HEX16, st.just("00" * 16), st.just("0102")),
        "spanId": st.one_of(_HEX8, st.just("00" * 8)),
        "name": st.text(max_size=10),
        "startTimeUnixNano": st.integers(0, 2**63).map(str),
        "endTimeUnixNano": st.integers(0, 2**63).map(str),
        "attributes": _ATTRIBUTES,
    },
    optional={
        "parentSpanId": _HEX8,
        "kind": st.integers(0, 5),
        "events": st.lists(st.fixed_dictionaries({"name": st.text(max_size=5), "attributes": _ATTRIBUTES}), max_size=2),
        "links": st.lists(
            st.fixed_dictionaries({"traceId": _HEX16, "spanId": _HEX8, "attributes": _ATTRIBUTES}), max_size=1
        ),
        "status": st.fixed_dictionaries({"code": st.integers(0, 2)}),
    },
)
_DOCUMENT = st.builds(
    lambda resource, scope, spans: {
        "resourceSpans": [
            {
                "resource": {"attributes": resource},
                "scopeSpans": [{"scope": {"name": "fuzz", "attributes": scope}, "spans": spans}],
            }
        ]
    },
    st.lists(st.builds(lambda k, v: {"key": k, "value": v}, st.text(max_size=5), _SCALAR), max_size=10),
    st.lists(st.builds(lambda k, v: {"key": k, "value": v}, st.text(max_size=5), _SCALAR), max_size=3),
    st.lists(_SPAN, min_size=1, max_size=3),
)


def _depth(value: Any) -> int:
    if isinstance(value, tuple):
        return 1 + max((_depth(v) for v in value), default=0)
    return 0


def _decode(body: bytes, kind: str) -> tuple[list[Any], list[str]] | None:
    """The spans and the refusals, or None when the body was refused whole (``BadPayload``)."""
    invalid: list[str] = []
    try:
        return decode_spans(body, kind, 1_000, invalid, LIMITS), invalid
    except BadPayload:
        return None


def _within_limits(spans: list[Any]) -> None:
    for span in spans:
        owners = [span.attributes, *(e.attributes for e in span.events), *(link.attributes for link in span.links)]
        for attributes in owners:
            assert len(attributes or {}) <= LIMITS.max_attributes
            for value in (attributes or {}).values():
                assert _depth(value) <= LIMITS.max_depth  # a kvlist becomes JSON text: its depth is checked before
                if isinstance(value, tuple):
                    assert len(value) <= LIMITS.max_array_values


@FUZZ
@given(_DOCUMENT)
def test_an_otlp_shaped_json_document_decodes_or_is_refused(document: dict[str, Any]) -> None:
    body = orjson.dumps(document)
    total = len(document["resourceSpans"][0]["scopeSpans"][0]["spans"])
    decoded = _decode(body, JSON)
    assert estimate(body, JSON) >= len(body)
    if decoded is not None:
        spans, invalid = decoded
        assert len(spans) + len(invalid) == total  # every span kept or refused with a reason, none silently
        _within_limits(spans)


@FUZZ
@given(_DOCUMENT, st.data())
def test_protobuf_bodies_whole_and_corrupted_decode_or_are_refused(document: dict[str, Any], data: Any) -> None:
    message = ExportTraceServiceRequest()
    for rs in document["resourceSpans"]:  # protobuf's JSON mapping wants base64 ids
        for span in rs["scopeSpans"][0]["spans"]:
            for key in ("traceId", "spanId", "parentSpanId"):
                if key in span:
                    span[key] = base64.b64encode(bytes.fromhex(span[key])).decode()
            for link in span.get("links", ()):
                for key in ("traceId", "spanId"):
                    link[key] = base64.b64encode(bytes.fromhex(link[key])).decode()
    json_format.ParseDict(document, message)
    body = message.SerializeToString()
    decoded = _decode(body, PROTOBUF)
    if decoded is not None:
        _within_limits(decoded[0])
    if body:  # the same bytes, corrupted: flipped, cut or grown
        at = data.draw(st.integers(0, len(body) - 1))
        corrupted = data.draw(
            st.sampled_from(
                [
                    body[:at] + bytes([body[at] ^ 0xFF]) + body[at + 1 :],
                    body[:at],
                    body + body[at:],
                    body[:at] + b"\xff" * 10 + body[at:],
                ]
            )
        )
        decoded = _decode(corrupted, PROTOBUF)
        if decoded is not None:
            _within_limits(decoded[0])


@FUZZ
@given(st.binary(max_size=2_000), st.sampled_from([JSON, PROTOBUF, "text/plain", ""]))
def test_random_bytes_decode_or_are_refused(body: bytes, kind: str) -> None:
    decoded = _decode(body, kind)
    assert estimate(body, kind) >= len(body)
    if decoded is not None:
        _within_limits(decoded[0])


def _attributes_body(count: int, size: int, nested: int = 0) -> bytes:
    value: dict[str, Any] = {"stringValue": "x" * size}
    for _ in range(nested):
        value = {"arrayValue": {"values": [value, value]}}
    attributes = [{"key": f"a{i}", "value": value} for i in range(count)]
    span = {"traceId": "0af7651916cd43dd8448eb211c80319c", "spanId": "b7ad6b7169203331", "name": "s"}
    return orjson.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [{**span, "attributes": attributes}]}]}]})


@pytest.mark.parametrize(
    ("count", "size", "nested", "kind"),
    [
        (5_000, 1, 0, JSON),  # the amplification: small attributes, ~23x their size
        (50, 20_000, 0, JSON),  # big strings: orjson's peak ~13x their size
        (500, 3, 3, JSON),  # nested arrays
        (5_000, 1, 0, PROTOBUF),
        (50, 20_000, 0, PROTOBUF),
    ],
)
def test_the_memory_estimate_covers_what_decoding_uses(count: int, size: int, nested: int, kind: str) -> None:
    """What a request reserves of ``max_inflight_bytes`` (``estimate``) is at least what decoding it allocates at its
    peak (tracemalloc), for the shapes that amplify most; limits high enough that nothing is refused early."""
    body = _attributes_body(count, size, nested)
    if kind == PROTOBUF:
        message = ExportTraceServiceRequest()
        json_format.Parse(body.replace(b'"0af7651916cd43dd8448eb211c80319c"', b'"CvdlGRbNQ92ESOshHIAxnA=="')
                          .replace(b'"b7ad6b7169203331"', b'"t61rcWkgMzE="'), message)  # fmt: skip
        body = message.SerializeToString()
    tracemalloc.start()
    try:
        spans = decode_spans(body, kind, 10, [], Limits(max_attributes=100_000, max_array_values=100, max_depth=10))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(spans) == 1
    assert peak <= estimate(body, kind), f"peak {peak:,} > estimate {estimate(body, kind):,} for {len(body):,} bytes"
