"""Minimal OTLP trace receivers on 127.0.0.1 for wire tests: a real gRPC server and a real HTTP server, each
plaintext or, given server credentials / an ``ssl.SSLContext``, TLS only (the next hop of the service's TLS export).
Both take OTLP logs and metrics too (``MetricsService/Export``, ``POST /v1/metrics``), as a Collector's ``otlp``
receiver does: the service's session verdicts and its pushed metrics (``serve.metrics_export``).

Both decode what the real exporters send into ``ExportTraceServiceRequest`` messages and keep them, also
while answering with a failure (``fail = True``: gRPC ``UNAVAILABLE`` / HTTP 500), so a test can tell
that a failed export really reached the wire.
"""

from __future__ import annotations

import gzip
import ssl
import threading
import time
import zlib
from collections.abc import Callable, Sequence
from concurrent import futures
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

import grpc
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest, ExportLogsServiceResponse
from opentelemetry.proto.collector.logs.v1.logs_service_pb2_grpc import (
    LogsServiceServicer,
    add_LogsServiceServicer_to_server,
)
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2_grpc import (
    MetricsServiceServicer,
    add_MetricsServiceServicer_to_server,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2_grpc import (
    TraceServiceServicer,
    add_TraceServiceServicer_to_server,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, InstrumentationScope
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import Span

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan

    from .tls_certs import Pki


@dataclass(frozen=True)
class WireSpan:
    """One decoded span with the resource and scope it arrived under."""

    resource: Resource
    scope: InstrumentationScope
    span: Span


def any_value(value: AnyValue) -> Any:
    """An OTLP ``AnyValue`` as plain Python (arrays as lists, kvlists as dicts)."""
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [any_value(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: any_value(kv.value) for kv in value.kvlist_value.values}
    return getattr(value, kind)


def raw_attributes(key_values: Any) -> dict[str, AnyValue]:
    """Attribute key -> the ``AnyValue`` as sent, to check wire types (bool_value, int_value, array_value ...)."""
    out: dict[str, AnyValue] = {}
    for kv in key_values:
        assert kv.key not in out, f"attribute {kv.key!r} sent twice"
        out[kv.key] = kv.value
    return out


def attributes(key_values: Any) -> dict[str, Any]:
    return {k: any_value(v) for k, v in raw_attributes(key_values).items()}


class _Collector:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._requests: list[ExportTraceServiceRequest] = []
        self._metadata: list[dict[str, str]] = []
        self._log_requests: list[ExportLogsServiceRequest] = []
        self._metric_requests: list[tuple[ExportMetricsServiceRequest, dict[str, str]]] = []
        self.fail = False
        self.delay = 0.0  # seconds a trace export is answered late (after it is recorded): a slow next hop

    def _record(self, request: ExportTraceServiceRequest, metadata: dict[str, str]) -> None:
        with self._lock:
            self._requests.append(request)
            self._metadata.append(metadata)

    @property
    def requests(self) -> list[ExportTraceServiceRequest]:
        with self._lock:
            return list(self._requests)

    @property
    def metadata(self) -> list[dict[str, str]]:
        """Per request: HTTP headers (lower-cased names) or gRPC invocation metadata."""
        with self._lock:
            return list(self._metadata)

    def log_records(self) -> list[Any]:
        """Every OTLP ``LogRecord`` received so far (session verdicts, judge events)."""
        with self._lock:
            requests = list(self._log_requests)
        return [r for req in requests for rl in req.resource_logs for sl in rl.scope_logs for r in sl.log_records]

    def _record_metrics(self, request: ExportMetricsServiceRequest, metadata: dict[str, str]) -> None:
        with self._lock:
            self._metric_requests.append((request, metadata))

    def metric_requests(self) -> list[ExportMetricsServiceRequest]:
        """Every ``ExportMetricsServiceRequest`` received so far, in order."""
        with self._lock:
            return [request for request, _ in self._metric_requests]

    def metric_metadata(self) -> list[dict[str, str]]:
        with self._lock:
            return [metadata for _, metadata in self._metric_requests]

    def clear(self) -> None:
        with self._lock:
            self._requests.clear()
            self._metadata.clear()

    def spans(self) -> list[WireSpan]:
        return [
            WireSpan(rs.resource, ss.scope, span)
            for request in self.requests
            for rs in request.resource_spans
            for ss in rs.scope_spans
            for span in ss.spans
        ]

    def wait_for(self, predicate: Callable[[], bool], timeout: float = 10.0, what: str = "condition") -> None:
        """Poll ``predicate`` until true; fail (not hang) at the deadline."""
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() >= deadline:
                raise AssertionError(
                    f"timed out after {timeout}s waiting for {what}; "
                    f"received {len(self.requests)} request(s), {len(self.spans())} span(s)"
                )
            time.sleep(0.02)

    def wait_for_spans(self, count: int, timeout: float = 10.0) -> list[WireSpan]:
        self.wait_for(lambda: len(self.spans()) >= count, timeout, f"{count} span(s)")
        return self.spans()

    def wait_for_requests(self, count: int, timeout: float = 10.0) -> None:
        self.wait_for(lambda: len(self.requests) >= count, timeout, f"{count} request(s)")


class _Servicer(TraceServiceServicer):
    def __init__(self, collector: _Collector) -> None:
        self._collector = collector

    def Export(self, request: ExportTraceServiceRequest, context: grpc.ServicerContext) -> ExportTraceServiceResponse:
        self._collector._record(request, {k: str(v) for k, v in context.invocation_metadata()})
        if self._collector.delay:
            time.sleep(self._collector.delay)
        if self._collector.fail:
            context.abort(grpc.StatusCode.UNAVAILABLE, "receiver is down (test)")
        return ExportTraceServiceResponse()


class _LogsServicer(LogsServiceServicer):
    def __init__(self, receiver: GrpcTraceReceiver) -> None:
        self._receiver = receiver

    def Export(self, request: ExportLogsServiceRequest, context: grpc.ServicerContext) -> ExportLogsServiceResponse:
        with self._receiver._lock:
            self._receiver._log_requests.append(request)
        return ExportLogsServiceResponse()


class _MetricsServicer(MetricsServiceServicer):
    def __init__(self, collector: _Collector) -> None:
        self._collector = collector

    def Export(
        self, request: ExportMetricsServiceRequest, context: grpc.ServicerContext
    ) -> ExportMetricsServiceResponse:
        self._collector._record_metrics(request, {k: str(v) for k, v in context.invocation_metadata()})
        return ExportMetricsServiceResponse()


class GrpcTraceReceiver(_Collector):
    """A real ``grpc.server`` serving ``TraceService/Export`` (and ``LogsService/Export``, for the session
    verdicts' log records, and ``MetricsService/Export``) on an ephemeral 127.0.0.1 port; TLS only with
    ``credentials``."""

    def __init__(self, credentials: grpc.ServerCredentials | None = None) -> None:
        super().__init__()
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="otlp-grpc-rx"))
        add_TraceServiceServicer_to_server(_Servicer(self), self._server)
        add_LogsServiceServicer_to_server(_LogsServicer(self), self._server)
        add_MetricsServiceServicer_to_server(_MetricsServicer(self), self._server)
        if credentials is None:
            self.port = self._server.add_insecure_port("127.0.0.1:0")
        else:
            self.port = self._server.add_secure_port("127.0.0.1:0", credentials)
        self.scheme = "http" if credentials is None else "https"
        if self.port == 0:
            raise RuntimeError("could not bind a gRPC port on 127.0.0.1")
        self._server.start()

    @property
    def endpoint(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}"

    def close(self) -> None:
        self._server.stop(grace=None).wait(timeout=5)


class _Handler(BaseHTTPRequestHandler):
    server: _HttpServer

    def do_POST(self) -> None:
        if self.path not in ("/v1/traces", "/v1/logs", "/v1/metrics"):
            self._reply(HTTPStatus.NOT_FOUND)
            return
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        encoding = (self.headers.get("Content-Encoding") or "identity").strip().lower()
        try:
            if encoding == "gzip":
                body = gzip.decompress(body)
            elif encoding == "deflate":
                body = zlib.decompress(body)
            elif encoding != "identity":
                self._reply(HTTPStatus.UNSUPPORTED_MEDIA_TYPE)
                return
            if self.path == "/v1/logs":
                logs = ExportLogsServiceRequest()
                logs.ParseFromString(body)
                with self.server.collector._lock:
                    self.server.collector._log_requests.append(logs)
                self._reply(HTTPStatus.OK, ExportLogsServiceResponse().SerializeToString())
                return
            if self.path == "/v1/metrics":
                metrics = ExportMetricsServiceRequest()
                metrics.ParseFromString(body)
                self.server.collector._record_metrics(metrics, {k.lower(): v for k, v in self.headers.items()})
                self._reply(HTTPStatus.OK, ExportMetricsServiceResponse().SerializeToString())
                return
            request = ExportTraceServiceRequest()
            request.ParseFromString(body)
        except Exception:
            self._reply(HTTPStatus.BAD_REQUEST)
            raise
        collector = self.server.collector
        collector._record(request, {k.lower(): v for k, v in self.headers.items()})
        if collector.fail:
            self._reply(HTTPStatus.INTERNAL_SERVER_ERROR)
            return
        self._reply(HTTPStatus.OK, ExportTraceServiceResponse().SerializeToString())

    def _reply(self, status: HTTPStatus, body: bytes = b"") -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass


class _HttpServer(ThreadingHTTPServer):
    daemon_threads = True
    collector: _Collector


class HttpTraceReceiver(_Collector):
    """A ``ThreadingHTTPServer`` answering ``POST /v1/traces`` on an ephemeral 127.0.0.1 port; TLS only with
    ``ssl_context`` (a failed handshake is dropped by ``socketserver`` on the accepting thread, never answered)."""

    def __init__(self, ssl_context: ssl.SSLContext | None = None) -> None:
        super().__init__()
        self._server = _HttpServer(("127.0.0.1", 0), _Handler)
        if ssl_context is not None:
            self._server.socket = ssl_context.wrap_socket(self._server.socket, server_side=True)
        self.scheme = "http" if ssl_context is None else "https"
        self._server.collector = self
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, name="otlp-http-rx", daemon=True
        )
        self._thread.start()

    @property
    def base(self) -> str:
        """The endpoint without the signal path (what ``serve.export.endpoint`` takes for ``protocol: http``)."""
        return f"{self.scheme}://127.0.0.1:{self.port}"

    @property
    def endpoint(self) -> str:
        return f"{self.base}/v1/traces"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


