"""A local fake of the OpenAI chat-completions API on 127.0.0.1 that plays the shared scenario's model turns.

Request N (counted per server) answers with scenario call ``order[N]`` as a ``tool_calls`` message, then with the
final text (or, for frameworks that finish through a tool, ``final_call``). Every request body is kept.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.framework_scenario import CALL_IDS, CALLS, FINAL_TEXT


@dataclass
class ScriptedModel:
    final_call: tuple[str, dict[str, Any]] | None = None  # e.g. smolagents' ``final_answer`` tool
    order: list[int] = field(default_factory=lambda: list(range(len(CALLS))))
    requests: list[dict[str, Any]] = field(default_factory=list)
    # (call id, tool, arguments) per model turn instead of the shared scenario's ``order`` (then the final text)
    script: list[tuple[str, str, dict[str, Any]]] | None = None
    # text replies per model turn instead (frameworks that parse calls from text: DSPy's ReAct); the last repeats
    texts: list[str] | None = None
    base_url: str = ""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def next_turn(self, body: dict[str, Any]) -> tuple[int, tuple[str, str, dict[str, Any]] | None]:
        """The request's number and the tool call it is answered with (``(id, name, args)``), or None for text."""
        with self.lock:
            self.requests.append(body)
            n = len(self.requests) - 1
        if self.script is not None:
            return n, self.script[n] if n < len(self.script) else None
        if n < len(self.order):
            name, args = CALLS[self.order[n]]
            return n, (CALL_IDS[self.order[n]], name, args)
        if n == len(self.order) and self.final_call is not None:
            return n, ("call_final", *self.final_call)
        return n, None

    def respond_responses(self, body: dict[str, Any]) -> dict[str, Any]:
        """POST /v1/responses (the Responses API, the OpenAI Agents SDK's default model); echoes the tools."""
        n, turn = self.next_turn(body)
        if turn is not None:
            call_id, name, args = turn
            output: dict[str, Any] = {
                "type": "function_call",
                "id": f"fc_{n}",
                "call_id": call_id,
                "name": name,
                "arguments": json.dumps(args),
                "status": "completed",
            }
        else:
            text = {"type": "output_text", "text": FINAL_TEXT, "annotations": []}
            output = {
                "type": "message",
                "id": f"msg_{n}",
                "role": "assistant",
                "status": "completed",
                "content": [text],
            }
        return {
            "id": f"resp_{n + 1}",
            "object": "response",
            "created_at": 0,
            "model": body.get("model", "fake"),
            "status": "completed",
            "output": [output],
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": body.get("tools", []),
            "usage": {
                "input_tokens": 10,
                "output_tokens": 5,
                "total_tokens": 15,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens_details": {"reasoning_tokens": 0},
            },
        }

    def respond_gemini(self, body: dict[str, Any]) -> dict[str, Any]:
        """POST /v1beta/models/<model>:generateContent (Google ADK's Gemini model)."""
        _, turn = self.next_turn(body)
        if turn is not None:
            call_id, name, args = turn
            part: dict[str, Any] = {"functionCall": {"id": call_id, "name": name, "args": args}}
        else:
            part = {"text": FINAL_TEXT}
        return {
            "candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15},
            "modelVersion": "fake-model",
        }

    def respond_anthropic(self, body: dict[str, Any]) -> dict[str, Any]:
        """POST /v1/messages (the Anthropic Messages API): a ``tool_use`` block per tool turn, then the text."""
        n, turn = self.next_turn(body)
        if turn is not None:
            call_id, name, args = turn
            content: list[dict[str, Any]] = [{"type": "tool_use", "id": call_id, "name": name, "input": args}]
            stop = "tool_use"
        else:
            content, stop = [{"type": "text", "text": FINAL_TEXT}], "end_turn"
        return {
            "id": f"msg_{n + 1}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model", "fake"),
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 5},
        }

    def respond(self, body: dict[str, Any]) -> dict[str, Any]:
        """POST /v1/chat/completions."""
        n, turn = self.next_turn(body)
        message: dict[str, Any]
        if self.texts is not None:
            message, finish = {"role": "assistant", "content": self.texts[min(n, len(self.texts) - 1)]}, "stop"
        elif turn is not None:
            call_id, name, args = turn
            function = {"name": name, "arguments": json.dumps(args)}
            message = {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": call_id, "type": "function", "function": function}],
            }
            finish = "tool_calls"
        else:
            message, finish = {"role": "assistant", "content": FINAL_TEXT}, "stop"
        return {
            "id": f"chatcmpl-{n + 1}",
            "object": "chat.completion",
            "created": 0,
            "model": body.get("model", "fake"),
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        }


