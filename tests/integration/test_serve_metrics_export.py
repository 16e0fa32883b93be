"""The service's metrics pushed over OTLP (``serve.metrics_export``) to real OTLP metrics receivers made in the
test: a ``grpc.server`` serving ``MetricsService/Export`` and an HTTP server decoding the
``ExportMetricsServiceRequest`` of ``POST /v1/metrics`` (``otlp_receiver``), plaintext or TLS (certificates from
``tls_certs``). Agent traces go in through the real SDK exporters; the receiver gets the service's own counters and
the processor's with the totals of what was sent, periodically and once more at shutdown; a dead metrics receiver
costs the shutdown nothing beyond its deadline, and the spans are delivered all the same.

Only 127.0.0.1 is contacted.
"""

from __future__ import annotations

import os
import queue
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.metrics.v1.metrics_pb2 import AggregationTemporality

from otel_toolcall_eval import attributes as A
from otel_toolcall_eval.online import metrics as M
from otel_toolcall_eval.serve import Service
from otel_toolcall_eval.serve.metrics import ADDED_LATENCY, EXPORTED, QUEUE_SIZE, RECEIVED, SCORED
from tests.helpers import agent_exporter, agent_traces, config_for, free_port, plain_spans

from .otlp_receiver import GrpcTraceReceiver, HttpTraceReceiver, _Collector, attributes, tls_sink
from .tls_certs import Pki

pytestmark = pytest.mark.integration

Series = tuple[str, tuple[tuple[str, Any], ...]]  # metric name, its data point's attributes (sorted)


def points(requests: list[ExportMetricsServiceRequest]) -> Iterator[tuple[dict[str, Any], str, Series, float, int]]:
    """Every data point received, in order: resource attributes, scope name, series, value (a histogram's count),
    aggregation temporality (0 for a gauge)."""
    for request in requests:
        for rm in request.resource_metrics:
            resource = attributes(rm.resource.attributes)
            for sm in rm.scope_metrics:
                for metric in sm.metrics:
                    kind = metric.WhichOneof("data")
                    data = getattr(metric, kind)
                    temporality = getattr(data, "aggregation_temporality", 0)
                    for point in data.data_points:
                        series = (metric.name, tuple(sorted(attributes(point.attributes).items())))
                        if kind == "histogram":
                            value = float(point.count)
                        else:
                            value = float(getattr(point, point.WhichOneof("value")))
                        yield resource, sm.scope.name, series, value, temporality


def latest(rx: _Collector) -> dict[Series, float]:
    """Each series' last value (cumulative temporality: the totals at the last export)."""
    return {series: value for _, _, series, value, _ in points(rx.metric_requests())}


def total(values: dict[Series, float], name: str, **labels: str) -> float:
    return sum(v for (n, attrs), v in values.items() if n == name and set(labels.items()) <= set(attrs))


def metrics_service(sink: GrpcTraceReceiver, endpoint: str, protocol: str, **metrics: Any) -> Service:
    section = {"endpoint": endpoint, "protocol": protocol, "interval_seconds": 0.2, **metrics}
    svc = Service(config_for(sink, metrics_export=section))
    svc.start()
    return svc