# --- what the tests compare the receiver's spans with --------------------------------------------------------------


def wire(spans: Sequence[ReadableSpan]) -> list[WireSpan]:

    message = encode_spans(spans)
    return [
        WireSpan(rs.resource, ss.scope, s) for rs in message.resource_spans for ss in rs.scope_spans for s in ss.spans
    ]


def by_id(spans: Sequence[WireSpan]) -> dict[bytes, WireSpan]:
    out = {s.span.span_id: s for s in spans}
    assert len(out) == len(spans), "a span arrived twice"
    return out


def assert_same(received: Sequence[WireSpan], expected: Sequence[WireSpan]) -> None:
    """Every span as the in-process processor left it: attributes (scores included), ids, parents, events, links,
    status, times, resource and scope."""
    got, want = by_id(received), by_id(expected)
    assert got.keys() == want.keys()
    for span_id, w in want.items():
        g = got[span_id]
        assert g.span == w.span, g.span.name
        assert g.resource == w.resource
        assert g.scope == w.scope


Sink = GrpcTraceReceiver | HttpTraceReceiver


def tls_sink(protocol: str, pki: Pki, *, require_client_cert: bool = False) -> Sink:
    """A next hop that speaks TLS only, presenting the test CA's server certificate (127.0.0.1, localhost)."""
    if protocol == "grpc":
        credentials = grpc.ssl_server_credentials(
            [(pki.key.read_bytes(), pki.cert.read_bytes())],
            root_certificates=pki.ca.read_bytes() if require_client_cert else None,
            require_client_auth=require_client_cert,
        )
        return GrpcTraceReceiver(credentials)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(pki.cert, pki.key)
    if require_client_cert:
        context.load_verify_locations(cafile=str(pki.ca))
        context.verify_mode = ssl.CERT_REQUIRED
    return HttpTraceReceiver(context)
