"""The shared scenario (``tests/framework_scenario.py``) with its tools on an MCP Python SDK 2.x server (issue 26).

The MCP SDK 2.x (``mcp`` 2.3 in the dev environment, under FastMCP 4) traces itself: its server wraps every
inbound request in a SERVER span (``tools/call <tool>``: ``gen_ai.operation.name = execute_tool``,
``gen_ai.tool.name``, ``jsonrpc.request.id``, ``mcp.method.name``; ``error.type = tool_error`` and status ERROR
when the result has ``isError``) and its client's transport sends each request in a CLIENT span (``MCP send
tools/call <tool>``, no tool name attribute), the server's span its child through the request's ``_meta``. It has no
content switch: no setting records a call's arguments or result. The only evidence of the arguments is the model's
request, here recorded by OpenInference's OpenAI instrumentation of the agent's model client; the server span's id is
a JSON-RPC id, never the model's call id, so the arguments are borrowed by batch and tool name (when that request
is the one of its name still waiting). The two modes are the model instrumentation's: its default (content) and
``OPENINFERENCE_HIDE_INPUTS`` / ``OPENINFERENCE_HIDE_OUTPUTS`` (hidden: no requests, no arguments anywhere).

The agent is a tool loop on the OpenAI client against the local fake of the model API (``scripted_openai``), its
tools on a real ``MCPServer`` reached through the SDK's own in-process ``Client`` transport. The MCP SDK's tracer
is a module-level one from the global provider: pointed at this test's provider (the global one can be set once).
"""

# no ``from __future__ import annotations``: MCPServer builds a tool's schema from its live annotations
import asyncio
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_toolcall_eval import ToolCallEvalProcessor
from tests.framework_scenario import FINAL_TEXT, Run, get_population
from tests.integration.scripted_openai import scripted_openai, tool_loop

pytestmark = pytest.mark.integration


@pytest.fixture
def run(monkeypatch: pytest.MonkeyPatch) -> Iterator[Run]:
    mcp_otel = pytest.importorskip("mcp.shared._otel", reason="the MCP Python SDK 2.x is not installed")
    exporter, raw = InMemorySpanExporter(), InMemorySpanExporter()
    provider = TracerProvider()  # never the global provider
    provider.add_span_processor(ToolCallEvalProcessor(SimpleSpanProcessor(exporter)))
    provider.add_span_processor(SimpleSpanProcessor(raw))
    # the SDK's server middleware and client transport both use this module-level tracer
    monkeypatch.setattr(mcp_otel, "_tracer", provider.get_tracer("mcp-python-sdk"))
    yield Run(provider, exporter, raw)
    provider.shutdown()


def _server() -> Any:
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("weather")

    @server.tool()
    def get_weather(city: str, unit: Literal["celsius", "fahrenheit"]) -> str:
        """Current weather in a city."""
        return f"sunny, 21 degrees {unit}, in {city}"

    server.tool()(get_population)  # the scenario's tool, which raises
    return server


async def _agent(base_url: str, transport: str) -> str:
    """A tool loop on the OpenAI client whose tools are the MCP server's (listed, offered, called by name): in this
    process (``memory``) or a server process of its own over stdio (``stdio``: its spans stay in that process)."""
    from mcp import Client, StdioServerParameters

    server: Any = _server()
    if transport == "stdio":
        root = str(Path(__file__).parents[2])  # ``-m`` from the repository's root: ``tests`` importable there
        server = StdioServerParameters(command=sys.executable, args=["-m", __name__, "serve-stdio"], cwd=root)
    async with Client(server) as client:

        async def call(name: str, arguments: dict[str, Any]) -> str:
            result = await client.call_tool(name, arguments)
            return "\n".join(getattr(c, "text", "") for c in result.content)

        listed = (await client.list_tools()).tools
        return await tool_loop(base_url, [(t.name, t.description, t.input_schema) for t in listed], call)


@pytest.mark.parametrize("mode", ["content", "hidden"])
def test_mcp2_server_spans(run: Run, mode: str) -> None:
    _run_agent(run, mode, "memory")
    servers = [s for s in run.raw.get_finished_spans() if s.name.startswith("tools/call ")]
    assert len(servers) == 5  # the unknown tool too: the server answers it with ``isError``
    # the server spans record no arguments: the parse and schema verdicts of ``mcp2-content`` are the borrowed ones
    assert not [k for s in servers for k in (s.attributes or {}) if "argument" in k or k.startswith("input")]
    run.finish(f"mcp2-{mode}")


def test_mcp2_stdio_client_spans(run: Run) -> None:
    """The server in a process of its own (stdio), as MCP servers usually run: the agent's trace holds only the
    SDK's client spans (``MCP send tools/call <tool>``: the tool name in the span name only, no error of the
    result: an ``isError`` result is a reply, not an exception). The server's own spans carry ``tool_error``: they
    are in its process (export them to the same collector, or through ``serve``, to score the failures)."""
    _run_agent(run, "content", "stdio")
    clients = [s for s in run.raw.get_finished_spans() if s.name.startswith("MCP send tools/call ")]
    assert len(clients) == 5 and not [s for s in run.raw.get_finished_spans() if s.name.startswith("tools/call ")]
    run.finish("mcp2_stdio-content")


def _run_agent(run: Run, mode: str, transport: str) -> None:
    pytest.importorskip("mcp.server.mcpserver", reason="the MCP Python SDK 2.x is not installed")
    from openinference.instrumentation import TraceConfig
    from openinference.instrumentation.openai import OpenAIInstrumentor

    config = TraceConfig(hide_inputs=True, hide_outputs=True) if mode == "hidden" else TraceConfig()
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=run.provider, config=config)
    try:
        with scripted_openai() as fake, run.provider.get_tracer("weather-app").start_as_current_span("agent"):
            text = asyncio.run(_agent(fake.base_url, transport))
    finally:
        instrumentor.uninstrument()
    assert text == FINAL_TEXT


if __name__ == "__main__" and sys.argv[1:] == ["serve-stdio"]:  # the stdio server process of the test above
    _server().run("stdio")
