"""The service's own export to the next hop (``serve.export``): TLS, mutual TLS and headers over both protocols,
against real TLS next hops made in the test (a ``grpc.server`` with ``ssl_server_credentials``, an HTTP server
behind an ``ssl.SSLContext``) and certificates made in the test (``tls_certs``). The spans arrive scored and as
the in-process processor leaves them; a next hop whose certificate the service does not trust, or one that
requires a client certificate the service does not show, gets nothing, and the service counts every span it
could not deliver (``toolcall_eval.serve.spans.exported{result="timed_out"}``: the SDK's exporter retries a failed
handshake until its timeout) and says so at shutdown.

Only 127.0.0.1 is contacted.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_toolcall_eval import attributes as A
from otel_toolcall_eval.serve import Service
from otel_toolcall_eval.serve import encode as E
from otel_toolcall_eval.serve.metrics import EXPORTED, SCORED
from tests.helpers import agent_exporter, agent_traces, config_for, plain_spans, wait_until

from .otlp_receiver import (
    GrpcTraceReceiver,
    HttpTraceReceiver,
    Sink,
    _Collector,
    assert_same,
    attributes,
    tls_sink,
    wire,
)
from .tls_certs import Pki

pytestmark = pytest.mark.integration


@pytest.fixture(autouse=True)
def _an_unrelated_ca_bundle_in_the_environment(pki: Pki, monkeypatch: pytest.MonkeyPatch) -> None:
    """requests prefers ``REQUESTS_CA_BUNDLE`` over a session's CA file (psf/requests#3829); this machine sets it.
    Pointing it at a CA that signed nothing here shows that ``serve.export.tls.ca_file`` is what is trusted."""
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(pki.other_ca))
    monkeypatch.delenv("CURL_CA_BUNDLE", raising=False)


@pytest.fixture(params=["grpc", "http"])
def protocol(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def endpoint_of(sink: Sink) -> str:
    return sink.endpoint if isinstance(sink, GrpcTraceReceiver) else sink.base


def exporting_to(sink: Sink, protocol: str, *, endpoint: str | None = None, **export: Any) -> Service:
    svc = Service(
        config_for(
            sink,  # type: ignore[arg-type]  # config_for reads only its .endpoint, replaced here
            export={"endpoint": endpoint or endpoint_of(sink), "protocol": protocol, **export},
        )
    )
    svc.start()
    return svc


@pytest.fixture
def encoded(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many spans the service's received-message encoder was given (over either protocol)."""
    calls: list[int] = []
    original = E.ReceivedSpanEncoder.encode_bytes

    def counting(self: E.ReceivedSpanEncoder, spans: Any) -> bytes:
        calls.append(len(spans))
        return original(self, spans)

    monkeypatch.setattr(E.ReceivedSpanEncoder, "encode_bytes", counting)
    return calls


def test_an_http_next_hop_gets_the_received_messages_plus_the_scores(encoded: list[int]) -> None:
    """Plaintext ``export.protocol: http``: scored and preserved as over gRPC, through the received-message
    encoder (the SDK's field-by-field encoder is not the one that ran)."""
    sink = HttpTraceReceiver()
    svc = exporting_to(sink, "http")
    try:
        reference = agent_traces(agent_exporter(svc), svc.processor.config, traces=8, seed=31)
        assert any((s.attributes or {}).get("toolcall_eval.trace.composite_ok") is False for s in reference)
        assert_same(sink.wait_for_spans(len(reference)), wire(reference))
        assert sum(encoded) == len(reference)
        assert all(m["content-type"] == "application/x-protobuf" for m in sink.metadata)
    finally:
        svc.stop(timeout=10)
        sink.close()


@pytest.mark.parametrize(("protocol", "form"), [("grpc", "https"), ("grpc", "bare"), ("http", "https")])
def test_scored_spans_reach_a_tls_next_hop_trusting_the_ca_file(
    protocol: str, form: str, pki: Pki, encoded: list[int]
) -> None:
    """``https://`` with ``tls.ca_file``, and the Collector's form for gRPC: a bare ``host:port`` with a ``tls``
    block (an OTLP/HTTP endpoint is a URL). A session verdict (an OTLP log record) goes to the same next hop over
    the same TLS."""
    sink = tls_sink(protocol, pki)
    endpoint = f"127.0.0.1:{sink.port}" if form == "bare" else endpoint_of(sink)
    svc = exporting_to(sink, protocol, endpoint=endpoint, tls={"ca_file": str(pki.ca)})
    try:
        assert svc.next_hop is not None and svc.next_hop.mode == "on"
        reference = agent_traces(agent_exporter(svc), svc.processor.config, traces=6, seed=32)
        assert_same(sink.wait_for_spans(len(reference)), wire(reference))
        assert sum(encoded) == len(reference)
        exporter = agent_exporter(svc)
        assert exporter.export(conversation_turn()).name == "SUCCESS"
        exporter.shutdown()
    finally:
        report = svc.stop(timeout=10)
        sink.close()
    assert report.complete and report.export_failed == 0
    # the demo agent's own conversations end in session verdicts too: this turn's is the one with its id
    (record,) = [r for r in sink.log_records() if attributes(r.attributes).get(A.GEN_AI_CONVERSATION_ID) == "conv-tls"]
    assert record.event_name == A.GEN_AI_EVALUATION_RESULT


