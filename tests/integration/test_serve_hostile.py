"""The scoring service under hostile and careless clients (issue 28), each finding reproduced with real parts:
real sockets on 127.0.0.1, the real gRPC server and client, the OpenTelemetry SDK's OTLP exporters as the
authorised senders, and a real gRPC next hop (``otlp_receiver``).

Every loop that an attacker runs here is bounded (a number of rounds or a deadline) and every wait polls with a
deadline, so a regression fails the test instead of hanging it.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import grpc
import httpx
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2_grpc import TraceServiceStub
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.sdk.trace.export import SpanExportResult

from otel_toolcall_eval.replay.otlp import encode_json
from otel_toolcall_eval.serve import Service
from otel_toolcall_eval.serve.decode import PROTOBUF
from otel_toolcall_eval.serve.metrics import RECEIVED, REJECTED_REQUESTS
from tests.helpers import GatedExporter, config_for, plain_spans, wait_until

from .otlp_receiver import GrpcTraceReceiver

pytestmark = pytest.mark.integration

TOKEN = "s3cret-token"
EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"


def _started(receiver: GrpcTraceReceiver, exporter: Any = None, **serve: Any) -> Service:
    svc = Service(config_for(receiver, **serve), span_exporter=exporter)
    svc.start()
    return svc


def _guarded(receiver: GrpcTraceReceiver, monkeypatch: pytest.MonkeyPatch, **serve: Any) -> Service:
    """A service that requires ``TOKEN``."""
    monkeypatch.setenv("SERVE_HOSTILE_TOKEN", TOKEN)
    return _started(receiver, bearer_token_env="SERVE_HOSTILE_TOKEN", **serve)


# --- finding 1: bounded work per request ----------------------------------------------------------------------


def _kv(key: str, value: AnyValue) -> KeyValue:
    return KeyValue(key=key, value=value)


def _nested(depth: int) -> AnyValue:
    value = AnyValue(string_value="leaf")
    for _ in range(depth):
        outer = AnyValue()
        outer.array_value.values.append(value)
        value = outer
    return value


def _oversized(shape: str) -> ExportTraceServiceRequest:
    """Two spans, the first over one structural limit of the service below (16 attributes, 16 values, depth 3)."""
    message = encode_spans(plain_spans(2, 7))
    span = message.resource_spans[0].scope_spans[0].spans[0]
    if shape == "attributes":
        span.attributes.extend(_kv(f"a{i}", AnyValue(string_value="x")) for i in range(200))
    elif shape == "array":
        many = AnyValue()
        many.array_value.values.extend(AnyValue(int_value=i) for i in range(100))
        span.attributes.append(_kv("many", many))
    elif shape == "event":
        event = span.events.add(name="e", time_unix_nano=span.start_time_unix_nano)
        event.attributes.extend(_kv(f"e{i}", AnyValue(bool_value=True)) for i in range(50))
    else:
        span.attributes.append(_kv("deep", _nested(6)))
    return message


LIMITS = {"max_span_attributes": 16, "max_array_values": 16, "max_value_depth": 3}
SETTING = {
    "attributes": "serve.max_span_attributes",
    "array": "serve.max_array_values",
    "event": "serve.max_span_attributes",
    "depth": "serve.max_value_depth",
}


@pytest.mark.parametrize("shape", ["attributes", "array", "event", "depth"])
@pytest.mark.parametrize("transport", ["http-json", "http-protobuf", "grpc"])
def test_a_span_over_the_structural_limits_is_refused_alone(
    transport: str, shape: str, receiver: GrpcTraceReceiver
) -> None:
    """Finding 1 (per request): a span with too many attributes (on itself or an event), an array with too many
    values or values nested too deep is refused by OTLP partial success, naming the setting; its neighbour is
    scored and forwarded."""
    svc = _started(receiver, **LIMITS)
    try:
        message = _oversized(shape)
        good = message.resource_spans[0].scope_spans[0].spans[1].span_id
        url = f"http://127.0.0.1:{svc.http_port}/v1/traces"
        if transport == "http-json":
            answer = httpx.post(
                url,
                content=orjson.dumps(_as_json(message)),
                headers={"Content-Type": "application/json"},
                timeout=10,
            )
            assert answer.status_code == 200, answer.text
            partial = answer.json()["partialSuccess"]
            rejected, reason = int(partial["rejectedSpans"]), partial["errorMessage"]
        elif transport == "http-protobuf":
            answer = httpx.post(
                url, content=message.SerializeToString(), headers={"Content-Type": PROTOBUF}, timeout=10
            )
            assert answer.status_code == 200
            response = ExportTraceServiceResponse.FromString(answer.content)
            rejected, reason = response.partial_success.rejected_spans, response.partial_success.error_message
        else:
            with grpc.insecure_channel(f"127.0.0.1:{svc.grpc_port}") as channel:
                response = TraceServiceStub(channel).Export(message, timeout=10)  # type: ignore[no-untyped-call]
            rejected, reason = response.partial_success.rejected_spans, response.partial_success.error_message
        assert rejected == 1
        assert SETTING[shape] in reason and "spans[0]" in reason
        arrived = receiver.wait_for_spans(1)
        assert [s.span.span_id for s in arrived] == [good]
    finally:
        svc.stop(timeout=10)


def _as_json(message: ExportTraceServiceRequest) -> dict[str, Any]:
    from google.protobuf import json_format

    document: dict[str, Any] = json_format.MessageToDict(message)
    for rs in document["resourceSpans"]:  # OTLP JSON: hex ids, not protobuf's base64
        for ss in rs["scopeSpans"]:
            for span in ss["spans"]:
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        import base64

                        span[key] = base64.b64decode(span[key]).hex()
    return document


def _stalled_body(port: int, length: int, content_type: str = "application/json") -> socket.socket:
    """An authorised request whose headers and first bytes are in and whose body then stops: it holds its share
    of the in-flight memory until the test sends the rest (or closes it)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    head = (
        f"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: {content_type}\r\n"
        f"Authorization: Bearer {TOKEN}\r\nContent-Length: {length}\r\n\r\n"
    )
    sock.sendall(head.encode() + b"{")
    return sock


