"""The labelling page: a local web server (127.0.0.1 only) where a person labels the queue's judged calls.

The rater sees the call (tool, arguments, result, outcome), what the judge received (the question, its scale
and the redacted fields it was sent: request, tools ...) and, by default, not the judge's verdict, so the judge
cannot anchor them (``show_verdict=True`` shows it). Keys: 1-9 pick a label of the scale, ``p`` the
best-scored label, ``f`` the worst-scored, ``s`` skips. Each label is appended to the labels file at once
(``dataset/labels.py``'s format, one ``humans: {rater: label}`` line, ``O_APPEND`` and ``fsync`` under a lock),
so closing the tab or killing the server loses nothing, and a restart resumes after the rater's last label.
Several raters, each with their name, can label the same queue into the same file.

Trace data is untrusted: the page is static, it receives the items as JSON and renders them with ``textContent``
only, under a Content-Security-Policy that allows no inline script, no other origin and no framing. The server
answers only requests whose ``Host`` is its own address (no DNS rebinding), and takes labels only as JSON POSTs
from its own origin.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from datetime import datetime, timezone
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Final

import orjson

from otel_toolcall_eval._files import append_durably
from otel_toolcall_eval.dataset.errors import LocatedError
from otel_toolcall_eval.dataset.labels import read_labels
from otel_toolcall_eval.errors import OutputError
from otel_toolcall_eval.judge.label_assets import APP_CSS, APP_JS, INDEX_HTML

MAX_QUEUE_LINE_BYTES: Final = 1 << 20
MAX_QUEUE_ITEMS: Final = 10_000
MAX_BODY_BYTES: Final = 4096
CSP: Final = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'none'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
SKIP: Final = "skip"


class QueueError(LocatedError):
    """A queue file is unreadable or an item in it is invalid."""


def read_queue(path: str | Path) -> list[dict[str, Any]]:
    """The queue's items (``judge queue``'s format), checked: item, question and a scale of labels."""
    out: list[dict[str, Any]] = []
    try:
        handle = open(path, "rb")  # noqa: SIM115 - closed below
    except OSError as exc:
        raise QueueError(path, None, None, f"cannot read: {exc.strerror or exc}") from None
    with handle:
        for number, raw in enumerate(iter(lambda: handle.readline(MAX_QUEUE_LINE_BYTES + 1), b""), start=1):
            if len(raw) > MAX_QUEUE_LINE_BYTES:
                raise QueueError(path, number, None, f"line longer than {MAX_QUEUE_LINE_BYTES:,} bytes")
            if not raw.strip():
                continue
            if len(out) >= MAX_QUEUE_ITEMS:
                raise QueueError(path, number, None, f"more than {MAX_QUEUE_ITEMS:,} items")
            try:
                item = orjson.loads(raw)
            except orjson.JSONDecodeError as exc:
                raise QueueError(path, number, None, f"not JSON: {exc}") from None
            if not isinstance(item, dict):
                raise QueueError(path, number, None, "expected a JSON object")
            for key in ("item", "question", "judge"):
                if not isinstance(item.get(key), str) or not item[key]:
                    raise QueueError(path, number, key, "required: a non-empty string")
            scale = item.get("scale")
            if (
                not isinstance(scale, list)
                or len(scale) < 2
                or not all(isinstance(s, dict) and isinstance(s.get("label"), str) for s in scale)
            ):
                raise QueueError(path, number, "scale", "required: a list of at least two {label, score, meaning}")
            for key in ("data", "tool_call"):
                if not isinstance(item.get(key, {}), dict):
                    raise QueueError(path, number, key, "must be an object")
            out.append(item)
    return out


class LabelSession:
    """The queue, the labels file and one rater: what is left to label, and appending a label."""

    def __init__(
        self, queue: Sequence[dict[str, Any]], labels: str | Path, rater: str, *, show_verdict: bool = False
    ) -> None:
        if not rater or len(rater) > 100:
            raise ValueError("rater: a name of 1 to 100 characters")
        self.queue = list(queue)
        self.labels = Path(labels)
        self.rater = rater
        self.show_verdict = show_verdict
        self._lock = threading.Lock()
        self._skipped: set[int] = set()
        done: set[tuple[str, str]] = set()
        if self.labels.exists():
            for record in read_labels(self.labels):  # a damaged file stops here, naming its line
                if any(name == rater for name, _ in record.humans):
                    done.add((record.question, record.item))
        self._done = {i for i, item in enumerate(self.queue) if (item["question"], item["item"]) in done}

    def state(self) -> dict[str, Any]:
        """The next item for this rater (or none) and the progress."""
        with self._lock:
            index = next((i for i in range(len(self.queue)) if i not in self._done and i not in self._skipped), None)
            body: dict[str, Any] = {
                "rater": self.rater,
                "total": len(self.queue),
                "labelled": len(self._done),
                "skipped": len(self._skipped),
                "item": None,
            }
            if index is not None:
                item = self.queue[index]
                shown = {
                    "index": index,
                    "item": item["item"],
                    "question": item["question"],
                    "prompt": item.get("prompt") or "",
                    "scale": [
                        {"label": s["label"], "score": s.get("score"), "meaning": s.get("meaning") or ""}
                        for s in item["scale"]
                    ],
                    "tool_call": item.get("tool_call") or {},
                    "data": item.get("data") or {},
                }
                if self.show_verdict:
                    shown["judge"] = item["judge"]
                    shown["explanation"] = item.get("explanation")
                body["item"] = shown
            return body

    def label(self, index: Any, label: Any) -> str | None:
        """Record a label (or a skip) for the item at ``index``; the error message when it is not valid."""
        if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < len(self.queue):
            return "index: not an item of the queue"
        item = self.queue[index]
        labels = [s["label"] for s in item["scale"]]
        if label != SKIP and label not in labels:
            return f"label: not one of {labels} or '{SKIP}'"
        with self._lock:
            if index in self._done:
                return "index: already labelled by this rater"
            if label == SKIP:
                self._skipped.add(index)
                return None
            line = {
                "item": item["item"],
                "question": item["question"],
                "judge": item["judge"],
                "humans": {self.rater: label},
                "labelled_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            }
            append_durably(self.labels, orjson.dumps(line) + b"\n")
            self._done.add(index)
        return None


_STATIC: Final = {
    "/": ("text/html; charset=utf-8", INDEX_HTML.encode()),
    "/app.js": ("text/javascript; charset=utf-8", APP_JS.encode()),
    "/app.css": ("text/css; charset=utf-8", APP_CSS.encode()),
}


def make_server(session: LabelSession, port: int = 0) -> ThreadingHTTPServer:
    """A server on 127.0.0.1 (``port`` 0: any free one); ``serve_forever`` it, ``shutdown`` to stop."""
    bound: list[int] = [port]  # the port actually bound, once known

    class Handler(BaseHTTPRequestHandler):
        server_version = "toolcall-eval-label"
        sys_version = ""

        def log_message(self, *args: Any) -> None:  # the terminal shows the rater's progress, not access logs
            return

        def _allowed_host(self) -> bool:
            host = self.headers.get("Host", "")
            port = bound[0]
            return host in (f"127.0.0.1:{port}", f"localhost:{port}")

        def _send(self, status: HTTPStatus, content_type: str, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Content-Security-Policy", CSP)
            self.send_header("X-Content-Type-Options", "nosniff")
            self.send_header("Referrer-Policy", "no-referrer")
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(body)

        def _json(self, status: HTTPStatus, value: Any) -> None:
            self._send(status, "application/json", orjson.dumps(value))

        def do_GET(self) -> None:
            if not self._allowed_host():
                self._send(HTTPStatus.MISDIRECTED_REQUEST, "text/plain", b"wrong host")
                return
            if self.path == "/api/state":
                self._json(HTTPStatus.OK, session.state())
                return
            found = _STATIC.get(self.path)
            if found is None:
                self._send(HTTPStatus.NOT_FOUND, "text/plain", b"not found")
                return
            self._send(HTTPStatus.OK, *found)

        def do_POST(self) -> None:
            port = bound[0]
            origin = self.headers.get("Origin")
            if not self._allowed_host() or (
                origin is not None and origin not in (f"http://127.0.0.1:{port}", f"http://localhost:{port}")
            ):
                self._send(HTTPStatus.FORBIDDEN, "text/plain", b"forbidden")
                return
            if self.path != "/api/label":
                self._send(HTTPStatus.NOT_FOUND, "text/plain", b"not found")
                return
            if self.headers.get("Content-Type", "").split(";")[0].strip() != "application/json":
                self._send(HTTPStatus.UNSUPPORTED_MEDIA_TYPE, "text/plain", b"JSON only")
                return
            try:
                length = int(self.headers.get("Content-Length", "0"))
            except ValueError:
                length = -1
            if not 0 <= length <= MAX_BODY_BYTES:
                self._send(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, "text/plain", b"too large")
                return
            try:
                body = orjson.loads(self.rfile.read(length))
            except orjson.JSONDecodeError:
                body = None
            if not isinstance(body, dict):
                self._json(HTTPStatus.BAD_REQUEST, {"error": "expected a JSON object"})
                return
            try:
                error = session.label(body.get("index"), body.get("label"))
            except OutputError as exc:
                self._json(HTTPStatus.INTERNAL_SERVER_ERROR, {"error": str(exc)})
                return
            if error is not None:
                self._json(HTTPStatus.BAD_REQUEST, {"error": error})
                return
            self._json(HTTPStatus.OK, session.state())

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    bound[0] = server.server_port
    return server
