"""OTLP/HTTP: ``POST /v1/traces`` (protobuf or JSON, gzip/deflate), plus ``/healthz`` and ``/readyz``.

The standard library's threading server, bounded: at most ``max_concurrent_requests`` connections are served
at once (the next is answered 503 with ``Retry-After`` without being read), a body needs a ``Content-Length``
no larger than the maximum (else 411/413, unread) or comes chunked (as the OpenTelemetry JS exporters send it),
read no further than the maximum; sockets time out when idle, and every answer to a valid but
refused request is retryable per OTLP (429 for a full queue, 503 while shutting down). Errors carry a
``google.rpc.Status`` in the request's encoding, as the OTLP spec asks. With ``serve.tls`` every connection is
TLS (handshake on the connection's thread); a plaintext client fails the handshake and reaches nothing.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import ssl
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import orjson
from google.protobuf import json_format
from google.rpc import status_pb2

from otel_toolcall_eval.serve.decode import (
    JSON,
    PROTOBUF,
    BadPayload,
    decode_spans,
    decompress,
    media_type,
    partial_success,
)
from otel_toolcall_eval.serve.intake import Admission, Intake

logger = logging.getLogger("otel_toolcall_eval.serve")

_BUSY = b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: %d\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"  # keep-alive, as the OTLP exporters' sessions expect
    timeout = 30  # an idle or slow connection gives its slot back

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path == "/healthz":
            self._plain(HTTPStatus.OK, b"ok\n")
        elif path == "/readyz":
            ready = self.server.intake.ready()
            self._plain(HTTPStatus.OK if ready else HTTPStatus.SERVICE_UNAVAILABLE, b"ready\n" if ready else b"busy\n")
        else:
            self._plain(HTTPStatus.NOT_FOUND, b"not found\n")

    def do_POST(self) -> None:
        intake = self.server.intake
        intake.begin()
        try:
            self._post(intake)
        finally:
            intake.end()

    def _post(self, intake: Intake) -> None:
        json = media_type(self.headers.get("Content-Type")) == JSON
        if self.path.split("?", 1)[0] != "/v1/traces":
            self.close_connection = True
            intake.reject("unknown_path")
            self._error(HTTPStatus.NOT_FOUND, "only POST /v1/traces is served", json)
            return
        if not intake.authorized(self.headers.get("Authorization")):
            self.close_connection = True
            intake.reject("unauthenticated")
            self._error(HTTPStatus.UNAUTHORIZED, "a valid bearer token is required", json)
            return
        body = self._body()
        if body is None:
            return
        invalid: list[str] = []
        try:
            spans = decode_spans(
                decompress(body, self.headers.get("Content-Encoding"), intake.max_bytes),
                self.headers.get("Content-Type"),
                intake.queue.max_spans,
                invalid,
            )
        except BadPayload as exc:
            intake.reject("too_large" if exc.status == 413 else "bad_payload")
            self._error(HTTPStatus(exc.status), str(exc), json)
            return
        outcome = intake.admit(spans, "http", invalid=len(invalid))
        if outcome is Admission.ACCEPTED:
            response = partial_success(invalid)
            if json:
                payload = orjson.dumps(json_format.MessageToDict(response)) if invalid else b"{}"
            else:
                payload = response.SerializeToString()
            self._send(HTTPStatus.OK, payload, json)
            return
        status = HTTPStatus.TOO_MANY_REQUESTS if outcome is Admission.FULL else HTTPStatus.SERVICE_UNAVAILABLE
        self._error(status, f"{outcome.value}: retry later", json, retry_after=intake.retry_after)

    def _body(self) -> bytes | None:
        """The request body, by Content-Length or chunked; ``None`` when refused (the answer is sent)."""
        coding = self.headers.get("Transfer-Encoding")
        if coding is None:
            length = self._content_length()
            if length is None:
                return None
            body = self.rfile.read(length)
            if len(body) < length:
                return self._refuse(HTTPStatus.BAD_REQUEST, "body shorter than Content-Length")
            return body
        if coding.strip().lower() != "chunked":
            return self._refuse(HTTPStatus.NOT_IMPLEMENTED, "only the chunked transfer coding is supported")
        if self.headers.get("Content-Length") is not None:  # RFC 9112 6.3: a smuggling attempt, never both
            return self._refuse(HTTPStatus.BAD_REQUEST, "Content-Length and Transfer-Encoding together")
        return self._chunked()

    def _chunked(self) -> bytes | None:
        """A chunked body (the OpenTelemetry JS exporters send one), read chunk by chunk: a chunk that would take
        the body past ``max_message_bytes`` is refused before it is read, and every size or trailer line is
        bounded, so an endless or lying sender costs at most the limit."""
        limit = self.server.intake.max_bytes
        parts: list[bytes] = []
        total = 0
        while True:
            line = self.rfile.readline(_MAX_LINE + 1)
            if len(line) > _MAX_LINE or not line.endswith(b"\n"):
                return self._refuse(HTTPStatus.BAD_REQUEST, "bad chunk size line")
            try:
                size = int(line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                size = -1
            if size < 0:
                return self._refuse(HTTPStatus.BAD_REQUEST, "bad chunk size")
            if size == 0:
                break
            total += size
            if total > limit:
                self.server.intake.reject("too_large")
                return self._refuse(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"body exceeds {limit} bytes", counted=True)
            chunk = self.rfile.read(size)
            if len(chunk) < size or self.rfile.read(2) != b"\r\n":
                return self._refuse(HTTPStatus.BAD_REQUEST, "chunked body cut short")
            parts.append(chunk)
        for _ in range(_MAX_TRAILERS + 1):  # trailer fields are read and ignored, up to the empty line
            line = self.rfile.readline(_MAX_LINE + 1)
            if line in (b"\r\n", b"\n"):
                return b"".join(parts)
            if len(line) > _MAX_LINE or not line.endswith(b"\n"):
                break
        return self._refuse(HTTPStatus.BAD_REQUEST, "bad chunked trailer")

    def _refuse(self, status: HTTPStatus, message: str, counted: bool = False) -> bytes | None:
        """Answer a body that cannot be read with ``status`` and drop the connection (its framing is lost)."""
        self.close_connection = True
        if not counted:
            self.server.intake.reject("bad_payload")
        self._error(status, message, media_type(self.headers.get("Content-Type")) == JSON)
        return None

    def _content_length(self) -> int | None:
        """The declared body size; answers 411/413/400 itself (and drops the connection) when it is unusable."""
        json = media_type(self.headers.get("Content-Type")) == JSON
        intake = self.server.intake
        raw = self.headers.get("Content-Length")
        if raw is None:
            self.close_connection = True
            intake.reject("bad_payload")
            self._error(HTTPStatus.LENGTH_REQUIRED, "a Content-Length or a chunked body is required", json)
            return None
        try:
            length = int(raw)
        except ValueError:
            length = -1
        if length < 0:
            self.close_connection = True
            intake.reject("bad_payload")
            self._error(HTTPStatus.BAD_REQUEST, "Content-Length is not a size", json)
            return None
        if length > intake.max_bytes:
            self.close_connection = True  # the body is never read
            intake.reject("too_large")
            self._error(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"body exceeds {intake.max_bytes} bytes", json)
            return None
        return length

    def _error(self, status: HTTPStatus, message: str, json: bool, retry_after: int | None = None) -> None:
        error = status_pb2.Status(code=_GRPC_CODE.get(status, 3), message=message)
        body = orjson.dumps(json_format.MessageToDict(error)) if json else error.SerializeToString()
        self._send(status, body, json, retry_after)

    def _send(self, status: HTTPStatus, body: bytes, json: bool, retry_after: int | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", JSON if json else PROTOBUF)
        self.send_header("Content-Length", str(len(body)))
        if retry_after is not None:
            self.send_header("Retry-After", str(retry_after))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)

    def _plain(self, status: HTTPStatus, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # one line per request would be the service's heaviest output; the metrics count what matters


# google.rpc.Code for the Status body
_GRPC_CODE = {
    HTTPStatus.BAD_REQUEST: 3,  # INVALID_ARGUMENT
    HTTPStatus.UNAUTHORIZED: 16,  # UNAUTHENTICATED
    HTTPStatus.NOT_FOUND: 5,
    HTTPStatus.LENGTH_REQUIRED: 3,
    HTTPStatus.REQUEST_ENTITY_TOO_LARGE: 8,  # RESOURCE_EXHAUSTED
    HTTPStatus.UNSUPPORTED_MEDIA_TYPE: 3,
    HTTPStatus.TOO_MANY_REQUESTS: 14,  # UNAVAILABLE
    HTTPStatus.SERVICE_UNAVAILABLE: 14,
    HTTPStatus.NOT_IMPLEMENTED: 12,  # UNIMPLEMENTED
}
_MAX_LINE = 1024  # a chunk-size or trailer line
_MAX_TRAILERS = 32


class _Server(ThreadingHTTPServer):
    daemon_threads = True  # idle keep-alive connections must not hold the process at exit
    intake: Intake

    def __init__(
        self,
        address: tuple[str, int],
        intake: Intake,
        max_connections: int,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.address_family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        self.intake = intake
        self._tls = tls
        self._slots = threading.BoundedSemaphore(max_connections)
        super().__init__(address, _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self.intake.reject("too_many_connections")
            if self._tls is None:  # with TLS the answer would need a handshake on the accepting thread: closed
                with contextlib.suppress(OSError):
                    request.sendall(_BUSY % self.intake.retry_after)
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except Exception:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def finish_request(self, request: Any, client_address: Any) -> None:
        """With TLS, the handshake runs here, on the connection's own thread (a slow or plaintext client never
        holds up the accepting one) and within the idle timeout; a failed handshake is counted, not logged."""
        if self._tls is None:
            super().finish_request(request, client_address)
            return
        request.settimeout(_Handler.timeout)
        try:
            secure = self._tls.wrap_socket(request, server_side=True, do_handshake_on_connect=False)
        except OSError:
            self.intake.reject("tls_handshake")
            return
        try:
            try:
                secure.do_handshake()
            except (OSError, ValueError):  # ssl.SSLError is an OSError: plaintext, an untrusted client cert ...
                self.intake.reject("tls_handshake")
                return
            super().finish_request(secure, client_address)
        finally:
            with contextlib.suppress(OSError):
                secure.shutdown(socket.SHUT_RDWR)
            secure.close()

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A connection that breaks mid-request (a reset, a TLS alert) is the client's business; the standard
        # library would print a traceback per connection to stderr. The metrics count refused requests.
        logger.debug("toolcall-eval serve: connection from %s failed", client_address, exc_info=True)


class HttpReceiver:
    def __init__(
        self, host: str, port: int, intake: Intake, max_connections: int, tls: ssl.SSLContext | None = None
    ) -> None:
        self._server = _Server((host, port), intake, max_connections, tls)
        self.port: int = self._server.server_address[1]
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.1}, name="toolcall-eval-serve-http"
        )

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop accepting connections; requests in progress finish (``Intake.wait_idle`` waits for them)."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
