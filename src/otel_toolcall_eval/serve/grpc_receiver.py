"""OTLP/gRPC: the ``TraceService/Export`` RPC on a ``grpc.server``.

gRPC itself enforces the message size (``grpc.max_receive_message_length``: RESOURCE_EXHAUSTED) and the number of
RPCs in progress (``maximum_concurrent_rpcs``: RESOURCE_EXHAUSTED) and decompresses gzip. The token is checked by a
server interceptor from the call's headers, before any handler runs or any message is awaited: a call without it
is answered UNAUTHENTICATED at once, so calls that send headers and never a message cost nothing unless they
carry the token (issue 28). ``Export`` is served as a client-streaming method (the wire is the same as unary's),
so its handler starts before the message arrives and a watchdog cancels a call still running
``request_timeout_seconds`` after it started, whatever deadline the client sent (or did not). A full queue,
requests in flight holding ``max_inflight_bytes``, or a service shutting down answer UNAVAILABLE with a
``RetryInfo`` (the OTLP exporters retry it, after the delay it gives); a message that does not decode to spans
INVALID_ARGUMENT (not retried); invalid spans among valid ones (spans over the structural limits too) are
refused by OTLP partial success (``rejected_spans``), the others kept. With ``serve.tls`` the port speaks TLS
only (``add_secure_port``): a plaintext client fails its handshake and never reaches ``Export``.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections.abc import Callable, Iterator
from concurrent import futures
from typing import Any

import grpc
from google.protobuf.duration_pb2 import Duration
from google.rpc.error_details_pb2 import RetryInfo
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from otel_toolcall_eval.serve.decode import PROTOBUF_BYTE_COST, BadPayload, partial_success, spans_from_message
from otel_toolcall_eval.serve.intake import Admission, Intake

_SERVICE = "opentelemetry.proto.collector.trace.v1.TraceService"


class _Watchdog:
    """One thread that cancels calls still running at their deadline (a blocked wait for the message included)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, Any]] = []
        self._active: set[int] = set()
        self._expired: set[int] = set()
        self._ids = itertools.count()
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="toolcall-eval-serve-grpc-deadline", daemon=True)
        self._thread.start()

    def watch(self, context: Any, seconds: float) -> int:
        with self._cond:
            ident = next(self._ids)
            self._active.add(ident)
            heapq.heappush(self._heap, (time.monotonic() + seconds, ident, context))
            self._cond.notify()
            return ident

    def expired(self, ident: int) -> bool:
        """Whether the call was cancelled at its deadline."""
        with self._cond:
            return ident in self._expired

    def done(self, ident: int) -> None:
        with self._cond:
            self._active.discard(ident)
            self._expired.discard(ident)

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify()
        self._thread.join(timeout=1)

    def _run(self) -> None:
        with self._cond:
            while not self._stopped:
                now = time.monotonic()
                while self._heap and (self._heap[0][1] not in self._active or self._heap[0][0] <= now):
                    _, ident, context = heapq.heappop(self._heap)
                    if ident in self._active:
                        self._active.discard(ident)
                        self._expired.add(ident)
                        context.cancel()  # the call's wait for its message ends; the client sees CANCELLED
                self._cond.wait(None if not self._heap else self._heap[0][0] - now)


class _Authenticate(grpc.ServerInterceptor):
    """The token, from the call's headers, before the handler: a refused call never waits for its message."""

    def __init__(self, intake: Intake) -> None:
        self._intake = intake
        self._refuse: grpc.RpcMethodHandler[Any, None] = grpc.stream_unary_rpc_method_handler(self._unauthenticated)

    def intercept_service(self, continuation: Callable[[Any], Any], details: Any) -> Any:
        metadata = dict(details.invocation_metadata or ())
        if self._intake.authorized(metadata.get("authorization")):
            return continuation(details)
        self._intake.reject("unauthenticated")
        return self._refuse

    @staticmethod
    def _unauthenticated(requests: Iterator[Any], context: Any) -> None:
        context.abort(grpc.StatusCode.UNAUTHENTICATED, "a valid bearer token is required")