def test_mutual_tls_next_hop_gets_the_spans_with_the_client_certificate_and_none_without(
    protocol: str, pki: Pki
) -> None:
    sink = tls_sink(protocol, pki, require_client_cert=True)
    tls = {"ca_file": str(pki.ca), "cert_file": str(pki.client_cert), "key_file": str(pki.client_key)}
    svc = exporting_to(sink, protocol, tls=tls)
    try:
        assert svc.next_hop is not None and svc.next_hop.mode == "mtls"
        reference = agent_traces(agent_exporter(svc), svc.processor.config, traces=3, seed=33)
        assert_same(sink.wait_for_spans(len(reference)), wire(reference))
    finally:
        assert svc.stop(timeout=10).complete
    sink.clear()
    anonymous = exporting_to(sink, protocol, tls={"ca_file": str(pki.ca)}, timeout_seconds=1)
    assert_refused(anonymous, sink)
    sink.close()


def test_a_next_hop_whose_certificate_is_not_trusted_gets_nothing(protocol: str, pki: Pki) -> None:
    sink = tls_sink(protocol, pki)
    svc = exporting_to(sink, protocol, tls={"ca_file": str(pki.other_ca)}, timeout_seconds=1)
    assert_refused(svc, sink)
    sink.close()


def test_a_plaintext_export_to_a_tls_next_hop_fails_counted(protocol: str, pki: Pki) -> None:
    sink = tls_sink(protocol, pki)
    svc = exporting_to(sink, protocol, endpoint=endpoint_of(sink).replace("https://", "http://"), timeout_seconds=1)
    assert_refused(svc, sink)
    sink.close()


def conversation_turn() -> list[ReadableSpan]:
    """One agent turn carrying a conversation id: its session verdict is exported (as a log) at shutdown."""
    raw = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(raw))
    tracer = provider.get_tracer("agent")
    with tracer.start_as_current_span("invoke_agent", attributes={"gen_ai.operation.name": "invoke_agent"}):
        with tracer.start_as_current_span("chat", attributes={A.GEN_AI_CONVERSATION_ID: "conv-tls"}):
            pass
    provider.shutdown()
    return list(raw.get_finished_spans())


def assert_refused(svc: Service, sink: _Collector) -> None:
    """The service stays up and counts what it could not deliver; the next hop received nothing."""
    try:
        spans = plain_spans(3, 7)
        exporter = agent_exporter(svc)
        assert exporter.export(spans).name == "SUCCESS"  # accepted by the service: its problem from here on
        exporter.shutdown()
        wait_until(
            lambda: svc.metrics.total(EXPORTED, "failed") + svc.metrics.total(EXPORTED, "timed_out") >= len(spans),
            "the undelivered export counted",
        )
        assert svc.metrics.total(SCORED) == len(spans) and svc.metrics.total(EXPORTED, "ok") == 0
        assert httpx.get(f"http://127.0.0.1:{svc.http_port}/healthz", timeout=5).status_code == 200
    finally:
        report = svc.stop(timeout=10)
    assert not report.complete and report.export_failed + report.export_timed_out >= 3 and report.exported == 0
    assert sink.spans() == []


def test_headers_and_headers_from_the_environment_reach_the_next_hop(
    protocol: str, pki: Pki, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NEXT_HOP_API_KEY", "k-123")
    sink = tls_sink(protocol, pki)
    svc = exporting_to(
        sink,
        protocol,
        tls={"ca_file": str(pki.ca)},
        headers={"X-Scope-OrgID": "tenant-1"},
        headers_env={"x-api-key": "NEXT_HOP_API_KEY"},
    )
    try:
        exporter = agent_exporter(svc)
        exporter.export(plain_spans(2, 8))
        exporter.shutdown()
        sink.wait_for_spans(2)
    finally:
        svc.stop(timeout=10)
        sink.close()
    for metadata in sink.metadata:
        assert (metadata["x-scope-orgid"], metadata["x-api-key"]) == ("tenant-1", "k-123")


def test_the_cli_exports_over_mutual_tls_from_flags(pki: Pki, tmp_path: Path) -> None:
    """``serve --export-endpoint https://... --export-ca-file --export-cert-file --export-key-file``: the start-up
    line says so, and SIGTERM exports everything accepted over mTLS (exit 0)."""
    import signal
    import subprocess
    import sys

    sink = tls_sink("grpc", pki, require_client_cert=True)
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
        sink.endpoint,
        "--export-ca-file",
        str(pki.ca),
        "--export-cert-file",
        str(pki.client_cert),
        "--export-key-file",
        str(pki.client_key),
    ]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert "export_tls=mtls" in line, line + (process.stderr.read() if process.poll() is not None else "")
        grpc_port = int(line.split("grpc=")[1].split()[0])
        exporter = GrpcSpanExporter(endpoint=f"http://127.0.0.1:{grpc_port}", insecure=True)
        assert exporter.export(plain_spans(2, 9)).name == "SUCCESS"
        exporter.shutdown()
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
        assert len(sink.wait_for_spans(2)) == 2
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)
        sink.close()