def metrics_endpoint(rx: GrpcTraceReceiver | HttpTraceReceiver) -> str:
    return rx.endpoint if isinstance(rx, GrpcTraceReceiver) else rx.base


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_the_service_and_processor_metrics_reach_an_otlp_receiver(protocol: str) -> None:
    sink = GrpcTraceReceiver()  # the scored spans' next hop
    rx: GrpcTraceReceiver | HttpTraceReceiver = GrpcTraceReceiver() if protocol == "grpc" else HttpTraceReceiver()
    svc = metrics_service(sink, metrics_endpoint(rx), protocol)
    try:
        assert svc.metrics_hop is not None and svc.metrics_hop.mode == "off"
        reference = agent_traces(agent_exporter(svc), svc.processor.config, traces=8, seed=41)
        sink.wait_for_spans(len(reference))
        # a periodic export, before any shutdown, already carries every exported span
        rx.wait_for(lambda: total(latest(rx), EXPORTED, result="ok") == len(reference), 20, "the exported total")
    finally:
        report = svc.stop(timeout=10)
        sink.close()
        rx.close()
    assert report.complete
    last, sent = latest(rx), len(reference)
    assert total(last, RECEIVED, protocol="grpc") == total(last, SCORED) == total(last, EXPORTED, result="ok") == sent
    assert total(last, EXPORTED, result="failed") == 0 and total(last, QUEUE_SIZE) == 0
    assert total(last, ADDED_LATENCY) == sent  # the histogram's count: one sample per span
    # the processor's own metrics, through the same MeterProvider
    roots = [s for s in reference if s.parent is None]
    failed = [s for s in roots if (s.attributes or {}).get(A.TRACE_COMPOSITE_OK) is False]
    calls = [s for s in reference if A.OUTCOME in (s.attributes or {})]
    assert total(last, M.TRACES) == len(roots) == 8
    assert total(last, M.TRACES, composite_ok="false") == len(failed) > 0
    assert total(last, M.TOOL_CALLS) == len(calls) > 0
    (resource, *_), scopes = next(points(rx.metric_requests())), {p[1] for p in points(rx.metric_requests())}
    assert resource["service.name"] == "otel-toolcall-eval" and resource["service.instance.id"]
    assert {"otel_toolcall_eval", "otel_toolcall_eval.serve"} <= scopes
    assert {p[4] for p in points(rx.metric_requests()) if p[2][0] == RECEIVED} == {
        AggregationTemporality.AGGREGATION_TEMPORALITY_CUMULATIVE
    }


def test_delta_temporality_sends_increments_that_add_up_to_the_totals(monkeypatch: pytest.MonkeyPatch) -> None:
    """``temporality: delta``: each export carries what was counted since the last one (the gauge stays a level);
    the increments add up to what was sent, the last one exported at shutdown. ``OTEL_RESOURCE_ATTRIBUTES`` names
    the replica."""
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "service.instance.id=replica-7")
    sink, rx = GrpcTraceReceiver(), HttpTraceReceiver()
    svc = metrics_service(sink, rx.base, "http", temporality="delta")
    try:
        first = agent_traces(agent_exporter(svc), svc.processor.config, traces=3, seed=42)
        sink.wait_for_spans(len(first))
        rx.wait_for(lambda: total(deltas(rx), EXPORTED, result="ok") == len(first), 20, "the first increments")
        second = agent_traces(agent_exporter(svc), svc.processor.config, traces=4, seed=43)
        sink.wait_for_spans(len(first) + len(second))
    finally:
        assert svc.stop(timeout=10).complete
        sink.close()
        rx.close()
    sums = deltas(rx)
    assert total(sums, RECEIVED) == total(sums, EXPORTED, result="ok") == len(first) + len(second)
    assert total(sums, M.TRACES) == 7
    temporalities = {(p[2][0], p[4]) for p in points(rx.metric_requests())}
    assert (RECEIVED, AggregationTemporality.AGGREGATION_TEMPORALITY_DELTA) in temporalities
    assert (RECEIVED, AggregationTemporality.AGGREGATION_TEMPORALITY_CUMULATIVE) not in temporalities
    assert (QUEUE_SIZE, 0) in temporalities  # a gauge
    assert {p[0]["service.instance.id"] for p in points(rx.metric_requests())} == {"replica-7"}


