"""TLS on the service's receivers (``serve.tls``), with certificates made in the test (``tls_certs``) and the real
Python SDK exporters: gRPC with channel credentials, HTTP with ``certificate_file`` (and a client certificate for
mutual TLS). Scores arrive at the real OTLP receiver as over plaintext; a plaintext client, or one that does not
trust the certificate, reaches nothing; a bearer token is still checked inside the TLS session.

Only 127.0.0.1 is contacted.
"""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from otel_toolcall_eval.serve import Service
from otel_toolcall_eval.serve.metrics import REJECTED_REQUESTS, SCORED
from tests.helpers import agent_traces, config_for, plain_spans, wait_until

from .otlp_receiver import GrpcTraceReceiver, assert_same, wire
from .tls_certs import Pki

pytestmark = pytest.mark.integration

PB = {"Content-Type": "application/x-protobuf"}


@pytest.fixture(autouse=True)
def _no_ca_bundle_override(monkeypatch: pytest.MonkeyPatch) -> None:
    """requests takes ``REQUESTS_CA_BUNDLE`` / ``CURL_CA_BUNDLE`` over a session's ``verify`` (psf/requests#3829),
    so on a machine that sets them (this one does) the HTTP exporter's ``certificate_file`` would be ignored."""
    monkeypatch.delenv("REQUESTS_CA_BUNDLE", raising=False)
    monkeypatch.delenv("CURL_CA_BUNDLE", raising=False)


def tls_service(receiver: GrpcTraceReceiver, pki: Pki, *, mtls: bool = False, **serve: Any) -> Service:
    tls = {"cert_file": str(pki.cert), "key_file": str(pki.key)}
    if mtls:
        tls["client_ca_file"] = str(pki.ca)
    svc = Service(config_for(receiver, tls=tls, **serve))
    svc.start()
    return svc


def trusting(ca: Path) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(ca))


def grpc_exporter(svc: Service, pki: Pki, *, client_cert: bool = False, **kw: Any) -> GrpcSpanExporter:
    credentials = grpc.ssl_channel_credentials(
        root_certificates=pki.ca.read_bytes(),
        private_key=pki.client_key.read_bytes() if client_cert else None,
        certificate_chain=pki.client_cert.read_bytes() if client_cert else None,
    )
    return GrpcSpanExporter(endpoint=f"https://127.0.0.1:{svc.grpc_port}", credentials=credentials, **kw)


def http_exporter(svc: Service, pki: Pki, *, client_cert: bool = False, **kw: Any) -> HttpSpanExporter:
    if client_cert:
        kw.update(client_certificate_file=str(pki.client_cert), client_key_file=str(pki.client_key))
    return HttpSpanExporter(endpoint=f"https://127.0.0.1:{svc.http_port}/v1/traces", certificate_file=str(pki.ca), **kw)


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_the_sdk_exporters_send_over_tls_and_the_scores_arrive(
    protocol: str, receiver: GrpcTraceReceiver, pki: Pki
) -> None:
    svc = tls_service(receiver, pki)
    try:
        exporter: SpanExporter = grpc_exporter(svc, pki) if protocol == "grpc" else http_exporter(svc, pki)
        reference = agent_traces(exporter, svc.processor.config, traces=6, seed=21)
        assert_same(receiver.wait_for_spans(len(reference)), wire(reference))
        assert svc.metrics.total(REJECTED_REQUESTS) == 0
    finally:
        svc.stop(timeout=10)


def test_plaintext_and_untrusted_clients_are_refused(receiver: GrpcTraceReceiver, pki: Pki) -> None:
    svc = tls_service(receiver, pki)
    try:
        body = encode_spans(plain_spans(2, 0)).SerializeToString()
        with pytest.raises(httpx.TransportError):  # the server reads no HTTP: the "ClientHello" is not one
            httpx.post(f"http://127.0.0.1:{svc.http_port}/v1/traces", content=body, headers=PB, timeout=5)
        with pytest.raises(httpx.ConnectError):  # TLS, but the certificate is not one this client trusts
            httpx.post(
                f"https://127.0.0.1:{svc.http_port}/v1/traces",
                content=body,
                headers=PB,
                timeout=5,
                verify=trusting(pki.other_ca),
            )
        plain = GrpcSpanExporter(endpoint=f"http://127.0.0.1:{svc.grpc_port}", insecure=True, timeout=2)
        assert plain.export(plain_spans(2, 1)) is SpanExportResult.FAILURE
        plain.shutdown()
        wait_until(lambda: svc.metrics.total(REJECTED_REQUESTS, "tls_handshake") >= 2, "the HTTP handshakes counted")
        assert (
            httpx.get(f"https://127.0.0.1:{svc.http_port}/healthz", verify=trusting(pki.ca), timeout=5).text == "ok\n"
        )
        assert svc.metrics.total(SCORED) == 0 and receiver.spans() == []
    finally:
        svc.stop(timeout=10)


def test_a_bearer_token_is_checked_inside_tls(
    receiver: GrpcTraceReceiver, pki: Pki, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the Collector's ``bearertokenauth`` extension sends over an otlp exporter with ``tls: {ca_file}``."""
    monkeypatch.setenv("SERVE_TLS_TOKEN", "t0ken")
    svc = tls_service(receiver, pki, bearer_token_env="SERVE_TLS_TOKEN")
    try:
        url = f"https://127.0.0.1:{svc.http_port}/v1/traces"
        body = encode_spans(plain_spans(2, 0)).SerializeToString()
        assert httpx.post(url, content=body, headers=PB, verify=trusting(pki.ca), timeout=5).status_code == 401
        no_token = grpc_exporter(svc, pki, timeout=5)
        assert no_token.export(plain_spans(2, 1)) is SpanExportResult.FAILURE  # UNAUTHENTICATED, not retried
        no_token.shutdown()
        token = {"authorization": "Bearer t0ken"}
        for exporter in (grpc_exporter(svc, pki, headers=token), http_exporter(svc, pki, headers=token)):
            assert exporter.export(plain_spans(2, 2)) is SpanExportResult.SUCCESS
            exporter.shutdown()
        assert len(receiver.wait_for_spans(4)) == 4
        assert svc.metrics.total(REJECTED_REQUESTS, "unauthenticated") == 2
    finally:
        svc.stop(timeout=10)


def test_mutual_tls_requires_a_client_certificate_from_the_ca(receiver: GrpcTraceReceiver, pki: Pki) -> None:
    svc = tls_service(receiver, pki, mtls=True)
    try:
        url = f"https://127.0.0.1:{svc.http_port}/v1/traces"
        body = encode_spans(plain_spans(2, 0)).SerializeToString()
        with pytest.raises(httpx.TransportError):  # trusts the server, but shows no certificate of its own
            httpx.post(url, content=body, headers=PB, verify=trusting(pki.ca), timeout=5)
        anonymous = grpc_exporter(svc, pki, timeout=2)
        assert anonymous.export(plain_spans(2, 1)) is SpanExportResult.FAILURE
        anonymous.shutdown()
        assert svc.metrics.total(SCORED) == 0
        for exporter in (grpc_exporter(svc, pki, client_cert=True), http_exporter(svc, pki, client_cert=True)):
            assert exporter.export(plain_spans(2, 2)) is SpanExportResult.SUCCESS
            exporter.shutdown()
        assert len(receiver.wait_for_spans(4)) == 4
    finally:
        svc.stop(timeout=10)
