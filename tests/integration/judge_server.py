"""A local stand-in for the judge's model APIs on 127.0.0.1: OpenAI chat completions and Anthropic Messages.

A real HTTP server (threads, so slow answers overlap) answering with the providers' real response shapes,
usage included, and their error shapes. Tests script it per request: ``script`` is consumed one action per
request (``Status``, ``Content``, ``Raw``, ``Hold``, ``Delay``); with nothing scripted it answers with the
label ``pick(request)`` chooses. It checks the API key headers and records every request it received.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

OPENAI_KEY = "sk-test-openai-0123456789abcdef"
ANTHROPIC_KEY = "sk-ant-test-0123456789abcdef"


@dataclass(frozen=True)
class Status:
    """An error status with the provider's error body and the given headers (e.g. Retry-After)."""

    code: int
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Content:
    """A well-formed response whose answer text is this (OpenAI content, Anthropic text block, no tool call)."""

    text: str


@dataclass(frozen=True)
class Raw:
    """Status 200 with this body as is (not the provider's shape)."""

    body: bytes
    content_type: str = "application/json"


@dataclass(frozen=True)
class Delay:
    """Answer normally after ``seconds``."""

    seconds: float


@dataclass(frozen=True)
class Hold:
    """Answer normally once ``event`` is set (or after ``limit`` seconds)."""

    event: threading.Event
    limit: float = 20.0


Action = Status | Content | Raw | Delay | Hold


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    at: float
    usage: tuple[int, int] | None = None  # (input, output) tokens the answer reported: what the call was billed

    @property
    def prompt(self) -> str:
        """System and user text, whichever protocol carried them."""
        parts = [self.body.get("system", "")] if isinstance(self.body.get("system"), str) else []
        parts += [str(m.get("content", "")) for m in self.body.get("messages", [])]
        return "\n".join(parts)

    @property
    def data(self) -> dict[str, Any]:
        """The quoted data block of the judge's prompt, decoded."""
        text = self.prompt
        close = text.rindex("</data-")
        tag = text[close + 2 : text.index(">", close)]
        start = text.rindex(f"<{tag}>", 0, close) + len(tag) + 2
        return json.loads(text[start:close])

    @property
    def labels(self) -> list[str]:
        if "tools" in self.body:
            return self.body["tools"][0]["input_schema"]["properties"]["label"]["enum"]
        system = self.body["messages"][0]["content"]
        return json.loads("[" + system.split("is one of ")[1].rstrip(".") + "]")


def first_label(request: Received) -> str:
    return request.labels[0]


class FakeJudgeServer:
    def __init__(self) -> None:
        self.script: deque[Action] = deque()
        self.pick: Callable[[Received], str] = first_label
        self.delay = 0.0  # for every answer (slow judge under load)
        self.requests: list[Received] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.url = ""

    @property
    def openai_url(self) -> str:
        return self.url + "/v1"

    @property
    def anthropic_url(self) -> str:
        return self.url

    def paths(self) -> list[str]:
        return [r.path for r in self.requests]

    # --- serving ---------------------------------------------------------------------------------
    def start(self) -> None:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                received = Received(self.path, {k.lower(): v for k, v in self.headers.items()}, body, time.monotonic())
                with fake._lock:
                    fake.requests.append(received)
                    action = fake.script.popleft() if fake.script else None
                    fake.in_flight += 1
                    fake.max_in_flight = max(fake.max_in_flight, fake.in_flight)
                try:
                    status, headers, payload = fake._respond(received, action)
                finally:
                    with fake._lock:
                        fake.in_flight -= 1
                try:
                    self.send_response(status)
                    for k, v in headers.items():
                        self.send_header(k, v)
                    self.send_header("content-length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout test)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(5)

    # --- answers ---------------------------------------------------------------------------------
    def _respond(self, r: Received, action: Action | None) -> tuple[int, dict[str, str], bytes]:
        anthropic = r.path == "/v1/messages"
        if r.path not in ("/v1/messages", "/v1/chat/completions"):
            return 404, {"content-type": "application/json"}, b'{"error": "not found"}'
        if not self._authorised(r, anthropic):
            return _error(401, anthropic, "invalid x-api-key" if anthropic else "Incorrect API key provided")
        if isinstance(action, Status):
            status, headers, payload = _error(action.code, anthropic, "scripted")
            return status, {**headers, **action.headers}, payload
        if isinstance(action, Raw):
            return 200, {"content-type": action.content_type}, action.body
        if isinstance(action, Delay):
            time.sleep(action.seconds)
        if isinstance(action, Hold):
            action.event.wait(action.limit)
        if self.delay:
            time.sleep(self.delay)
        if isinstance(action, Content):
            return 200, {"content-type": "application/json"}, _answer(r, anthropic, text=action.text)
        label = self.pick(r)
        verdict = {"label": label, "explanation": f"judged {label} by the fake"}
        return 200, {"content-type": "application/json"}, _answer(r, anthropic, verdict=verdict)

    @staticmethod
    def _authorised(r: Received, anthropic: bool) -> bool:
        if anthropic:
            return r.headers.get("x-api-key") == ANTHROPIC_KEY and r.headers.get("anthropic-version") == "2023-06-01"
        return r.headers.get("authorization") == f"Bearer {OPENAI_KEY}"


def _tokens(text: str) -> int:
    return max(1, len(text.encode()) // 4)


def _answer(r: Received, anthropic: bool, *, verdict: dict[str, Any] | None = None, text: str | None = None) -> bytes:
    input_tokens = _tokens(r.prompt)
    if anthropic:
        if verdict is not None:
            block: dict[str, Any] = {"type": "tool_use", "id": "toolu_01A", "name": "record_verdict", "input": verdict}
            out_tokens, stop = _tokens(json.dumps(verdict)), "tool_use"
        else:
            block = {"type": "text", "text": text or ""}
            out_tokens, stop = _tokens(text or "x"), "end_turn"
        payload: dict[str, Any] = {
            "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
            "type": "message",
            "role": "assistant",
            "model": r.body.get("model"),
            "content": [block],
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {
                "input_tokens": input_tokens,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
                "output_tokens": out_tokens,
            },
        }
    else:
        content = json.dumps(verdict) if verdict is not None else text
        out_tokens = _tokens(content or "x")
        payload = {
            "id": "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": f"{r.body.get('model')}-2024-07-18",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content, "refusal": None},
                    "logprobs": None,
                    "finish_reason": "stop",
                }
            ],
            "usage": {
                "prompt_tokens": input_tokens,
                "completion_tokens": out_tokens,
                "total_tokens": input_tokens + out_tokens,
                "prompt_tokens_details": {"cached_tokens": 0},
                "completion_tokens_details": {"reasoning_tokens": 0},
            },
            "system_fingerprint": "fp_0123456789",
        }
    r.usage = (input_tokens, out_tokens)
    return json.dumps(payload).encode()


def _error(code: int, anthropic: bool, message: str) -> tuple[int, dict[str, str], bytes]:
    if anthropic:
        kind = {429: "rate_limit_error", 529: "overloaded_error", 401: "authentication_error"}.get(code, "api_error")
        body: dict[str, Any] = {"type": "error", "error": {"type": kind, "message": message}}
    else:
        kind = {429: "rate_limit_exceeded", 401: "invalid_api_key"}.get(code, "server_error")
        body = {"error": {"message": message, "type": "requests", "param": None, "code": kind}}
    return code, {"content-type": "application/json"}, json.dumps(body).encode()


@contextmanager
def fake_judge_server() -> Iterator[FakeJudgeServer]:
    server = FakeJudgeServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()
