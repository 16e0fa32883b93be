"""Fetching recorded traces from Jaeger and Tempo over HTTP: paging, retries, errors that keep partial results.

The servers are real HTTP servers on 127.0.0.1 that answer with the response shapes of Jaeger's
``/api/traces`` and Tempo's ``/api/search`` + ``/api/v2/traces/<id>`` (base64 ids, as Tempo encodes them).
"""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest

from otel_toolcall_eval.cli import main
from otel_toolcall_eval.replay.remote import fetch_jaeger, fetch_tempo

pytestmark = pytest.mark.integration

NOW = float(int(time.time()))  # seconds; traces are spread over the hour before it


def _jaeger_trace(i: int) -> dict[str, Any]:
    trace_id = f"{i + 1:032x}"
    start = int((NOW - 60 * (i + 1)) * 1_000_000)
    return {
        "traceID": trace_id,
        "spans": [
            {
                "traceID": trace_id,
                "spanID": f"{i + 1:016x}",
                "operationName": "invoke_agent",
                "startTime": start,
                "duration": 1000,
                "tags": [{"key": "gen_ai.operation.name", "type": "string", "value": "invoke_agent"}],
                "processID": "p1",
            },
            {
                "traceID": trace_id,
                "spanID": f"{i + 1001:016x}",
                "operationName": "execute_tool t",
                "references": [{"refType": "CHILD_OF", "traceID": trace_id, "spanID": f"{i + 1:016x}"}],
                "startTime": start + 10,
                "duration": 100,
                "tags": [
                    {"key": "gen_ai.operation.name", "type": "string", "value": "execute_tool"},
                    {"key": "gen_ai.tool.name", "type": "string", "value": "t"},
                    {"key": "gen_ai.tool.call.arguments", "type": "string", "value": "{}" if i % 2 else "{bad"},
                ],
                "processID": "p1",
            },
        ],
        "processes": {"p1": {"serviceName": "agent", "tags": []}},
    }


def _otlp_trace(i: int) -> dict[str, Any]:
    """The same trace in OTLP JSON as Tempo answers it: ids base64-encoded."""
    b64 = lambda n, size: base64.b64encode(n.to_bytes(size, "big")).decode()  # noqa: E731
    start = int((NOW - 60 * (i + 1)) * 1e9)
    kv = lambda k, v: {"key": k, "value": {"stringValue": v}}  # noqa: E731
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": [kv("service.name", "agent")]},
                "scopeSpans": [
                    {
                        "scope": {"name": "x"},
                        "spans": [
                            {
                                "traceId": b64(i + 1, 16),
                                "spanId": b64(i + 1, 8),
                                "name": "invoke_agent",
                                "startTimeUnixNano": str(start),
                                "endTimeUnixNano": str(start + 10**6),
                                "attributes": [kv("gen_ai.operation.name", "invoke_agent")],
                            },
                            {
                                "traceId": b64(i + 1, 16),
                                "spanId": b64(i + 1001, 8),
                                "parentSpanId": b64(i + 1, 8),
                                "name": "execute_tool t",
                                "startTimeUnixNano": str(start + 10),
                                "endTimeUnixNano": str(start + 500),
                                "attributes": [
                                    kv("gen_ai.operation.name", "execute_tool"),
                                    kv("gen_ai.tool.name", "t"),
                                    kv("gen_ai.tool.call.arguments", "{}" if i % 2 else "{bad"),
                                ],
                            },
                        ],
                    }
                ],
            }
        ]
    }


class Server:
    """A tiny HTTP server whose answers a test scripts: ``plan`` maps a request number to a failure."""

    def __init__(self, route: Callable[[str, dict[str, list[str]]], tuple[int, Any]]) -> None:
        self.route = route
        self.requests: list[str] = []
        self.plan: dict[int, str] = {}
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                with outer.lock:
                    n = len(outer.requests)
                    outer.requests.append(self.path)
                    action = outer.plan.get(n, "")
                url = urlparse(self.path)
                if action == "500":
                    return self._send(500, b"upstream broke", "text/plain")
                if action == "slow":
                    time.sleep(1.0)
                if action == "garbage":
                    return self._send(200, b"<html>not json</html>", "text/html")
                status, body = outer.route(url.path, parse_qs(url.query))
                self._send(status, json.dumps(body).encode(), "application/json")

            def _send(self, status: int, body: bytes, ctype: str) -> None:
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", ctype)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def jaeger_route(traces: list[dict[str, Any]]) -> Callable[[str, dict[str, list[str]]], tuple[int, Any]]:
    def route(path: str, q: dict[str, list[str]]) -> tuple[int, Any]:
        if path != "/api/traces":
            return 404, {"errors": [{"msg": "not found"}]}
        start, end, limit = int(q["start"][0]), int(q["end"][0]), int(q["limit"][0])
        hits = [t for t in traces if start <= t["spans"][0]["startTime"] <= end]
        hits.sort(key=lambda t: -t["spans"][0]["startTime"])
        return 200, {"data": hits[:limit], "total": len(hits[:limit]), "limit": 0, "offset": 0, "errors": None}

    return route


@pytest.fixture
def jaeger() -> Iterator[Server]:
    server = Server(jaeger_route([_jaeger_trace(i) for i in range(45)]))
    yield server
    server.close()