def _answer(sock: socket.socket) -> bytes:
    data = b""
    deadline = time.monotonic() + 10
    while b"\r\n\r\n" not in data and time.monotonic() < deadline:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    return data


def test_requests_in_flight_are_bounded_in_bytes(receiver: GrpcTraceReceiver, monkeypatch: pytest.MonkeyPatch) -> None:
    """Finding 1 (in total): while requests in flight hold ``max_inflight_bytes``, the next is refused with the
    retryable answer (HTTP 503 + Retry-After, gRPC UNAVAILABLE + RetryInfo); the SDK's exporter retries and
    delivers once the memory is given back; the budget's high-water mark stays within the bound."""
    limit = 1024 * 1024
    svc = _guarded(receiver, monkeypatch, max_inflight_bytes=limit)
    try:
        document = encode_json(plain_spans(3, 1))
        body = orjson.dumps(document)
        stalled = _stalled_body(svc.http_port or 0, limit - 1000)  # holds all but 1000 bytes of the budget
        try:
            wait_until(lambda: svc.intake.inflight.used >= limit - 1000, "the stalled body's reservation")
            answer = httpx.post(
                f"http://127.0.0.1:{svc.http_port}/v1/traces",
                content=body,
                headers={"Content-Type": "application/json", "Authorization": f"Bearer {TOKEN}"},
                timeout=10,
            )
            assert (answer.status_code, answer.headers.get("retry-after")) == (503, "1"), answer.text
            with grpc.insecure_channel(f"127.0.0.1:{svc.grpc_port}") as channel:
                with pytest.raises(grpc.RpcError) as err:
                    TraceServiceStub(channel).Export(  # type: ignore[no-untyped-call]
                        encode_spans(plain_spans(2, 2)), metadata=(("authorization", f"Bearer {TOKEN}"),), timeout=10
                    )
            assert err.value.code() is grpc.StatusCode.UNAVAILABLE
            assert any(key == "google.rpc.retryinfo-bin" for key, _ in err.value.trailing_metadata() or ())
            # the SDK's exporter, retrying on its own, is refused while the stalled request holds the memory
            refused = svc.metrics.total(REJECTED_REQUESTS, "memory_busy")
            sender = HttpSpanExporter(
                endpoint=f"http://127.0.0.1:{svc.http_port}/v1/traces",
                headers={"Authorization": f"Bearer {TOKEN}"},
                timeout=30,
            )
            spans = plain_spans(4, 3)
            result: list[SpanExportResult] = []
            thread = threading.Thread(target=lambda: result.append(sender.export(spans)))
            thread.start()
            wait_until(lambda: svc.metrics.total(REJECTED_REQUESTS, "memory_busy") > refused, "the SDK refused")
        finally:
            stalled.close()  # the stalled request ends (a short body): its reservation is given back
        thread.join(30)
        assert result == [SpanExportResult.SUCCESS]
        sender.shutdown()
        assert svc.intake.inflight.peak <= limit
        wait_until(lambda: svc.intake.inflight.used == 0, "every reservation given back")
        receiver.wait_for_spans(4)
        # a request that alone would need more than the bound can never be taken: refused, not retried
        bomb = [{"key": f"a{i}", "value": {"stringValue": "x"}} for i in range(20_000)]
        document["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["attributes"] = bomb
        answer = httpx.post(
            f"http://127.0.0.1:{svc.http_port}/v1/traces",
            content=orjson.dumps(document),  # ~0.9 MB: fits max_message_bytes, not its decoding's estimate
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {TOKEN}"},
            timeout=10,
        )
        assert answer.status_code == 413 and "serve.max_inflight_bytes" in answer.text
        assert svc.intake.inflight.peak <= limit
    finally:
        svc.stop(timeout=10)


# --- finding 2: queues bounded in bytes -----------------------------------------------------------------------


def _one_big_span(seed: int, size: int) -> bytes:
    message = encode_spans(plain_spans(1, seed))
    message.resource_spans[0].scope_spans[0].spans[0].attributes.append(
        _kv("payload", AnyValue(string_value="x" * size))
    )
    return message.SerializeToString()


def test_the_queue_is_bounded_in_bytes(receiver: GrpcTraceReceiver) -> None:
    """Finding 2: with a next hop that does not answer, one-span requests of 100 KB fill ``max_queue_bytes``
    (256 KiB here) long before ``max_queue_spans``: the next is answered 429 with Retry-After, and once the next hop answers every accepted span is forwarded and the sender's retry is taken."""
    gated = GatedExporter(GrpcSpanExporter(endpoint=receiver.endpoint, insecure=True))
    svc = _started(receiver, gated, max_queue_bytes=256 * 1024)
    try:
        url = f"http://127.0.0.1:{svc.http_port}/v1/traces"
        statuses = []
        for seed in range(8):  # bounded: 8 x 100 KB against 256 KiB
            answer = httpx.post(
                url, content=_one_big_span(seed, 100_000), headers={"Content-Type": PROTOBUF}, timeout=10
            )
            statuses.append((answer.status_code, answer.headers.get("retry-after")))
        accepted = statuses.count((200, None))
        assert accepted == 2, statuses  # 2 x 100 KB fit in 256 KiB; the third does not
        assert statuses[accepted:] == [(429, "1")] * (8 - accepted)
        assert svc.intake.held.peak <= 256 * 1024
        gated.gate.set()
        receiver.wait_for_spans(2)
        wait_until(lambda: svc.intake.held.used == 0, "the exported spans' bytes given back")
        answer = httpx.post(url, content=_one_big_span(99, 100_000), headers={"Content-Type": PROTOBUF}, timeout=10)
        assert answer.status_code == 200
        receiver.wait_for_spans(3)
    finally:
        gated.gate.set()
        svc.stop(timeout=10)


# --- finding 3: HTTP slowloris ---------------------------------------------------------------------------------


class _Dripper:
    """``count`` connections each sending a request head one byte per ``every`` seconds, for at most ``rounds``
    rounds; records when the service closed each one."""

    def __init__(self, port: int, count: int, every: float, rounds: int) -> None:
        self.socks = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(count)]
        self.closed_after: list[float] = []
        self._every, self._rounds = every, rounds
        self._head = b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nX-Padding: " + b"a" * 1000
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._started = time.monotonic()
        self._thread.start()

    def _run(self) -> None:
        live = list(self.socks)
        for n in range(self._rounds):
            if not live:
                return
            for sock in list(live):
                try:
                    sock.sendall(self._head[n : n + 1])
                except OSError:
                    live.remove(sock)
                    self.closed_after.append(time.monotonic() - self._started)
            time.sleep(self._every)

    def join(self) -> None:
        self._thread.join(60)
        for sock in self.socks:
            sock.close()


