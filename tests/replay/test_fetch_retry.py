"""Retries of the Jaeger/Tempo fetch (tenacity): what is retried, how long it waits, what the final error says.

A real HTTP server on 127.0.0.1 answers each request with the next scripted status; ``time.sleep`` is recorded
instead of slept, so the backoff schedule is checked exactly without timing anything.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from otel_toolcall_eval.replay.remote import fetch_jaeger, fetch_tempo

NOW = 1_700_000_000.0
EMPTY_PAGE = json.dumps({"data": [], "total": 0, "limit": 0, "offset": 0, "errors": None}).encode()


class Scripted:
    """Answers request n with ``statuses[n]`` (the last one repeats); 200 is an empty Jaeger page."""

    def __init__(self) -> None:
        self.statuses: list[int | str] = [200]
        self.paths: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                n = len(outer.paths)
                outer.paths.append(self.path)
                status = outer.statuses[min(n, len(outer.statuses) - 1)]
                body, ctype = (EMPTY_PAGE, "application/json") if status == 200 else (b"nope", "text/plain")
                if status == "html":
                    status, body, ctype = 200, b"<html>maintenance</html>", "text/html"
                self.send_response(int(status))
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()


@pytest.fixture
def server() -> Iterator[Scripted]:
    s = Scripted()
    yield s
    s.httpd.shutdown()
    s.httpd.server_close()
    s.thread.join()


@pytest.fixture
def waits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    slept: list[float] = []
    monkeypatch.setattr(time, "sleep", slept.append)
    return slept


def test_5xx_and_429_are_retried_with_exponential_backoff(server: Scripted, waits: list[float]) -> None:
    server.statuses = [429, 503, 200]
    result = fetch_jaeger(server.url, "agent", now=NOW, retries=3, backoff=0.5)
    assert result.errors == []
    assert len(server.paths) == 3
    assert waits == [0.5, 1.0]


def test_persistent_failure_names_url_status_and_attempts(server: Scripted, waits: list[float]) -> None:
    server.statuses = [502]
    result = fetch_jaeger(server.url, "agent", now=NOW, retries=3, backoff=0.25)
    assert result.errors == [f"GET {server.url}/api/traces: HTTP 502 (after 4 attempts)"]
    assert len(server.paths) == 4
    assert waits == [0.25, 0.5, 1.0]


@pytest.mark.parametrize("status", [400, 404])
def test_4xx_fails_at_once(server: Scripted, waits: list[float], status: int) -> None:
    server.statuses = [status, 200]
    result = fetch_jaeger(server.url, "agent", now=NOW, retries=3, backoff=0.5)
    assert result.errors == [f"GET {server.url}/api/traces: HTTP {status}: nope"]
    assert len(server.paths) == 1 and waits == []


def test_non_json_answer_fails_at_once(server: Scripted, waits: list[float]) -> None:
    server.statuses = ["html", 200]
    result = fetch_jaeger(server.url, "agent", now=NOW, retries=3, backoff=0.5)
    assert len(result.errors) == 1 and "answer is not JSON" in result.errors[0] and "maintenance" in result.errors[0]
    assert len(server.paths) == 1 and waits == []


def test_transport_errors_are_retried(waits: list[float]) -> None:
    with socket.socket() as probe:  # a port nothing listens on: connection refused
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    result = fetch_tempo(f"http://127.0.0.1:{port}", "{ }", now=NOW, retries=2, backoff=0.1)
    assert len(result.errors) == 1
    assert result.errors[0].startswith(f"GET http://127.0.0.1:{port}/api/search: ")
    assert result.errors[0].endswith("(after 3 attempts)")
    assert waits == [0.1, 0.2]
