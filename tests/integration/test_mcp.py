"""A real FastMCP client calling a real FastMCP server in the same process: one call, three tool spans.

FastMCP (4.x) and the MCP Python SDK (2.x) under it instrument both sides natively: FastMCP's client
``tools/call <tool>`` span (CLIENT, with ``gen_ai.tool.name``), the SDK's transport span ``MCP send tools/call
<tool>`` (CLIENT, no tool name attribute) and FastMCP's server ``tools/call <tool>`` span (SERVER), nested in that
order. Without the same-call check the processor
counted three calls, one of them nameless and one a duplicate; each test asserts one call is scored, on the
innermost span, and the wrappers point at it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_toolcall_eval import EvalConfig, ToolCallEvalProcessor
from tests.helpers import scores

fastmcp = pytest.importorskip("fastmcp")
fastmcp_telemetry = pytest.importorskip("fastmcp.telemetry")
mcp_otel = pytest.importorskip("mcp.shared._otel")
ToolError = pytest.importorskip("fastmcp.exceptions").ToolError

pytestmark = pytest.mark.integration


PROVIDER: list[TracerProvider] = []  # the current test's


@pytest.fixture
def exporter(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    """FastMCP asks the global TracerProvider for its tracer on every span: point it at this test's provider
    (the global one can be set only once per process)."""
    out = InMemorySpanExporter()
    config = EvalConfig.from_dict({"policies": {"step_budget": 3}})
    provider = TracerProvider()
    provider.add_span_processor(ToolCallEvalProcessor(SimpleSpanProcessor(out), config))
    monkeypatch.setattr(
        fastmcp_telemetry, "otel_get_tracer", lambda name, version=None, *a, **k: provider.get_tracer(name, version)
    )
    # the MCP SDK's own transport spans, from its module-level tracer
    monkeypatch.setattr(mcp_otel, "_tracer", provider.get_tracer("mcp-python-sdk"))
    PROVIDER[:] = [provider]
    yield out
    provider.shutdown()


def server() -> Any:
    mcp = fastmcp.FastMCP("weather")

    @mcp.tool
    def get_weather(city: str) -> str:
        """Current weather in a city."""
        if city == "Atlantis":
            raise ToolError("no such city")
        return f"sunny in {city}"

    return mcp


def call(*arguments: dict[str, Any], parent: str | None = None) -> None:
    """Call ``get_weather`` once per argument set through an in-memory client (optionally under an agent span)."""

    async def run() -> None:
        async with fastmcp.Client(server()) as client:
            for args in arguments:
                await client.call_tool("get_weather", args, raise_on_error=False)

    if parent is None:
        asyncio.run(run())
    else:
        with PROVIDER[0].get_tracer("agent").start_as_current_span(parent):
            asyncio.run(run())


def tool_call_spans(exporter: InMemorySpanExporter) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if "tools/call" in s.name]


def test_one_mcp_call_through_three_spans_is_scored_once(exporter: InMemorySpanExporter) -> None:
    call({"city": "Oslo"})
    spans = tool_call_spans(exporter)
    assert [s.name for s in spans] == [
        "tools/call get_weather",  # the server's span ends first
        "MCP send tools/call get_weather",
        "tools/call get_weather",  # the client's span, the trace root here
    ]
    server_span, transport, client = spans
    scored = scores(server_span)
    assert scored["outcome"] == "success" and scored["step"] == 1 and scored["duplicate"] is False
    inner = f"{server_span.context.span_id:016x}"
    assert scores(transport) == {"convention": "mcp", "same_call_as": inner}
    root = scores(client)
    assert root["same_call_as"] == inner
    assert root["trace.tool_calls"] == 1 and root["trace.composite_ok"] is True


def test_a_failing_mcp_tool_is_one_failed_call(exporter: InMemorySpanExporter) -> None:
    call({"city": "Atlantis"})
    # the failed server span is held until its recovery class is known (the root's end: nothing followed), so the
    # transport span wrapping it goes out first
    transport, server_span, client = tool_call_spans(exporter)
    assert transport.name.startswith("MCP send") and client.parent is None
    assert scores(server_span)["outcome"] == "execution_failed"
    assert scores(server_span)["recovery.class"] == "carried_on"
    assert "same_call_as" in scores(transport) and "same_call_as" in scores(client)
    root = scores(client)
    assert (root["trace.tool_calls"], root["trace.errors"], root["trace.composite_ok"]) == (1, 1, False)


def test_sequential_calls_under_one_agent_stay_separate_calls(exporter: InMemorySpanExporter) -> None:
    """The same-call check only folds nested spans: four calls in a row are four calls. FastMCP records no
    arguments (content capture), so a repeat cannot be told from a new call and none is called a duplicate."""
    call({"city": "Oslo"}, {"city": "Oslo"}, {"city": "Rome"}, {"city": "Paris"}, parent="invoke_agent weather")
    server_spans = [s for s in tool_call_spans(exporter) if s.kind is trace.SpanKind.SERVER]
    assert [scores(s)["step"] for s in server_spans] == [1, 2, 3, 4]
    assert [scores(s)["duplicate"] for s in server_spans] == [False] * 4
    assert sum("same_call_as" in scores(s) for s in tool_call_spans(exporter)) == 8
    root = scores(next(s for s in exporter.get_finished_spans() if s.name == "invoke_agent weather"))
    assert root["trace.tool_calls"] == 4 and root["trace.over_budget"] is True  # step budget 3
    assert root["trace.correct"] is True and root["trace.composite_ok"] is False
