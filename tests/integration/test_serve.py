"""The scoring service on 127.0.0.1, fed by the real OTLP exporters (gRPC and HTTP) and exporting to a real OTLP
receiver (``otlp_receiver``): the scores it writes equal the in-process processor's for the same spans, a burst
over capacity is answered with retryable codes and delivered once the sender retries, bad bodies get 4xx and no
effect on valid ones, and SIGTERM exports everything accepted.

Every wait polls with a deadline; nothing talks to anything but 127.0.0.1.
"""

from __future__ import annotations

import gzip
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence

import httpx
import orjson
import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import (
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_toolcall_eval.config import EvalConfig
from otel_toolcall_eval.replay.otlp import encode_json
from otel_toolcall_eval.serve import Service
from otel_toolcall_eval.serve.metrics import RECEIVED, REJECTED_REQUESTS, REJECTED_SPANS, SCORED
from tests.helpers import DEMO_CONFIG, GatedExporter, agent_traces, config_for, free_port, plain_spans, wait_until

from .otlp_receiver import GrpcTraceReceiver, assert_same, by_id, wire

pytestmark = pytest.mark.integration

PROTOBUF = "application/x-protobuf"
JSON_TYPE = {"Content-Type": "application/json"}


@pytest.fixture
def service(receiver: GrpcTraceReceiver) -> Iterator[Service]:
    svc = Service(config_for(receiver))
    svc.start()
    yield svc
    svc.stop(timeout=10)


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_scores_equal_the_in_process_processor(protocol: str, receiver: GrpcTraceReceiver, service: Service) -> None:
    exporter: SpanExporter = (
        GrpcSpanExporter(endpoint=f"http://127.0.0.1:{service.grpc_port}", insecure=True)
        if protocol == "grpc"
        else HttpSpanExporter(endpoint=f"http://127.0.0.1:{service.http_port}/v1/traces")
    )
    reference = agent_traces(exporter, service.processor.config, traces=12, seed=11)
    scored = [s for s in reference if any(k.startswith("toolcall_eval.") for k in (s.attributes or {}))]
    assert len(scored) > 12 and any(
        (s.attributes or {}).get("toolcall_eval.trace.composite_ok") is False for s in scored
    )
    assert_same(receiver.wait_for_spans(len(reference)), wire(reference))


def test_json_and_gzip_over_http(receiver: GrpcTraceReceiver, service: Service) -> None:
    reference = agent_traces(None, service.processor.config, traces=3, seed=5)
    body = gzip.compress(orjson.dumps(encode_json(_without_scores_all(reference))))  # what the app sent
    answer = httpx.post(
        f"http://127.0.0.1:{service.http_port}/v1/traces",
        content=body,
        headers={"Content-Type": "application/json", "Content-Encoding": "gzip"},
        timeout=10,
    )
    assert answer.status_code == 200 and answer.json() == {}
    assert_same(receiver.wait_for_spans(len(reference)), wire(reference))


def _without_scores(span: ReadableSpan) -> ReadableSpan:
    from otel_toolcall_eval.online.enrich import with_attributes

    attrs = {k: v for k, v in (span.attributes or {}).items() if not k.startswith("toolcall_eval.")}
    return with_attributes(span, attrs)


def _raw_http(port: int, request: bytes, *, then_close: bool = False) -> int:
    """Send bytes as they are (no client fixes them up) and return the status of the answer; ``then_close``
    ends the sending side (a sender that stopped mid-body)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request)
        if then_close:
            sock.shutdown(socket.SHUT_WR)
        head = b""
        while b"\r\n" not in head:
            chunk = sock.recv(4096)
            if not chunk:
                break
            head += chunk
    return int(head.split(b" ", 2)[1])


def test_bad_payloads_are_refused_and_change_nothing(receiver: GrpcTraceReceiver) -> None:
    svc = Service(config_for(receiver, max_message_bytes=1024 * 1024))
    svc.start()
    try:
        url = f"http://127.0.0.1:{svc.http_port}"
        valid = encode_spans(_without_scores_all(agent_traces(None, svc.processor.config, traces=1, seed=2)))
        pb = {"Content-Type": "application/x-protobuf"}
        bomb = gzip.compress(b"\0" * (8 * 1024 * 1024))  # 8 MiB inflated from ~8 KiB
        cases: list[tuple[str, bytes, dict[str, str], int]] = [
            ("/v1/traces", b"\xff\xfe garbage \x00\x01", pb, 400),
            ("/v1/traces", valid.SerializeToString()[:-7], pb, 400),  # truncated protobuf
            ("/v1/traces", b"{not json", {"Content-Type": "application/json"}, 400),
            ("/v1/traces", b"[1, 2]", {"Content-Type": "application/json"}, 400),
            ("/v1/traces", valid.SerializeToString(), {"Content-Type": "text/plain"}, 415),
            ("/v1/traces", b"not gzip", {**pb, "Content-Encoding": "gzip"}, 400),
            ("/v1/traces", valid.SerializeToString(), {**pb, "Content-Encoding": "br"}, 415),
            ("/v1/traces", bomb, {**pb, "Content-Encoding": "gzip"}, 413),
            ("/v1/metrics", valid.SerializeToString(), pb, 404),
            ("/", b"", pb, 404),
        ]
        with httpx.Client(timeout=10) as client:
            for path, body, headers, status in cases:
                assert client.post(url + path, content=body, headers=headers).status_code == status, (path, headers)
            assert client.get(url + "/healthz").status_code == 200
            assert client.get(url + "/readyz").status_code == 200
        # a 100 MB body is refused from its Content-Length, before a byte of it is read
        big = b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\nContent-Length: 104857600\r\n\r\n"
        assert _raw_http(svc.http_port or 0, big) == 413
        assert _raw_http(svc.http_port or 0, b"POST /v1/traces HTTP/1.1\r\nHost: x\r\n\r\n") == 411
        assert svc.metrics.total(SCORED) == 0 and receiver.spans() == []
        assert svc.metrics.total(REJECTED_REQUESTS) == len(cases) + 2
        answer = httpx.post(url + "/v1/traces", content=valid.SerializeToString(), headers=pb, timeout=10)
        assert answer.status_code == 200
        count = sum(len(ss.spans) for rs in valid.resource_spans for ss in rs.scope_spans)
        assert len(receiver.wait_for_spans(count)) == count
    finally:
        svc.stop(timeout=10)


def _chunked(body: bytes, sizes: Sequence[int]) -> bytes:
    out, at = b"", 0
    for size in sizes:
        out += b"%x\r\n" % size + body[at : at + size] + b"\r\n"
        at += size
    return out + b"0\r\n\r\n"


def test_a_chunked_body_is_read_within_the_limit(receiver: GrpcTraceReceiver) -> None:
    """The OpenTelemetry JS exporters (exporter-trace-otlp-proto / -http) send ``Transfer-Encoding: chunked`` and no
    Content-Length: such a body is read chunk by chunk, never past ``max_message_bytes``."""
    svc = Service(config_for(receiver, max_message_bytes=64 * 1024))
    svc.start()
    try:
        port = svc.http_port or 0
        valid = encode_spans(_without_scores_all(agent_traces(None, svc.processor.config, traces=1, seed=4)))
        raw = valid.SerializeToString()
        head = b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"
        chunked = head + b"Transfer-Encoding: chunked\r\n\r\n"
        third = len(raw) // 3
        assert _raw_http(port, chunked + _chunked(raw, [third, third, len(raw) - 2 * third])) == 200
        count = sum(len(ss.spans) for rs in valid.resource_spans for ss in rs.scope_spans)
        assert len(receiver.wait_for_spans(count)) == count
        # refused, nothing scored: a chunk past the limit (unread), a bad chunk size, a cut body, another coding
        assert _raw_http(port, chunked + b"%x\r\n" % (65 * 1024)) == 413
        # chunks that each fit but together pass the limit (the second is announced, never read)
        assert _raw_http(port, chunked + _chunked(b"x" * 40_000, [40_000])[:-5] + b"%x\r\n" % 40_000) == 413
        assert _raw_http(port, chunked + b"zz\r\nabc\r\n0\r\n\r\n") == 400
        assert _raw_http(port, chunked + b"10\r\nabc", then_close=True) == 400
        assert _raw_http(port, head + b"Transfer-Encoding: gzip, chunked\r\n\r\n") == 501
        assert _raw_http(port, head + b"Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n") == 400
        assert svc.metrics.total(SCORED) == count
    finally:
        svc.stop(timeout=10)


def _without_scores_all(spans: Sequence[ReadableSpan]) -> list[ReadableSpan]:
    return [_without_scores(s) for s in spans]


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_overload_answers_retryable_and_the_retry_delivers(protocol: str, receiver: GrpcTraceReceiver) -> None:
    gated = GatedExporter(GrpcSpanExporter(endpoint=receiver.endpoint, insecure=True))
    limits = {"max_queue_spans": 4, "export": {"max_queue_spans": 4, "max_batch_spans": 4}}
    svc = Service(config_for(receiver, **limits), span_exporter=gated)
    svc.start()
    try:
        # 4 senders x 4 spans; held at once: 4 at the exporter + 4 with the scoring thread + 4 queued = 12 < 16.
        # Wait for 12 admitted, not just for the first refusal: a sender can be refused while the scoring thread
        # has yet to take a batch from the queue (the queue then empties again for a moment). Once 12 are in and
        # the exporter is held, nothing moves, so the probe below is refused whatever the threads' timing.
        batches = [plain_spans(4, seed) for seed in range(4)]
        results: queue.Queue[SpanExportResult] = queue.Queue()

        def send(spans: list[ReadableSpan]) -> None:
            exporter: SpanExporter = (
                GrpcSpanExporter(endpoint=f"http://127.0.0.1:{svc.grpc_port}", insecure=True, timeout=60)
                if protocol == "grpc"
                else HttpSpanExporter(endpoint=f"http://127.0.0.1:{svc.http_port}/v1/traces", timeout=60)
            )
            results.put(exporter.export(spans))
            exporter.shutdown()

        threads = [threading.Thread(target=send, args=(b,)) for b in batches]
        for t in threads:
            t.start()
        wait_until(lambda: svc.metrics.total(RECEIVED) >= 12, "12 spans admitted (the pipeline full)")
        wait_until(lambda: svc.metrics.total(REJECTED_SPANS, "queue_full") >= 4, "a request refused as queue_full")
        assert svc.metrics.total(RECEIVED) == 12
        base = f"http://127.0.0.1:{svc.http_port}"
        answer = httpx.post(
            base + "/v1/traces",
            content=encode_spans(plain_spans(2, 9)).SerializeToString(),
            headers={"Content-Type": "application/x-protobuf"},
            timeout=10,
        )
        assert (answer.status_code, answer.headers.get("retry-after")) == (429, "1")
        assert httpx.get(base + "/readyz", timeout=10).status_code == 503  # full: not ready
        assert httpx.get(base + "/healthz", timeout=10).status_code == 200  # but alive
        gated.gate.set()
        for t in threads:
            t.join(60)
        assert [results.get(timeout=1) for _ in threads] == [SpanExportResult.SUCCESS] * 4
        sent = {s.context.span_id.to_bytes(8, "big") for b in batches for s in b}
        wait_until(lambda: len(receiver.spans()) >= 16, "16 spans at the receiver")
        assert set(by_id(receiver.spans())) == sent  # each exactly once
    finally:
        gated.gate.set()
        svc.stop(timeout=10)


def test_bearer_token(receiver: GrpcTraceReceiver, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SERVE_TEST_TOKEN", "s3cret")
    svc = Service(config_for(receiver, bearer_token_env="SERVE_TEST_TOKEN"))
    svc.start()
    try:
        body = encode_spans(plain_spans(2, 0)).SerializeToString()
        url = f"http://127.0.0.1:{svc.http_port}/v1/traces"
        pb = {"Content-Type": "application/x-protobuf"}
        assert httpx.post(url, content=body, headers=pb, timeout=10).status_code == 401
        wrong = {**pb, "Authorization": "Bearer nope"}
        assert httpx.post(url, content=body, headers=wrong, timeout=10).status_code == 401
        grpc_bad = GrpcSpanExporter(endpoint=f"http://127.0.0.1:{svc.grpc_port}", insecure=True, timeout=5)
        assert grpc_bad.export(plain_spans(2, 1)) is SpanExportResult.FAILURE
        grpc_ok = GrpcSpanExporter(
            endpoint=f"http://127.0.0.1:{svc.grpc_port}", insecure=True, headers={"authorization": "Bearer s3cret"}
        )
        assert grpc_ok.export(plain_spans(2, 2)) is SpanExportResult.SUCCESS
        good = {**pb, "Authorization": "Bearer s3cret"}
        assert httpx.post(url, content=body, headers=good, timeout=10).status_code == 200
        assert len(receiver.wait_for_spans(4)) == 4
    finally:
        svc.stop(timeout=10)


def test_sigterm_exports_everything_accepted(receiver: GrpcTraceReceiver) -> None:
    cmd = [
        sys.executable,
        "-m",
        "otel_toolcall_eval.cli",
        "serve",
        "--config",
        str(DEMO_CONFIG),
        "--http-port",
        "0",
        "--grpc-port",
        "0",
        "--export-endpoint",
        receiver.endpoint,
        "--shutdown-timeout",
        "20",
        "--prometheus-port",
        str(prometheus_port := free_port()),
    ]
    env = {**os.environ, "COLUMNS": "400"}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    lines: queue.Queue[str] = queue.Queue()

    def read() -> None:
        for line in proc.stdout or ():
            lines.put(line)
        lines.put("")  # end of output

    threading.Thread(target=read, daemon=True).start()
    try:
        first = lines.get(timeout=60)
        ports = dict(part.split("=", 1) for part in first.split() if "=" in part)
        reference = agent_traces(
            HttpSpanExporter(endpoint=f"http://127.0.0.1:{ports['http']}/v1/traces"), EvalConfig.load(DEMO_CONFIG), 5, 3
        )  # returns after the service answered 200 to every batch
        scrape = httpx.get(f"http://127.0.0.1:{prometheus_port}/metrics", timeout=10).text
        received = [line for line in scrape.splitlines() if line.startswith("toolcall_eval_serve_spans_received_total")]
        assert received and float(received[0].rsplit(" ", 1)[1]) == len(reference)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0, proc.stderr.read() if proc.stderr else ""
        assert_same(receiver.spans(), wire(reference))
        stopped = [line for line in iter(lambda: lines.get(timeout=10), "") if line.startswith("stopped")]
        assert stopped and "lost 0" in stopped[0]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)


def test_a_trace_split_over_requests_gets_one_verdict(receiver: GrpcTraceReceiver, service: Service) -> None:
    """Per-trace state lives across requests, and each request is scored in end order whatever its span order."""
    reference = agent_traces(None, service.processor.config, traces=3, seed=8)
    unscored = _without_scores_all(reference)
    first, second = unscored[: len(unscored) // 2], unscored[len(unscored) // 2 :]
    assert {s.context.trace_id for s in first} & {s.context.trace_id for s in second}, "no trace is split"
    url = f"http://127.0.0.1:{service.http_port}/v1/traces"
    pb = {"Content-Type": "application/x-protobuf"}
    for part in (first, second):
        body = encode_spans(list(reversed(part))).SerializeToString()
        assert httpx.post(url, content=body, headers=pb, timeout=10).status_code == 200
    roots = [s for s in reference if s.parent is None]
    assert len(roots) == 3 and all("toolcall_eval.trace.composite_ok" in (s.attributes or {}) for s in roots)
    assert_same(receiver.wait_for_spans(len(reference)), wire(reference))


def test_grpc_message_over_the_limit_is_resource_exhausted(receiver: GrpcTraceReceiver) -> None:
    import grpc
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2_grpc import TraceServiceStub

    svc = Service(config_for(receiver, max_message_bytes=4096))
    svc.start()
    try:
        spans = [_without_scores(s) for s in plain_spans(2, 0)]
        big = encode_spans([_with_attribute(spans[0], "x" * 10_000), spans[1]])
        with grpc.insecure_channel(f"127.0.0.1:{svc.grpc_port}") as channel:
            stub = TraceServiceStub(channel)
            with pytest.raises(grpc.RpcError) as err:
                stub.Export(big, timeout=10)
            assert err.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
            stub.Export(encode_spans(spans), timeout=10)  # the next valid message is served
        assert len(receiver.wait_for_spans(2)) == 2
    finally:
        svc.stop(timeout=10)


def _with_attribute(span: ReadableSpan, value: str) -> ReadableSpan:
    from otel_toolcall_eval.online.enrich import with_attributes

    return with_attributes(span, {**(span.attributes or {}), "padding": value})


def test_service_metrics_go_through_the_meter_provider(receiver: GrpcTraceReceiver) -> None:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    reader = InMemoryMetricReader()
    svc = Service(config_for(receiver), meter_provider=MeterProvider(metric_readers=[reader]))
    svc.start()
    try:
        spans = plain_spans(3, 0)
        url = f"http://127.0.0.1:{svc.http_port}/v1/traces"
        pb = {"Content-Type": "application/x-protobuf"}
        assert (
            httpx.post(url, content=encode_spans(spans).SerializeToString(), headers=pb, timeout=10).status_code == 200
        )
        assert httpx.post(url, content=b"junk", headers=pb, timeout=10).status_code == 400
        receiver.wait_for_spans(3)
        wait_until(lambda: svc.metrics.total("toolcall_eval.serve.spans.exported", "ok") == 3, "the export count")
    finally:
        svc.stop(timeout=10)
    data = reader.get_metrics_data()
    points = {
        (m.name, tuple(sorted(p.attributes.items()))): p.value
        for rm in data.resource_metrics
        for sm in rm.scope_metrics
        for m in sm.metrics
        for p in m.data.data_points
        if hasattr(p, "value")  # counters and gauges (added_latency, a histogram, has its own test)
    }
    assert points[("toolcall_eval.serve.spans.received", (("protocol", "http"),))] == 3
    assert points[("toolcall_eval.serve.spans.scored", ())] == 3
    assert points[("toolcall_eval.serve.spans.exported", (("result", "ok"),))] == 3
    assert points[("toolcall_eval.serve.requests.rejected", (("reason", "bad_payload"),))] == 1
    assert points[("toolcall_eval.serve.queue.size", ())] == 0


def test_a_request_the_queue_can_never_take_is_refused_not_retried(receiver: GrpcTraceReceiver) -> None:
    import grpc
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2_grpc import TraceServiceStub

    svc = Service(config_for(receiver, max_queue_spans=4, export={"max_queue_spans": 4, "max_batch_spans": 4}))
    svc.start()
    try:
        six = encode_spans(plain_spans(6, 0))
        url = f"http://127.0.0.1:{svc.http_port}/v1/traces"
        pb = {"Content-Type": "application/x-protobuf"}
        assert httpx.post(url, content=six.SerializeToString(), headers=pb, timeout=10).status_code == 413
        with grpc.insecure_channel(f"127.0.0.1:{svc.grpc_port}") as channel:
            with pytest.raises(grpc.RpcError) as err:
                TraceServiceStub(channel).Export(six, timeout=10)
            assert err.value.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert svc.metrics.total(REJECTED_REQUESTS, "too_large") == 2 and svc.metrics.total(SCORED) == 0
        four = encode_spans(plain_spans(4, 1))
        assert httpx.post(url, content=four.SerializeToString(), headers=pb, timeout=10).status_code == 200
        assert len(receiver.wait_for_spans(4)) == 4
    finally:
        svc.stop(timeout=10)


def test_added_latency_is_recorded_per_exported_span(receiver: GrpcTraceReceiver) -> None:
    """``toolcall_eval.serve.added_latency``: one sample per span, from its request's arrival to the next hop's
    answer (no timing is asserted beyond its sign: speed is the benchmark's business)."""
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import HistogramDataPoint, InMemoryMetricReader

    from otel_toolcall_eval.serve.metrics import ADDED_LATENCY, EXPORTED

    reader = InMemoryMetricReader()
    svc = Service(config_for(receiver), meter_provider=MeterProvider(metric_readers=[reader]))
    svc.start()
    try:
        exporter = HttpSpanExporter(endpoint=f"http://127.0.0.1:{svc.http_port}/v1/traces")
        reference = agent_traces(exporter, svc.processor.config, traces=3, seed=8)
        receiver.wait_for_spans(len(reference))
        wait_until(lambda: svc.metrics.total(EXPORTED, "ok") == len(reference), "the export results")
        data = reader.get_metrics_data()
        assert data is not None
        points = [
            p
            for rm in data.resource_metrics
            for sm in rm.scope_metrics
            for m in sm.metrics
            if m.name == ADDED_LATENCY
            for p in m.data.data_points
        ]
        assert len(points) == 1 and isinstance(points[0], HistogramDataPoint)
        assert points[0].count == len(reference) and points[0].min >= 0 and points[0].sum > 0
        assert len(svc._arrivals) == 0  # every arrival was matched by its export
    finally:
        svc.stop(timeout=10)


def _with_invalid(seed: int) -> ExportTraceServiceRequest:
    """Three valid spans and two invalid ones: a trace id of 8 bytes, an all-zero span id."""
    message = encode_spans(plain_spans(3, seed))
    spans = message.resource_spans[0].scope_spans[0].spans
    bad = spans.add()
    bad.CopyFrom(spans[0])
    bad.trace_id = b"\x01" * 8
    worse = spans.add()
    worse.CopyFrom(spans[1])
    worse.span_id = b"\x00" * 8
    return message


def test_invalid_spans_are_refused_by_partial_success_and_the_rest_scored(receiver: GrpcTraceReceiver) -> None:
    """OTLP partial success: a request whose spans are partly invalid keeps the valid ones and says how many it
    refused (``partial_success.rejected_spans``), over both receivers and both encodings; a request with no valid
    span at all is still a 400."""
    import grpc
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2_grpc import TraceServiceStub

    svc = Service(config_for(receiver))
    svc.start()
    try:
        url = f"http://127.0.0.1:{svc.http_port}/v1/traces"
        message = _with_invalid(1)
        answer = httpx.post(url, content=message.SerializeToString(), headers={"Content-Type": PROTOBUF}, timeout=10)
        assert answer.status_code == 200
        response = ExportTraceServiceResponse.FromString(answer.content)
        assert response.partial_success.rejected_spans == 2
        assert "spans[3].traceId: 8 bytes" in response.partial_success.error_message  # the first, located
        document = encode_json(plain_spans(3, 2))
        json_spans = document["resourceSpans"][0]["scopeSpans"][0]["spans"]
        json_spans.append({**json_spans[0], "traceId": "0102"})
        as_json = httpx.post(url, content=orjson.dumps(document), headers=JSON_TYPE, timeout=10)
        assert as_json.status_code == 200 and int(as_json.json()["partialSuccess"]["rejectedSpans"]) == 1
        with grpc.insecure_channel(f"127.0.0.1:{svc.grpc_port}") as channel:
            reply = TraceServiceStub(channel).Export(_with_invalid(3), timeout=10)  # type: ignore[no-untyped-call]
        assert reply.partial_success.rejected_spans == 2
        assert len(receiver.wait_for_spans(9)) == 9  # the valid spans of the three requests, each once
        assert svc.metrics.total(REJECTED_SPANS, "invalid") == 5
        only_bad = _with_invalid(4)
        del only_bad.resource_spans[0].scope_spans[0].spans[:3]
        answer = httpx.post(url, content=only_bad.SerializeToString(), headers={"Content-Type": PROTOBUF}, timeout=10)
        assert answer.status_code == 400
    finally:
        svc.stop(timeout=10)


def test_serve_rolls_a_conversation_up_and_exports_its_verdict_as_an_otlp_log(receiver: GrpcTraceReceiver) -> None:
    """Two turns of one conversation reach the service in two requests (as one replica gets them when the
    Collector's load-balancing exporter routes on the conversation id); the session verdict is exported over OTLP
    logs to the same endpoint as the spans, at the latest when the service stops."""
    from otel_toolcall_eval import attributes as A

    from .otlp_receiver import attributes

    raw = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(raw))
    tracer = provider.get_tracer("agent")
    for city in ("Atlantis", "Atlantis"):  # the same failing call in both turns
        with tracer.start_as_current_span("invoke_agent", attributes={"gen_ai.operation.name": "invoke_agent"}):
            with tracer.start_as_current_span("chat", attributes={A.GEN_AI_CONVERSATION_ID: "conv-7"}):
                pass
            with tracer.start_as_current_span(
                "execute_tool get_weather",
                attributes={
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": "get_weather",
                    "gen_ai.tool.call.arguments": f'{{"city": "{city}"}}',
                    "error.type": "ValueError",
                },
            ):
                pass
    provider.shutdown()
    spans = list(raw.get_finished_spans())
    svc = Service(config_for(receiver))
    svc.start()
    try:
        url = f"http://127.0.0.1:{svc.http_port}/v1/traces"
        pb = {"Content-Type": "application/x-protobuf"}
        for turn in (spans[:3], spans[3:]):
            assert httpx.post(url, content=encode_spans(turn).SerializeToString(), headers=pb).status_code == 200
        receiver.wait_for_spans(len(spans))
    finally:
        svc.stop(timeout=10)
    (record,) = receiver.log_records()
    attrs = attributes(record.attributes)
    assert record.event_name == A.GEN_AI_EVALUATION_RESULT
    assert attrs[A.GEN_AI_CONVERSATION_ID] == "conv-7"
    assert (attrs[A.SESSION_TURNS], attrs[A.SESSION_ERRORS], attrs[A.SESSION_REPEATED_FAILURES]) == (2, 2, 1)
    assert attrs[A.GEN_AI_EVALUATION_SCORE_LABEL] == "fail"
    last_root = spans[-1]
    assert (record.trace_id, record.span_id) == (
        last_root.context.trace_id.to_bytes(16, "big"),
        last_root.context.span_id.to_bytes(8, "big"),
    )
