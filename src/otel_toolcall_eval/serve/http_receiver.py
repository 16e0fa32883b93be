"""OTLP/HTTP: ``POST /v1/traces`` (protobuf or JSON, gzip/deflate), plus ``/healthz`` and ``/readyz``.

The standard library's threading server, bounded against careless and hostile clients (issue 28):

- Time: every read has a deadline for its whole phase, not per ``recv`` (``_DeadlineReader``): a keep-alive
  connection waits at most ``idle_timeout_seconds`` for its next request, a request's line and headers must all
  arrive within ``head_timeout_seconds`` of its first byte, and its body within ``request_timeout_seconds`` of the
  headers; a client dripping a byte at a time is cut off at the deadline.
- Who holds a thread: a connection that is not in an authenticated request (reading a head, idle between
  requests, a TLS handshake) is *pending*; at most ``max_pending_connections`` are, and a new connection past that
  closes the oldest pending one. The token is checked as soon as the headers are in, before the body is read;
  only then does the request take one of the ``max_concurrent_requests`` slots (none free: 503 with
  ``Retry-After``), so those slots are for authenticated senders, whatever the unauthenticated ones do.
- Bytes: a body needs a ``Content-Length`` no larger than ``max_message_bytes`` (else 411/413, unread) or comes
  chunked (as the OpenTelemetry JS exporters send it), read no further than the maximum; before it is read, and
  again once decompressed with its decoding cost estimated (``decode.estimate``), it reserves its share of
  ``max_inflight_bytes`` (none left: 503 with ``Retry-After``); the decoded spans then hold ``max_queue_bytes``
  until exported (full: 429).

Every answer to a valid but refused request is retryable per OTLP (429 for a full queue, 503 while shutting down
or busy). Errors carry a ``google.rpc.Status`` in the request's encoding, as the OTLP spec asks. With
``serve.tls`` every connection is TLS (handshake on the connection's thread, within the head timeout); a
plaintext client fails the handshake and reaches nothing.
"""

from __future__ import annotations

import contextlib
import io
import logging
import socket
import ssl
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
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
    estimate,
    media_type,
    partial_success,
)
from otel_toolcall_eval.serve.intake import Admission, Intake
from otel_toolcall_eval.serve.pipeline import Reservation

logger = logging.getLogger("otel_toolcall_eval.serve")


@dataclass(frozen=True)
class HttpBounds:
    """How many connections, and how long each phase of a request may take: the ``serve:`` settings, whose
    defaults live in ``config.serve`` alone."""

    max_concurrent: int
    max_pending: int
    idle_seconds: float
    head_seconds: float
    request_seconds: float


class _Conn:
    """One connection, as the server tracks it: its socket (the TLS one once wrapped)."""

    __slots__ = ("sock",)

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock


class _DeadlineReader(io.RawIOBase):
    """The socket's bytes, each ``recv`` given only what is left of the handler's current deadline, so a phase
    (the wait for a request, its head, its body) ends at its deadline however slowly the bytes come."""

    def __init__(self, sock: socket.socket, handler: _Handler) -> None:
        self._sock = sock
        self._handler = handler

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        remaining = self._handler.deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("the request's deadline passed")
        self._sock.settimeout(remaining)
        return self._sock.recv_into(buffer)


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"  # keep-alive, as the OTLP exporters' sessions expect
    default_request_version = "HTTP/1.0"  # a garbled request line still gets a status line (0.9 would have none)
    server_version = "otel-toolcall-eval"
    sys_version = ""  # no Python version in the Server header
    timeout = None  # per phase instead: ``deadline``, enforced by ``_DeadlineReader``
    deadline = 0.0

    def setup(self) -> None:
        super().setup()
        self.rfile.close()
        self.rfile = self._reader = io.BufferedReader(_DeadlineReader(self.connection, self), 64 * 1024)

    def handle_one_request(self) -> None:
        """Wait for the next request within the idle timeout, then give its line and headers the head timeout."""
        bounds = self.server.bounds
        self.deadline = time.monotonic() + bounds.idle_seconds
        try:
            first = self._reader.peek(1)
        except OSError:  # TimeoutError included: an idle connection closed, or the client went away
            first = b""
        if not first:
            self.close_connection = True
            return
        self.deadline = time.monotonic() + bounds.head_seconds
        super().handle_one_request()

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
        json = media_type(self.headers.get("Content-Type")) == JSON
        if self.path.split("?", 1)[0] != "/v1/traces":
            self.close_connection = True
            intake.reject("unknown_path")
            self._error(HTTPStatus.NOT_FOUND, "only POST /v1/traces is served", json)
            return
        if not intake.authorized(self.headers.get("Authorization")):  # as soon as the headers are in
            self.close_connection = True
            intake.reject("unauthenticated")
            self._error(HTTPStatus.UNAUTHORIZED, "a valid bearer token is required", json)
            return
        if not self.server.enter():
            self.close_connection = True  # the body is never read
            intake.reject("too_many_requests")
            self._error(HTTPStatus.SERVICE_UNAVAILABLE, "busy: retry later", json, retry_after=intake.retry_after)
            return
        intake.begin()
        reservation = intake.inflight.reservation()
        try:
            self.deadline = time.monotonic() + self.server.bounds.request_seconds
            self._post(intake, reservation, json)
        except TimeoutError:
            self.close_connection = True
            intake.reject("timeout")
        finally:
            reservation.close()
            intake.end()
            self.server.leave()

    def _busy(self, json: bool, close: bool) -> None:
        """The requests in flight hold ``max_inflight_bytes``: retryable; ``close`` when the body was not read."""
        self.close_connection = self.close_connection or close
        intake = self.server.intake
        self._error(HTTPStatus.SERVICE_UNAVAILABLE, f"{intake.busy().value}: retry later", json, intake.retry_after)

    def _post(self, intake: Intake, reservation: Reservation, json: bool) -> None:
        body = self._body(reservation, json)
        if body is None:
            return
        invalid: list[str] = []
        content_type = self.headers.get("Content-Type")
        try:
            decoded = decompress(body, self.headers.get("Content-Encoding"), intake.max_bytes)
            if not intake.reserve(reservation, len(body) + estimate(decoded, content_type)):
                self._busy(json, close=False)
                return
            spans = decode_spans(decoded, content_type, intake.queue.max_spans, invalid, intake.limits)
        except BadPayload as exc:
            intake.reject("too_large" if exc.status == 413 else "bad_payload")
            self._error(HTTPStatus(exc.status), str(exc), json)
            return
        outcome = intake.admit(spans, "http", invalid=len(invalid), nbytes=len(decoded))
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

    def _reserve(self, reservation: Reservation, total: int, json: bool) -> bool:
        """The body's bytes held before they are read; ``False`` when refused (answered; the body is never read)."""
        intake = self.server.intake
        try:
            if intake.reserve(reservation, total):
                return True
        except BadPayload as exc:
            intake.reject("too_large")
            self._refuse(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, str(exc), counted=True)
            return False
        self._busy(json, close=True)
        return False

    def _body(self, reservation: Reservation, json: bool) -> bytes | None:
        """The request body, by Content-Length or chunked, its bytes reserved before they are read; ``None``
        when refused (the answer is sent)."""
        coding = self.headers.get("Transfer-Encoding")
        if coding is None:
            length = self._content_length()
            if length is None:
                return None
            if not self._reserve(reservation, length, json):
                return None
            body = self.rfile.read(length)
            if len(body) < length:
                return self._refuse(HTTPStatus.BAD_REQUEST, "body shorter than Content-Length")
            return body
        if coding.strip().lower() != "chunked":
            return self._refuse(HTTPStatus.NOT_IMPLEMENTED, "only the chunked transfer coding is supported")
        if self.headers.get("Content-Length") is not None:  # RFC 9112 6.3: a smuggling attempt, never both
            return self._refuse(HTTPStatus.BAD_REQUEST, "Content-Length and Transfer-Encoding together")
        return self._chunked(reservation, json)

    def _chunked(self, reservation: Reservation, json: bool) -> bytes | None:
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
            if not self._reserve(reservation, total, json):
                return None
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
        self.connection.settimeout(self.server.bounds.head_seconds)  # a client that does not read is cut off
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
        self.connection.settimeout(self.server.bounds.head_seconds)
        self.send_response(status)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_error(self, format: str, *args: Any) -> None:
        if format.startswith("Request timed out"):  # the head's deadline passed (the standard library's words)
            self.server.intake.reject("timeout")

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
        bounds: HttpBounds,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.address_family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        self.intake = intake
        self.bounds = bounds
        self._tls = tls
        self._slots = threading.BoundedSemaphore(bounds.max_concurrent)
        self._lock = threading.Lock()
        self._pending: OrderedDict[_Conn, None] = OrderedDict()  # oldest first
        self._local = threading.local()  # the connection this thread serves
        super().__init__(address, _Handler)

    # --- who holds a thread -------------------------------------------------------------------------------
    def _pend(self, conn: _Conn) -> None:
        """``conn`` is not in an authenticated request; past ``max_pending`` the oldest such connection is closed
        (its thread's read fails at once and it ends), so nobody can hold the threads by saying nothing."""
        victims = []
        with self._lock:
            self._pending[conn] = None
            while len(self._pending) > self.bounds.max_pending:
                victims.append(self._pending.popitem(last=False)[0])
        for victim in victims:
            self.intake.reject("evicted")
            with contextlib.suppress(OSError):
                socket.socket.shutdown(victim.sock, socket.SHUT_RDWR)  # the plain socket's, TLS or not

    def _unpend(self, conn: _Conn) -> None:
        with self._lock:
            self._pending.pop(conn, None)

    def enter(self) -> bool:
        """The current request is authenticated: it leaves the pending connections for a request slot;
        ``False`` when every slot is taken (the caller answers 503 and closes)."""
        conn: _Conn = self._local.conn
        self._unpend(conn)
        return self._slots.acquire(blocking=False)

    def leave(self) -> None:
        """The authenticated request is answered: its slot is free, the connection pending again (keep-alive)."""
        self._slots.release()
        self._pend(self._local.conn)

    def process_request(self, request: Any, client_address: Any) -> None:
        conn = _Conn(request)
        self._pend(conn)
        thread = threading.Thread(
            target=self._serve, args=(request, client_address, conn), name="toolcall-eval-serve-http-conn"
        )
        thread.daemon = True
        thread.start()

    def _serve(self, request: Any, client_address: Any, conn: _Conn) -> None:
        self._local.conn = conn
        try:
            self.finish_request(request, client_address)
        except Exception:  # noqa: BLE001 - what socketserver's own thread does: the client's business, logged
            self.handle_error(request, client_address)
        finally:
            self._unpend(conn)
            self.shutdown_request(request)

    def finish_request(self, request: Any, client_address: Any) -> None:
        """With TLS, the handshake runs here, on the connection's own thread (a slow or plaintext client never
        holds up the accepting one) and within the idle timeout; a failed handshake is counted, not logged."""
        if self._tls is None:
            super().finish_request(request, client_address)
            return
        request.settimeout(self.bounds.head_seconds)  # per read; the pending bound closes a slow one's connection
        try:
            secure = self._tls.wrap_socket(request, server_side=True, do_handshake_on_connect=False)
        except OSError:
            self.intake.reject("tls_handshake")
            return
        self._local.conn.sock = secure
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
        self, host: str, port: int, intake: Intake, bounds: HttpBounds, tls: ssl.SSLContext | None = None
    ) -> None:
        self._server = _Server((host, port), intake, bounds, tls)
        self.port: int = self._server.server_address[1]
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.1}, name="toolcall-eval-serve-http"
        )

    def start(self) -> None:
        self._thread.start()

    def stop(self, deadline: float) -> None:
        """Stop accepting connections; requests in progress finish (``Intake.wait_idle`` waits for them)."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=max(0.0, deadline - time.monotonic()))