def test_slowloris_does_not_hold_the_request_slots(
    receiver: GrpcTraceReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Finding 3: 12 connections dripping a header byte every 0.2 s (more than the 2 request slots and the 8
    pending ones) neither hold a slot nor keep an authorised sender (the SDK's HTTP exporter) from delivering; each
    drip is cut off by the head's deadline (1 s here) or closed to make room, not left for the 30 s of a per-read
    timeout."""
    svc = _guarded(
        receiver, monkeypatch, max_concurrent_requests=2, max_pending_connections=8, head_timeout_seconds=1.0
    )
    try:
        dripper = _Dripper(svc.http_port or 0, count=12, every=0.2, rounds=40)  # at most 8 s of dripping
        try:
            time.sleep(0.5)  # every drip connection is in and sending
            sender = HttpSpanExporter(
                endpoint=f"http://127.0.0.1:{svc.http_port}/v1/traces",
                headers={"Authorization": f"Bearer {TOKEN}"},
                timeout=5,
            )
            spans = plain_spans(3, 5)
            assert sender.export(spans) is SpanExportResult.SUCCESS
            sender.shutdown()
            receiver.wait_for_spans(3)
            wait_until(lambda: len(dripper.closed_after) == 12, "every drip connection closed", timeout=10)
            assert max(dripper.closed_after) < 4.0  # the head deadline (1 s), not the drip's 8 s
        finally:
            dripper.join()
        assert svc.metrics.total(REJECTED_REQUESTS, "timeout") + svc.metrics.total(REJECTED_REQUESTS, "evicted") >= 12
    finally:
        svc.stop(timeout=10)


def test_a_slow_body_is_cut_off_at_the_request_deadline(
    receiver: GrpcTraceReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Finding 3 (body): an authorised request whose body drips is answered by the request deadline (1 s here),
    not kept for as long as it drips."""
    svc = _guarded(receiver, monkeypatch, request_timeout_seconds=1.0)
    try:
        sock = _stalled_body(svc.http_port or 0, 10_000)
        started = time.monotonic()
        try:
            for _ in range(40):  # at most 8 s of dripping
                try:
                    sock.sendall(b" ")
                except OSError:
                    break
                if sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) if _readable(sock) else False:
                    break
                time.sleep(0.2)
            assert time.monotonic() - started < 4.0
        finally:
            sock.close()
        wait_until(lambda: svc.metrics.total(REJECTED_REQUESTS, "timeout") == 1, "the timeout counted")
    finally:
        svc.stop(timeout=10)


def _readable(sock: socket.socket) -> bool:
    import select

    return bool(select.select([sock], [], [], 0)[0])


# --- finding 4: gRPC calls that never send their message -----------------------------------------------------


def _silent_calls(port: int, count: int, metadata: tuple[tuple[str, str], ...] = ()) -> tuple[Any, list[Any]]:
    """``count`` Export calls that send their headers and never a message (a request stream that stays open)."""
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    never = threading.Event()

    def nothing() -> Iterator[bytes]:
        never.wait(30)  # bounded: the stream ends by itself after 30 s
        return
        yield b""

    call = channel.stream_unary(EXPORT, request_serializer=lambda b: b, response_deserializer=lambda b: b)
    futures = [call.future(nothing(), metadata=metadata) for _ in range(count)]
    return (channel, never), futures


def test_grpc_calls_without_a_message_do_not_block_an_authorised_sender(
    receiver: GrpcTraceReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Finding 4: 40 calls that send headers (no token) and never a message are refused UNAUTHENTICATED at once
    (the interceptor, before any handler waits), so the SDK's gRPC exporter with the token still delivers; 6
    authorised calls that never send are cancelled server-side at ``request_timeout_seconds`` (1 s here)."""
    svc = _guarded(receiver, monkeypatch, max_concurrent_requests=8, request_timeout_seconds=1.0)
    (channel, never), futures = _silent_calls(svc.grpc_port or 0, 40)
    try:
        for future in futures:
            with pytest.raises(grpc.RpcError) as err:
                future.result(timeout=15)  # at once: well before the silent streams' own end (30 s)
            assert err.value.code() is grpc.StatusCode.UNAUTHENTICATED
        sender = GrpcSpanExporter(
            endpoint=f"http://127.0.0.1:{svc.grpc_port}", insecure=True, headers={"authorization": f"Bearer {TOKEN}"}
        )
        assert sender.export(plain_spans(3, 6)) is SpanExportResult.SUCCESS
        sender.shutdown()
        receiver.wait_for_spans(3)
        (channel2, never2), authorised = _silent_calls(
            svc.grpc_port or 0, 6, metadata=(("authorization", f"Bearer {TOKEN}"),)
        )
        try:
            started = time.monotonic()
            for future in authorised:
                with pytest.raises(grpc.RpcError) as err:
                    future.result(timeout=20)
                assert err.value.code() is grpc.StatusCode.CANCELLED
            assert time.monotonic() - started < 15.0  # the server's 1 s, not the silent streams' own 30 s
        finally:
            never2.set()
            channel2.close()
        wait_until(lambda: svc.metrics.total(REJECTED_REQUESTS, "timeout") == 6, "6 calls counted timed out")
        assert svc.metrics.total(RECEIVED) == 3
    finally:
        never.set()
        channel.close()
        svc.stop(timeout=10)


# --- finding 5: one deadline for the whole stop -----------------------------------------------------------------


class _BlackHole:
    """A next hop that stopped answering: connections are taken by the kernel (listen backlog) and never read."""

    def __init__(self) -> None:
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(64)
        self.endpoint = f"http://127.0.0.1:{self._sock.getsockname()[1]}"

    def close(self) -> None:
        self._sock.close()


def test_sigterm_ends_within_the_shutdown_timeout_with_the_summary(tmp_path: Any) -> None:
    """Finding 5: with a next hop that accepts connections and never answers (export timeout 10 s, the default),
    SIGTERM ends the real ``serve`` process within ``--shutdown-timeout 2`` plus start-up slack, exit 1, with the
    summary line counting every accepted span as lost (none was acknowledged)."""
    import os
    import signal
    import subprocess
    import sys

    from tests.helpers import DEMO_CONFIG

    hole = _BlackHole()
    cmd = [sys.executable, "-m", "otel_toolcall_eval.cli", "serve", "--config", str(DEMO_CONFIG)]
    cmd += ["--http-port", "0", "--grpc-port", "0", "--export-endpoint", hole.endpoint, "--shutdown-timeout", "2"]
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "COLUMNS": "400"}
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        ports = dict(part.split("=", 1) for part in first.split() if "=" in part)
        sender = HttpSpanExporter(endpoint=f"http://127.0.0.1:{ports['http']}/v1/traces", timeout=10)
        spans = plain_spans(6, 8)
        assert sender.export(spans) is SpanExportResult.SUCCESS  # accepted: the service's to deliver
        sender.shutdown()
        time.sleep(0.5)  # the export to the black hole is under way
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=30)
        elapsed = time.monotonic() - started
        out = proc.stdout.read()
        assert code == 1, (out, proc.stderr.read() if proc.stderr else "")
        assert elapsed < 4.0, f"the stop took {elapsed:.1f}s against a deadline of 2s"
        summary = [line for line in out.splitlines() if line.startswith("stopped:")]
        assert summary and "received 6," in summary[0] and "exported 0," in summary[0] and "lost 6" in summary[0]
        assert "deadline" in summary[0]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        hole.close()


# --- finding 9: a late next hop is not loss ---------------------------------------------------------------------


def test_a_next_hop_answering_after_the_export_timeout_is_not_counted_as_loss(receiver: GrpcTraceReceiver) -> None:
    """Finding 9: a next hop that records the batch and answers 1.5 s later than asked (export timeout 1 s) has the
    spans; the stop report counts them as timed out (delivery unknown), not failed and not lost, and says so."""
    receiver.delay = 1.5
    svc = _started(receiver, export={"timeout_seconds": 1.0})
    try:
        sender = HttpSpanExporter(endpoint=f"http://127.0.0.1:{svc.http_port}/v1/traces", timeout=10)
        assert sender.export(plain_spans(3, 9)) is SpanExportResult.SUCCESS
        sender.shutdown()
        receiver.wait_for_spans(3)  # the next hop has them, whatever it answers
    finally:
        report = svc.stop(timeout=10)
    assert (report.received, report.exported, report.export_failed, report.lost) == (3, 0, 0, 0)
    assert report.export_timed_out >= 3
    assert not report.complete
    line = report.summary()
    assert "export timed out" in line and "may have them" in line and "lost 0" in line


# --- fuzz target: the HTTP request head (and what follows it) ---------------------------------------------------

_TOKEN_CHARS = "".join(chr(c) for c in range(0x21, 0x7F))
_HEADER = st.one_of(
    st.tuples(st.sampled_from(["Content-Length", "content-length", "CONTENT-LENGTH"]), st.sampled_from(
        ["0", "5", "-1", "1e3", " 7 ", "99999999999999999999", "0x10", "", "3, 3"])),
    st.tuples(st.sampled_from(["Transfer-Encoding", "transfer-encoding"]), st.sampled_from(
        ["chunked", "Chunked", "gzip, chunked", "identity", "chunked, chunked", ""])),
    st.tuples(st.just("Content-Type"), st.sampled_from(
        ["application/json", "application/x-protobuf", "application/json; charset=utf-8", "text/plain", ""])),
    st.tuples(st.just("Content-Encoding"), st.sampled_from(["gzip", "deflate", "br", "identity", "gzip, gzip"])),
    st.tuples(st.just("Authorization"), st.sampled_from(
        [f"Bearer {TOKEN}", f"bearer {TOKEN}", "Bearer", "Bearer  ", "Basic eA==", f"Bearer {TOKEN}x", ""])),
    st.tuples(st.text(_TOKEN_CHARS, min_size=1, max_size=20), st.text(max_size=40)),
    st.tuples(st.just("X-Long"), st.just("a" * 70_000)),
)  # fmt: skip
_LINE = st.one_of(
    st.builds(
        lambda method, path, version: f"{method} {path} {version}",
        st.sampled_from(["POST", "GET", "PUT", "HEAD", "OPTIONS", "post", "", "P\x00ST"]),
        st.sampled_from(["/v1/traces", "/healthz", "/readyz", "/v1/traces?x=1", "*", "", "/" + "a" * 70_000]),
        st.sampled_from(["HTTP/1.1", "HTTP/1.0", "HTTP/2.0", "HTTP/1.1 extra", "", "HTTP/x"]),
    ),
    st.text(max_size=60),
)
_HEAD = st.builds(
    lambda line, headers, newline, body: (
        (line + newline + "".join(f"{k}: {v}{newline}" for k, v in headers) + newline).encode("utf-8", "replace") + body
    ),
    _LINE,
    st.lists(_HEADER, max_size=6),
    st.sampled_from(["\r\n", "\n", "\r"]),
    st.one_of(st.binary(max_size=300), st.just(b"5\r\nhello\r\n0\r\n\r\n"), st.just(b"ffffffff\r\n")),
) | st.binary(max_size=500)
_ANSWERS = {200, 400, 401, 404, 405, 408, 411, 413, 414, 415, 429, 431, 501, 503, 505}


def test_fuzzed_request_heads_get_a_4xx_or_an_answer_and_change_nothing(
    receiver: GrpcTraceReceiver, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Fuzz target for the HTTP head parser and what follows a head (body framing, the token, the limits), against
    the live service over real sockets: every answer is one of the documented statuses (never a 500, never a
    traceback), no connection thread fails on anything but the socket, nothing is left holding a slot or memory,
    and an authorised sender is served afterwards. Bounded: 150 examples, each sent whole then half-closed."""
    import logging

    svc = _guarded(receiver, monkeypatch, head_timeout_seconds=1.0, request_timeout_seconds=1.0, max_message_bytes=4096)
    caplog.set_level(logging.DEBUG, logger="otel_toolcall_eval.serve")
    port = svc.http_port or 0
    statuses: set[int] = set()

    @settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(_HEAD)
    def one(request: bytes) -> None:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            try:
                sock.sendall(request)
                sock.shutdown(socket.SHUT_WR)
            except OSError:
                pass  # the service closed first (it answered, or the head was refused): read what it said
            data = b""
            try:
                while chunk := sock.recv(65536):
                    data += chunk
            except OSError:
                pass
        if data:  # nothing: closed unanswered (a head cut short by the half-close, or over a limit)
            assert data.startswith(b"HTTP/1."), data[:200]  # a status line, whatever the request line was
            status = int(data.split(b" ", 2)[1])
            assert status in _ANSWERS, data[:200]
            statuses.add(status)

    try:
        one()
        assert len(statuses) >= 4, statuses  # the examples reached the parser's several answers, not one
        wait_until(lambda: svc.intake.inflight.used == 0, "every in-flight reservation given back")
        failures = [r for r in caplog.records if r.exc_info and not isinstance(r.exc_info[1], OSError)]
        assert not failures, failures[0].exc_info
        sender = HttpSpanExporter(
            endpoint=f"http://127.0.0.1:{port}/v1/traces", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10
        )
        assert sender.export(plain_spans(2, 11)) is SpanExportResult.SUCCESS
        sender.shutdown()
        assert httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=10).status_code == 200
    finally:
        svc.stop(timeout=10)


# --- done when: every attack at once --------------------------------------------------------------------------


def test_an_authorised_sender_is_served_under_every_attack_at_once(
    receiver: GrpcTraceReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The issue's "done when": drip connections, silent gRPC calls without the token, an authorised but careless
    client sending JSON bombs and oversized spans, all at once (each attacker bounded: ~4 s); meanwhile the SDK's
    gRPC and HTTP exporters with the token deliver every span exactly once, the memory budgets never pass their
    bounds, and the stop ends within its timeout with every accepted span accounted for."""
    limit, held = 4 * 1024 * 1024, 1024 * 1024
    svc = _guarded(
        receiver,
        monkeypatch,
        max_concurrent_requests=4,
        max_pending_connections=8,
        head_timeout_seconds=1.0,
        request_timeout_seconds=2.0,
        max_inflight_bytes=limit,
        max_queue_bytes=held,
        max_span_attributes=64,
    )
    stop = threading.Event()
    base = f"http://127.0.0.1:{svc.http_port}/v1/traces"
    auth = {"Authorization": f"Bearer {TOKEN}"}

    def careless() -> None:
        bomb = encode_json(plain_spans(2, 20))
        bomb["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["attributes"] = [
            {"key": f"a{i}", "value": {"stringValue": "x"}} for i in range(2_000)
        ]
        body = orjson.dumps(bomb)
        with httpx.Client(timeout=10) as client:
            for seed in range(200):  # bounded; stops earlier with the others
                if stop.is_set():
                    return
                client.post(base, content=body, headers={**auth, "Content-Type": "application/json"})
                client.post(
                    base, content=_one_big_span(100 + seed, 200_000), headers={**auth, "Content-Type": PROTOBUF}
                )

    dripper = _Dripper(svc.http_port or 0, count=16, every=0.2, rounds=20)
    (channel, never), silent = _silent_calls(svc.grpc_port or 0, 40)
    attackers = [threading.Thread(target=careless) for _ in range(3)]
    for thread in attackers:
        thread.start()
    try:
        time.sleep(0.3)
        grpc_sender = GrpcSpanExporter(
            endpoint=f"http://127.0.0.1:{svc.grpc_port}", insecure=True, headers={"authorization": f"Bearer {TOKEN}"},
            timeout=30,
        )  # fmt: skip
        http_sender = HttpSpanExporter(endpoint=base, headers=auth, timeout=30)
        sent = []
        for n in range(4):
            for sender in (grpc_sender, http_sender):
                spans = plain_spans(3, 200 + 2 * n + (sender is http_sender))
                assert sender.export(spans) is SpanExportResult.SUCCESS
                sent.extend(span.context.span_id.to_bytes(8, "big") for span in spans)
        grpc_sender.shutdown()
        http_sender.shutdown()
    finally:
        stop.set()
        for thread in attackers:
            thread.join(30)
        dripper.join()
        never.set()
        channel.close()
    wait_until(lambda: set(sent) <= {s.span.span_id for s in receiver.spans()}, "every authorised span forwarded")
    started = time.monotonic()
    report = svc.stop(timeout=5)
    assert time.monotonic() - started < 6.0 and not report.overran
    ours = [s.span.span_id for s in receiver.spans() if s.span.span_id in set(sent)]
    assert sorted(ours) == sorted(sent)  # each exactly once
    assert svc.intake.inflight.peak <= limit
    assert svc.intake.held.peak <= held + 250_000  # the queue takes one request when it holds nothing
    assert report.lost == 0 and report.export_failed == 0 and report.exported == report.received
    assert all(f.exception(timeout=10) is not None for f in silent)  # every silent call refused
    assert svc.metrics.total(REJECTED_REQUESTS, "unauthenticated") >= 40
