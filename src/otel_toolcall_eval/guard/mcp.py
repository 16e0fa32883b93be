"""An MCP proxy that enforces the guard before it forwards ``tools/call``: FastMCP's proxy plus one middleware.

Between an agent (any MCP client) and the MCP server that runs the tools. ``tools/list`` passes through (the guard
keeps the listed input schemas: they are the tools offered, as on a chat span); a ``tools/call`` the guard stops is
answered by the proxy itself with a tool result whose ``isError`` is true and whose text is the guard's message, so
the agent reads it as any failed tool call and can correct itself; the upstream server never sees it. Calls that go
through are scored when they come back (an ``isError`` result is ``error.type = tool_error``, as the MCP
convention says), so the next call is judged against what really happened.

History: per trace. The MCP SDK puts the client's trace context in each request's ``_meta``, and FastMCP's server
span continues it, so the proxy sees the agent's trace. Without one (a client that propagates nothing): over stdio
the whole connection (one proxy process per client); over HTTP the MCP session on handshake-era connections, while
on stateless (2026-07-28) ones every request is its own session, so each call is judged alone.

Run it: ``python -m otel_toolcall_eval.guard.mcp --config toolcall-eval.yaml -- python my_server.py`` (stdio both
sides), ``--transport http --port 8765`` to serve streamable HTTP, an ``http(s)://`` target to reach an HTTP server.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import mcp_types as mt
from fastmcp import FastMCP
from fastmcp.client.transports import StdioTransport
from fastmcp.server import create_proxy
from fastmcp.server.middleware import CallNext, Middleware, MiddlewareContext
from fastmcp.tools import Tool, ToolResult
from mcp_types import TextContent
from opentelemetry import propagate
from opentelemetry import trace as trace_api

from otel_toolcall_eval.guard.guard import Guard, definitions
from otel_toolcall_eval.records import ToolDefinition


class GuardMiddleware(Middleware):
    """The guard on a FastMCP server's ``tools/call`` (a proxy's or any other server's)."""

    def __init__(self, guard: Guard, *, connection_scope: str | None = None) -> None:
        """``connection_scope``: the history key when no trace is current, for a proxy that serves one client
        (stdio: one proxy process per client); without it, the MCP session."""
        self.guard = guard
        self.connection_scope = connection_scope
        self._tools: dict[str, ToolDefinition] | None = None

    async def on_list_tools(
        self, context: MiddlewareContext[mt.ListToolsRequest], call_next: CallNext[mt.ListToolsRequest, Sequence[Tool]]
    ) -> Sequence[Tool]:
        tools = await call_next(context)
        self._tools = definitions({t.name: t.parameters for t in tools})
        return tools

    async def _offered(self, context: MiddlewareContext[Any]) -> dict[str, ToolDefinition] | None:
        if self._tools is None and context.fastmcp_context is not None:  # a client that called before listing
            tools = await context.fastmcp_context.fastmcp.list_tools()
            self._tools = definitions({t.name: t.parameters for t in tools})
        return self._tools

    async def on_call_tool(
        self,
        context: MiddlewareContext[mt.CallToolRequestParams],
        call_next: CallNext[mt.CallToolRequestParams, ToolResult],
    ) -> ToolResult:
        name = context.message.name
        arguments = dict(context.message.arguments or {})
        scope = _scope(context, self.connection_scope)
        tools = await self._offered(context)
        decision = self.guard.check(name, arguments, scope=scope, tools=tools)
        if decision.stops:
            return ToolResult(content=[TextContent(type="text", text=decision.message)], is_error=True)
        try:
            result = await call_next(context)
        except Exception as exc:
            self.guard.record_result(name, arguments, error=exc, error_type="tool_error", scope=scope)
            raise
        if result.is_error:
            self.guard.record_result(name, arguments, error=_text(result), error_type="tool_error", scope=scope)
        else:
            recorded = result.structured_content if result.structured_content is not None else _text(result)
            self.guard.record_result(name, arguments, result=recorded, scope=scope)
        return result


def _scope(context: MiddlewareContext[mt.CallToolRequestParams], connection: str | None) -> str | None:
    """The client's trace (its ``traceparent`` in the request's ``_meta``: the key ``Guard`` gives a trace); else
    the connection's scope; else the MCP session."""
    request = context.fastmcp_context.request_context if context.fastmcp_context is not None else None
    carrier = request.meta if request is not None else None
    if isinstance(carrier, Mapping) and "traceparent" in carrier:
        client = trace_api.get_current_span(propagate.extract(dict(carrier))).get_span_context()
        if client.is_valid:
            return format(client.trace_id, "032x")
    if connection is not None or context.fastmcp_context is None:
        return connection
    try:
        return "mcp-session:" + context.fastmcp_context.session_id
    except RuntimeError:
        return None


def _text(result: ToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, TextContent))


def guarded_proxy(
    target: Any, guard: Guard, *, name: str = "toolcall-eval guard", connection_scope: str | None = None
) -> FastMCP[Any]:
    """A FastMCP proxy to ``target`` (anything ``fastmcp.server.create_proxy`` takes: a URL, a transport, a
    client, a server) with the guard in front of every ``tools/call``."""
    proxy = create_proxy(target, name=name)
    proxy.add_middleware(GuardMiddleware(guard, connection_scope=connection_scope))
    return proxy


def _configure_tracing() -> None:
    """Export the proxy's spans when the standard OTLP variables name an endpoint and nothing configured a
    provider yet (``opentelemetry-instrument`` does that itself)."""
    if not (os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")):
        return
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    if isinstance(trace_api.get_tracer_provider(), TracerProvider):
        return
    if os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf") == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as Grpc

        exporter: Any = Grpc()
    else:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as Http

        exporter = Http()
    provider = TracerProvider(resource=Resource.create({"service.name": "toolcall-eval-mcp-guard"}))
    provider.add_span_processor(BatchSpanProcessor(exporter))
    trace_api.set_tracer_provider(provider)


def main(argv: Sequence[str] | None = None) -> int:
    from otel_toolcall_eval.config import ConfigError, EvalConfig

    parser = argparse.ArgumentParser(
        prog="python -m otel_toolcall_eval.guard.mcp",
        description="An MCP proxy that enforces the tool-call guard before forwarding tools/call.",
    )
    parser.add_argument("--config", help="the toolcall-eval config (policies, tools, guard)")
    parser.add_argument("--mode", choices=("enforce", "shadow"), help="over the config's guard.mode")
    parser.add_argument("--transport", choices=("stdio", "http"), default="stdio", help="what the proxy serves")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("target", nargs="+", help="the upstream server: an http(s):// URL or a command to run")
    args = parser.parse_args(argv)
    try:
        config = EvalConfig.load(args.config) if args.config else EvalConfig()
    except ConfigError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    _configure_tracing()
    target: Any = args.target[0]
    if not target.startswith(("http://", "https://")):
        target = StdioTransport(args.target[0], list(args.target[1:]), env=dict(os.environ))
    # stdio: this process serves one client, whose calls are one conversation when no trace says otherwise
    scope = "mcp-stdio" if args.transport == "stdio" else None
    proxy = guarded_proxy(target, Guard(config, mode=args.mode), connection_scope=scope)
    try:
        if args.transport == "stdio":
            proxy.run(transport="stdio", show_banner=False)
        else:
            proxy.run(transport="http", host=args.host, port=args.port, show_banner=False)
    finally:
        provider = trace_api.get_tracer_provider()
        shutdown = getattr(provider, "shutdown", None)
        if callable(shutdown):
            shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