@contextmanager
def scripted_openai(
    final_call: tuple[str, dict[str, Any]] | None = None,
    order: list[int] | None = None,
    script: list[tuple[str, str, dict[str, Any]]] | None = None,
    texts: list[str] | None = None,
) -> Iterator[ScriptedModel]:
    fake = ScriptedModel(final_call=final_call, script=script, texts=texts)
    if order is not None:
        fake.order = order

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
            path = self.path.rstrip("/")
            if path.endswith(":generateContent"):
                self.reply(fake.respond_gemini(body))
                return
            if path == "/v1/messages" and not body.get("stream"):
                self.reply(fake.respond_anthropic(body))
                return
            if path == "/v1/chat/completions" and body.get("stream"):
                self.stream(fake.respond(body))
                return
            if path not in ("/v1/chat/completions", "/v1/responses") or body.get("stream"):
                self.send_error(404)
                return
            answer = fake.respond(body) if path == "/v1/chat/completions" else fake.respond_responses(body)
            data = json.dumps(answer).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def reply(self, answer: dict[str, Any]) -> None:
            data = json.dumps(answer).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def stream(self, answer: dict[str, Any]) -> None:
            """The same answer as server-sent chat-completion chunks (Strands' OpenAI model streams)."""
            choice = answer["choices"][0]
            message = choice["message"]
            delta: dict[str, Any] = {"role": "assistant", "content": message.get("content")}
            if message.get("tool_calls"):
                delta["tool_calls"] = [{"index": i, **c} for i, c in enumerate(message["tool_calls"])]
            chunks = [
                {"choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
                {"choices": [{"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]}]},
                {"choices": [], "usage": answer["usage"]},
            ]
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            for chunk in chunks:
                base = {"id": answer["id"], "object": "chat.completion.chunk", "created": 0, "model": answer["model"]}
                self.wfile.write(f"data: {json.dumps({**base, **chunk})}\n\n".encode())
            self.wfile.write(b"data: [DONE]\n\n")

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    fake.base_url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


async def tool_loop(base_url: str, tools: list[tuple[str, str | None, Any]], call: Any) -> str:
    """A hand-written agent: the OpenAI client against ``base_url`` offered ``tools`` (name, description, JSON
    Schema), each requested call run by ``await call(name, arguments)`` (its reply text sent back), until the model
    answers with text (returned). The MCP tests' agent, whose tools live on an MCP server."""
    from openai import OpenAI

    model = OpenAI(base_url=base_url, api_key="test-key", max_retries=0)
    offered = [
        {"type": "function", "function": {"name": name, "description": description, "parameters": schema}}
        for name, description, schema in tools
    ]
    messages: list[Any] = [{"role": "user", "content": "Weather in Paris, Rome and Oslo?"}]
    while True:
        reply = model.chat.completions.create(model="fake-model", messages=messages, tools=offered).choices[0]
        if not reply.message.tool_calls:
            return str(reply.message.content)
        messages.append(reply.message.model_dump(exclude_none=True))
        for tool_call in reply.message.tool_calls:
            text = await call(tool_call.function.name, json.loads(tool_call.function.arguments))
            messages.append({"role": "tool", "tool_call_id": tool_call.id, "content": text})