def deltas(rx: _Collector) -> dict[Series, float]:
    """Each counter series summed over every export (delta temporality)."""
    sums: dict[Series, float] = {}
    for _, _, series, value, temporality in points(rx.metric_requests()):
        if temporality == AggregationTemporality.AGGREGATION_TEMPORALITY_DELTA:
            sums[series] = sums.get(series, 0.0) + value
    return sums


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_metrics_reach_a_mutual_tls_receiver_with_the_headers(
    protocol: str, pki: Pki, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``serve.metrics_export.tls`` and headers, built as the span export's are: the CA file is what is trusted
    (``REQUESTS_CA_BUNDLE`` points at a CA that signed nothing here), the client certificate is shown."""
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(pki.other_ca))
    monkeypatch.delenv("CURL_CA_BUNDLE", raising=False)
    monkeypatch.setenv("METRICS_API_KEY", "m-456")
    sink, rx = GrpcTraceReceiver(), tls_sink(protocol, pki, require_client_cert=True)
    tls = {"ca_file": str(pki.ca), "cert_file": str(pki.client_cert), "key_file": str(pki.client_key)}
    svc = metrics_service(
        sink,
        metrics_endpoint(rx),
        protocol,
        tls=tls,
        headers={"X-Scope-OrgID": "tenant-1"},
        headers_env={"x-api-key": "METRICS_API_KEY"},
    )
    try:
        assert svc.metrics_hop is not None and svc.metrics_hop.mode == "mtls"
        exporter = agent_exporter(svc)
        assert exporter.export(plain_spans(3, 11)).name == "SUCCESS"
        exporter.shutdown()
        rx.wait_for(lambda: total(latest(rx), EXPORTED, result="ok") == 3, 20, "the metrics over mTLS")
    finally:
        assert svc.stop(timeout=10).complete
        sink.close()
        rx.close()
    assert total(latest(rx), RECEIVED, protocol="grpc") == 3
    for metadata in rx.metric_metadata():
        assert (metadata["x-scope-orgid"], metadata["x-api-key"]) == ("tenant-1", "m-456")


@contextmanager
def black_hole() -> Iterator[socket.socket]:
    """A port that accepts TCP connections (the kernel's backlog) and never answers: a hung receiver."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    try:
        yield sock
    finally:
        sock.close()  # the connections still pending are reset: the exporter's stuck request ends


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_a_hung_metrics_receiver_does_not_delay_the_shutdown_past_its_deadline(protocol: str) -> None:
    """The metrics exporter may wait 120 s per export; the stop gives the last export only what is left of
    ``shutdown_timeout_seconds`` (2 s), and the spans reach their next hop regardless."""
    deadline = 2.0
    sink = GrpcTraceReceiver()
    with black_hole() as hole:
        section = {
            "endpoint": f"http://127.0.0.1:{hole.getsockname()[1]}",
            "protocol": protocol,
            "interval_seconds": 0.2,
            "timeout_seconds": 120,
        }
        svc = Service(config_for(sink, shutdown_timeout_seconds=deadline, metrics_export=section))
        svc.start()
        try:
            exporter = agent_exporter(svc)
            assert exporter.export(plain_spans(4, 12)).name == "SUCCESS"
            exporter.shutdown()
            sink.wait_for_spans(4)
            readable, _, _ = select.select([hole], [], [], 30)
            assert readable, "the metrics exporter never connected"  # an export is under way, and hangs
        finally:
            started = time.monotonic()
            report = svc.stop()
            elapsed = time.monotonic() - started
            sink.close()
    assert report.complete and report.exported == 4
    # generous: the deadline and as much again plus slack for a loaded machine, far below the exporter's 120 s
    assert elapsed < 2 * deadline + 15, elapsed


def test_the_cli_pushes_the_metrics_beside_the_prometheus_endpoint_and_flushes_them_at_sigterm() -> None:
    """``serve --metrics-endpoint URL --metrics-protocol grpc --prometheus-port P``: two readers on one
    MeterProvider. The default 10 s interval has not come round when SIGTERM arrives: the totals reach the
    receiver (here also the next hop, as a Collector would be) by the shutdown's export."""
    rx = GrpcTraceReceiver()
    prometheus_port = free_port()
    command = [
        sys.executable,
        "-m",
        "otel_toolcall_eval.cli",
        "serve",
        "--http-port",
        "0",
        "--grpc-port",
        "0",
        "--export-endpoint",
        rx.endpoint,
        "--metrics-endpoint",
        rx.endpoint,
        "--metrics-protocol",
        "grpc",
        "--prometheus-port",
        str(prometheus_port),
    ]
    env = {**os.environ, "COLUMNS": "400"}
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in process.stdout or ()], daemon=True).start()
    try:
        line = lines.get(timeout=60)
        assert f"metrics_export={rx.endpoint} (grpc, tls=off)" in line, line
        ports = dict(part.split("=", 1) for part in line.split() if "=" in part)
        exporter = agent_exporter_at(int(ports["grpc"]))
        assert exporter.export(plain_spans(2, 13)).name == "SUCCESS"
        exporter.shutdown()
        scrape = httpx.get(f"http://127.0.0.1:{prometheus_port}/metrics", timeout=10).text
        assert "toolcall_eval_serve_spans_received_total" in scrape
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0, process.stderr.read() if process.stderr else ""
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)
        rx.close()
    last = latest(rx)
    assert total(last, RECEIVED, protocol="grpc") == total(last, EXPORTED, result="ok") == 2


def agent_exporter_at(port: int) -> Any:
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter(endpoint=f"http://127.0.0.1:{port}", insecure=True)