def test_jaeger_pages_backwards_until_the_limit(jaeger: Server) -> None:
    seen: list[tuple[int, int]] = []
    result = fetch_jaeger(
        jaeger.url, "agent", limit=30, page_size=7, now=NOW, progress=lambda d, t: seen.append((d, t))
    )
    assert result.errors == []
    assert len(result.trace_ids) == 30 == len(set(result.trace_ids))
    assert result.trace_ids[:2] == [f"{1:032x}", f"{2:032x}"]  # newest first
    assert len(result.spans) == 60
    assert len(jaeger.requests) == 5  # 7 + 7 + 7 + 7 + 2
    assert seen[-1] == (30, 30)


def test_jaeger_lookback_bounds_the_walk(jaeger: Server) -> None:
    result = fetch_jaeger(jaeger.url, "agent", limit=100, page_size=10, lookback_seconds=10 * 60 + 30, now=NOW)
    assert len(result.trace_ids) == 10 and result.errors == []


def test_jaeger_transient_5xx_is_retried(jaeger: Server) -> None:
    jaeger.plan = {1: "500"}
    result = fetch_jaeger(jaeger.url, "agent", limit=20, page_size=10, now=NOW, backoff=0.01)
    assert result.errors == [] and len(result.trace_ids) == 20
    assert len(jaeger.requests) == 3


def test_jaeger_persistent_5xx_keeps_partial_results(jaeger: Server) -> None:
    jaeger.plan = {1: "500", 2: "500", 3: "500"}
    result = fetch_jaeger(jaeger.url, "agent", limit=40, page_size=10, now=NOW, retries=2, backoff=0.01)
    assert len(result.trace_ids) == 10  # the first page is kept
    assert result.errors == [f"GET {jaeger.url}/api/traces: HTTP 500 (after 3 attempts)"]


def test_jaeger_timeout_and_malformed_json(jaeger: Server) -> None:
    jaeger.plan = {0: "slow", 1: "slow"}
    timed_out = fetch_jaeger(jaeger.url, "agent", limit=5, now=NOW, timeout=0.2, retries=1, backoff=0.01)
    assert timed_out.trace_ids == [] and "timed out" in timed_out.errors[0]
    jaeger.requests.clear()
    jaeger.plan = {1: "garbage"}
    garbled = fetch_jaeger(jaeger.url, "agent", limit=20, page_size=10, now=NOW)
    assert len(garbled.trace_ids) == 10
    assert "answer is not JSON" in garbled.errors[0] and "<html>" in garbled.errors[0]


def tempo_route(traces: list[dict[str, Any]]) -> Callable[[str, dict[str, list[str]]], tuple[int, Any]]:
    starts = [int(t["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["startTimeUnixNano"]) for t in traces]

    def route(path: str, q: dict[str, list[str]]) -> tuple[int, Any]:
        if path == "/api/search":
            assert q["q"] == ["{ span.toolcall_eval.trace.composite_ok = false }"]
            start, end, limit = int(q["start"][0]) * 10**9, int(q["end"][0]) * 10**9, int(q["limit"][0])
            hits = [(s, i) for i, s in enumerate(starts) if start <= s <= end]
            hits.sort(reverse=True)
            found = [
                {"traceID": f"{i + 1:032x}", "startTimeUnixNano": str(s), "rootServiceName": "agent"}
                for s, i in hits[:limit]
            ]
            return 200, {"traces": found, "metrics": {}}
        if path.startswith("/api/v2/traces/"):
            i = int(path.rsplit("/", 1)[1], 16) - 1
            if i == 3:
                return 404, {"error": "not found"}  # an older Tempo: only the v1 endpoint
            return 200, {"trace": traces[i], "status": "COMPLETE"}
        if path.startswith("/api/traces/"):
            i = int(path.rsplit("/", 1)[1], 16) - 1
            return 200, {"batches": traces[i]["resourceSpans"]}
        return 404, {}

    return route


def test_tempo_search_pages_and_fetches_each_trace() -> None:
    server = Server(tempo_route([_otlp_trace(i) for i in range(12)]))
    try:
        query = "{ span.toolcall_eval.trace.composite_ok = false }"
        result = fetch_tempo(server.url, query, limit=12, page_size=5, now=NOW)
        assert result.errors == []
        assert len(result.trace_ids) == 12 and len(result.spans) == 24
        assert sum(1 for p in server.requests if p.startswith("/api/search")) == 3
        assert "/api/traces/" + f"{4:032x}" in server.requests  # fell back to v1 on 404
        tool = next(s for s in result.spans if s.name == "execute_tool t" and s.context.trace_id == 1)
        assert tool.parent is not None and tool.parent.span_id == 1  # base64 ids decoded
    finally:
        server.close()


def test_cli_replay_from_jaeger(jaeger: Server, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["replay", "--jaeger-url", jaeger.url, "--service", "agent", "--limit", "6", "--lookback", "3650d"])
    assert code == 0
    out = capsys.readouterr().out
    assert "replayed 12 spans in 6 traces" in out
    assert "composite ok-rate: 50.0%" in out  # every other trace sent unparseable arguments
