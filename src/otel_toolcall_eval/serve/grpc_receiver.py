"""OTLP/gRPC: the ``TraceService/Export`` RPC on a ``grpc.server``.

gRPC itself enforces the message size (``grpc.max_receive_message_length``: RESOURCE_EXHAUSTED) and the number of
RPCs in progress (``maximum_concurrent_rpcs``: RESOURCE_EXHAUSTED) and decompresses gzip. A full queue or a service
shutting down answers UNAVAILABLE with a ``RetryInfo`` (the OTLP exporters retry both, after the delay it gives); a
bad token UNAUTHENTICATED; a message that does not decode to spans INVALID_ARGUMENT (not retried); invalid spans
among valid ones are refused by OTLP partial success (``rejected_spans``), the others kept. With ``serve.tls`` the
port speaks TLS only (``add_secure_port``): a plaintext client fails its handshake and never reaches ``Export``.
"""

from __future__ import annotations

from concurrent import futures
from typing import Any

import grpc
from google.protobuf.duration_pb2 import Duration
from google.rpc.error_details_pb2 import RetryInfo
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2_grpc import (
    TraceServiceServicer,
    add_TraceServiceServicer_to_server,
)

from otel_toolcall_eval.serve.decode import BadPayload, partial_success, spans_from_message
from otel_toolcall_eval.serve.intake import Admission, Intake


class _Servicer(TraceServiceServicer):
    def __init__(self, intake: Intake) -> None:
        self._intake = intake

    def Export(self, request: ExportTraceServiceRequest, context: Any) -> ExportTraceServiceResponse:
        intake = self._intake
        intake.begin()
        try:
            metadata = dict(context.invocation_metadata())
            if not intake.authorized(metadata.get("authorization")):
                intake.reject("unauthenticated")
                context.abort(grpc.StatusCode.UNAUTHENTICATED, "a valid bearer token is required")
            invalid: list[str] = []
            try:
                spans = spans_from_message(request, intake.queue.max_spans, invalid)
            except BadPayload as exc:
                intake.reject("too_large" if exc.status == 413 else "bad_payload")
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
            outcome = intake.admit(spans, "grpc", invalid=len(invalid))
            if outcome is not Admission.ACCEPTED:
                info = RetryInfo(retry_delay=Duration(seconds=intake.retry_after))
                context.set_trailing_metadata((("google.rpc.retryinfo-bin", info.SerializeToString()),))
                context.abort(grpc.StatusCode.UNAVAILABLE, f"{outcome.value}: retry later")
            return partial_success(invalid)  # empty unless some spans were refused
        finally:
            intake.end()


class GrpcReceiver:
    def __init__(
        self,
        host: str,
        port: int,
        intake: Intake,
        max_concurrent: int,
        credentials: grpc.ServerCredentials | None = None,
    ) -> None:
        self._server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=min(max_concurrent, 16), thread_name_prefix="toolcall-eval-grpc"),
            maximum_concurrent_rpcs=max_concurrent,
            options=[
                ("grpc.max_receive_message_length", intake.max_bytes),
                ("grpc.so_reuseport", 0),  # a port in use is an error, not a silent second listener
            ],
        )
        add_TraceServiceServicer_to_server(_Servicer(intake), self._server)  # type: ignore[no-untyped-call]
        address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        try:
            if credentials is None:
                self.port: int = self._server.add_insecure_port(address)
            else:  # TLS (serve.tls): a plaintext client fails its handshake and never reaches Export
                self.port = self._server.add_secure_port(address, credentials)
        except RuntimeError as exc:
            raise OSError(f"cannot listen on {address} (gRPC): {exc}") from None
        if self.port == 0:
            raise OSError(f"cannot listen on {address} (gRPC)")

    def start(self) -> None:
        self._server.start()

    def stop(self, grace: float) -> None:
        """Refuse new RPCs; those in progress get ``grace`` seconds to finish."""
        self._server.stop(grace).wait(grace + 1)