class _Export:
    def __init__(self, intake: Intake, request_seconds: float, watchdog: _Watchdog) -> None:
        self._intake = intake
        self._seconds = request_seconds
        self._watchdog = watchdog

    def __call__(self, requests: Iterator[ExportTraceServiceRequest], context: Any) -> ExportTraceServiceResponse:
        intake = self._intake
        intake.begin()
        watched = self._watchdog.watch(context, self._seconds)
        reservation = intake.inflight.reservation()
        try:
            try:
                request = next(requests, None)  # the one message, within the call's deadline
            except grpc.RpcError:
                request = None
            if self._watchdog.expired(watched) or not context.is_active():  # the deadline passed, or the client left
                intake.reject("timeout")
                return ExportTraceServiceResponse()
            if request is None:
                intake.reject("bad_payload")
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, "an Export call carries one message")
                raise AssertionError("abort raises")
            size = request.ByteSize()
            invalid: list[str] = []
            try:
                if not intake.reserve(reservation, size * PROTOBUF_BYTE_COST):
                    self._retry(context, intake.busy(), intake)
                spans = spans_from_message(request, intake.queue.max_spans, invalid, intake.limits)
            except BadPayload as exc:
                intake.reject("too_large" if exc.status == 413 else "bad_payload")
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
            outcome = intake.admit(spans, "grpc", invalid=len(invalid), nbytes=size)
            if outcome is not Admission.ACCEPTED:
                self._retry(context, outcome, intake)
            return partial_success(invalid)  # empty unless some spans were refused
        finally:
            reservation.close()
            self._watchdog.done(watched)
            intake.end()

    @staticmethod
    def _retry(context: Any, outcome: Admission, intake: Intake) -> None:
        info = RetryInfo(retry_delay=Duration(seconds=intake.retry_after))
        context.set_trailing_metadata((("google.rpc.retryinfo-bin", info.SerializeToString()),))
        context.abort(grpc.StatusCode.UNAVAILABLE, f"{outcome.value}: retry later")


class GrpcReceiver:
    def __init__(
        self,
        host: str,
        port: int,
        intake: Intake,
        max_concurrent: int,
        credentials: grpc.ServerCredentials | None = None,
        request_seconds: float = 60.0,
    ) -> None:
        self._watchdog = _Watchdog()
        self._server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=min(max_concurrent, 16), thread_name_prefix="toolcall-eval-grpc"),
            interceptors=[_Authenticate(intake)],
            maximum_concurrent_rpcs=max_concurrent,
            options=[
                ("grpc.max_receive_message_length", intake.max_bytes),
                ("grpc.so_reuseport", 0),  # a port in use is an error, not a silent second listener
            ],
        )
        export = grpc.stream_unary_rpc_method_handler(
            _Export(intake, request_seconds, self._watchdog),
            request_deserializer=ExportTraceServiceRequest.FromString,
            response_serializer=ExportTraceServiceResponse.SerializeToString,
        )
        self._server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(_SERVICE, {"Export": export}),))
        address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        try:
            if credentials is None:
                self.port: int = self._server.add_insecure_port(address)
            else:  # TLS (serve.tls): a plaintext client fails its handshake and never reaches Export
                self.port = self._server.add_secure_port(address, credentials)
        except RuntimeError as exc:
            self._watchdog.stop()
            raise OSError(f"cannot listen on {address} (gRPC): {exc}") from None
        if self.port == 0:
            self._watchdog.stop()
            raise OSError(f"cannot listen on {address} (gRPC)")

    def start(self) -> None:
        self._server.start()

    def stop(self, grace: float) -> None:
        """Refuse new RPCs; those in progress get ``grace`` seconds to finish."""
        self._server.stop(grace).wait(grace)
        self._watchdog.stop()
