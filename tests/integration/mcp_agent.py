"""A Python agent process for the cross-service trace of ``test_cross_service.py``: a plain tool-calling loop on
the OpenAI client (traced by OpenInference's OpenAI instrumentation) against the local fake of the model API,
whose tools live in a Node MCP server it spawns over stdio (``node/mcp_server.mjs``) and calls through FastMCP's
client. The MCP Python SDK under that client puts the current trace context into each request's ``_meta``, so the
Node server's spans join this trace. Unchanged but for its endpoints: ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` and
``OPENAI_BASE_URL``, both on 127.0.0.1 (the server gets the same OTLP endpoint). Prints one JSON line at the end.

Run as ``python -m tests.integration.mcp_agent`` from the repository root.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from pathlib import Path
from typing import Any

SERVER = Path(__file__).parent / "node" / "mcp_server.mjs"
PROMPT = "What is the weather in Paris, Rome and Oslo, and how many people live in Paris?"


async def main() -> dict[str, Any]:
    from fastmcp import Client
    from fastmcp.client.transports import StdioTransport
    from openai import OpenAI
    from openinference.instrumentation.openai import OpenAIInstrumentor
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    endpoint = os.environ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"]
    base_url = os.environ["OPENAI_BASE_URL"]
    if not (endpoint.startswith("http://127.0.0.1:") and base_url.startswith("http://127.0.0.1:")):
        raise SystemExit("both endpoints must be on 127.0.0.1")
    provider = TracerProvider(resource=Resource.create({"service.name": "python-agent"}))
    # each span exported as it ends: the chat span listing the tools reaches the service before the call it asks
    # for runs on the server (batched, the server's span may come first: docs/serve.md, "Traces across services")
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
    trace.set_tracer_provider(provider)  # FastMCP and the MCP SDK ask the global provider for their tracers
    OpenAIInstrumentor().instrument(tracer_provider=provider)
    model = OpenAI(base_url=base_url, api_key="sk-local-fake")
    node = shutil.which("node") or "node"
    env = {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": endpoint, "PATH": os.environ.get("PATH", "")}
    tracer = provider.get_tracer("weather-agent")
    turns, text = 0, None
    async with Client(StdioTransport(node, [str(SERVER)], env=env)) as mcp:
        listed = await mcp.list_tools()
        offered = {t.name for t in listed}
        tools: Any = [
            {
                "type": "function",
                "function": {"name": t.name, "description": t.description, "parameters": t.input_schema},
            }
            for t in listed
        ]
        messages: list[Any] = [{"role": "system", "content": "You are a helpful assistant."}]
        messages.append({"role": "user", "content": PROMPT})
        agent = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "weather-agent"}
        with tracer.start_as_current_span("invoke_agent weather-agent", attributes=agent):
            for _ in range(10):
                reply = model.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=tools)
                turns += 1
                message = reply.choices[0].message
                if not message.tool_calls:
                    text = message.content
                    break
                messages.append(message.model_dump(exclude_none=True))
                for call in message.tool_calls:
                    function = call.function  # type: ignore[union-attr]
                    if function.name not in offered:
                        content = f"Tool {function.name} not found"
                    else:
                        result = await mcp.call_tool(
                            function.name, json.loads(function.arguments), raise_on_error=False
                        )
                        content = "\n".join(getattr(c, "text", "") for c in result.content)
                    messages.append({"role": "tool", "tool_call_id": call.id, "content": content})
    provider.shutdown()
    return {"turns": turns, "text": text}


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main())))
