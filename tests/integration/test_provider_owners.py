"""One documented line per provider owner (docs/provider-owners.md), each with that SDK installed for real,
offline, exporting over OTLP/gRPC to a receiver on 127.0.0.1: every span arrives once, tool spans and roots
scored. Runs in its own venv (``make test-owners``: the owners' pins differ from the dev environment's); in
``.venv`` the owners are absent and these tests skip."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections import Counter

import pytest

from .otlp_receiver import GrpcTraceReceiver, HttpTraceReceiver, attributes

pytestmark = pytest.mark.integration

TOOLS = """
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from otel_toolcall_eval import EvalConfig, ToolCallEvalProcessor
from otel_toolcall_eval.span_exporter import ToolCallEvalSpanExporter

CONFIG = EvalConfig.from_dict({"tools": [{"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}]})
ARGS = ('{"city": "Paris"}', '{"town": 3}')

def agent(tracer):
    with tracer.start_as_current_span("invoke_agent weather", attributes={"gen_ai.operation.name": "invoke_agent"}):
        for args in ARGS:
            with tracer.start_as_current_span("execute_tool get_weather", attributes={
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "get_weather",
                "gen_ai.tool.call.arguments": args}):
                pass
"""

# owner -> (the package it needs, the program: its one line, then an agent run through the owner's provider)
PROGRAMS: dict[str, tuple[str, str]] = {
    "plain SDK": (
        "opentelemetry.sdk",
        """
        from opentelemetry.sdk.trace import TracerProvider
        provider = TracerProvider()
        provider.add_span_processor(ToolCallEvalProcessor(BatchSpanProcessor(OTLPSpanExporter(endpoint=ENDPOINT, insecure=True)), CONFIG))
        agent(provider.get_tracer("app"))
        provider.shutdown()
        """,
    ),
    "OpenInference / Phoenix register()": (
        "phoenix.otel",
        """
        from phoenix.otel import register
        provider = register(endpoint="http://127.0.0.1:9/v1/traces", set_global_tracer_provider=False, verbose=False)
        provider.add_span_processor(ToolCallEvalProcessor(BatchSpanProcessor(OTLPSpanExporter(endpoint=ENDPOINT, insecure=True)), CONFIG))
        agent(provider.get_tracer("app"))
        provider.shutdown()
        """,
    ),
    "Logfire": (
        "logfire",
        """
        import logfire
        from opentelemetry import trace
        logfire.configure(send_to_logfire=False, console=False, additional_span_processors=[
            ToolCallEvalProcessor(BatchSpanProcessor(OTLPSpanExporter(endpoint=ENDPOINT, insecure=True)), CONFIG)])
        agent(trace.get_tracer("app"))
        logfire.shutdown()
        """,
    ),
    "Langfuse": (
        "langfuse",
        """
        from langfuse import Langfuse
        from opentelemetry.sdk.trace import TracerProvider
        provider = TracerProvider()
        langfuse = Langfuse(public_key="pk-lf-test", secret_key="sk-lf-test", base_url="http://127.0.0.1:9",
                            tracer_provider=provider, span_exporter=ToolCallEvalSpanExporter(
                                OTLPSpanExporter(endpoint=ENDPOINT, insecure=True), CONFIG),
                            should_export_span=lambda span: True)
        agent(provider.get_tracer("app"))
        langfuse.flush()
        provider.shutdown()
        """,
    ),
}


# Traceloop/OpenLLMetry: `Traceloop.init()` builds the provider and its exporting processor, configured by TRACELOOP_*
# variables; its own decorators make the spans (`traceloop.span.kind`: `workflow` the root, `tool` each call).
TRACELOOP_AGENT = """
from traceloop.sdk.decorators import tool, workflow

@tool(name="get_weather")
def get_weather(**kwargs):
    return "sunny"

@workflow(name="weather")
def run():
    for args in ARGS:
        get_weather(**json.loads(args))

run()
"""
TRACELOOP_LINES: dict[str, tuple[type[GrpcTraceReceiver | HttpTraceReceiver], str]] = {
    # the exporter shape: init() wraps it in its own batch processor
    "exporter": (
        GrpcTraceReceiver,
        "Traceloop.init(app_name='weather', exporter=ToolCallEvalSpanExporter("
        "OTLPSpanExporter(endpoint=ENDPOINT, insecure=True), CONFIG))",
    ),
    # the processor shape around Traceloop's own exporting processor: OTLP/HTTP to TRACELOOP_BASE_URL (Traceloop's
    # backend by default; here the receiver)
    "default processor": (
        HttpTraceReceiver,
        "Traceloop.init(app_name='weather', processor=ToolCallEvalProcessor("
        "Traceloop.get_default_span_processor(), CONFIG))",
    ),
}


def _run_once_scored(
    program: str,
    env: dict[str, str],
    tool: str,
    root: str,
    who: str,
    receiver: type[GrpcTraceReceiver | HttpTraceReceiver] = GrpcTraceReceiver,
) -> None:
    """Runs ``program`` (after TOOLS and ENDPOINT, the receiver's; ENDPOINT in ``env``'s values too) against a fresh
    receiver: three spans, each once, tool spans and the root scored."""
    rx = receiver()
    try:
        source = TOOLS + f"\nENDPOINT = {rx.endpoint!r}\n" + textwrap.dedent(program)
        done = subprocess.run(
            [sys.executable, "-c", source],
            capture_output=True,
            text=True,
            timeout=120,
            env={"PATH": "/usr/bin:/bin", "OTEL_SDK_DISABLED": "false"}
            | {k: v.replace("ENDPOINT", rx.endpoint) for k, v in env.items()},
        )
        assert done.returncode == 0, done.stderr
        spans = rx.wait_for_spans(3)
        ids = Counter(s.span.span_id for s in rx.spans())
        assert set(ids.values()) == {1}, f"{who}: a span exported twice"
        tools = [attributes(s.span.attributes) for s in spans if s.span.name == tool]
        assert sorted(t["toolcall_eval.schema_valid"] for t in tools) == [False, True], who
        roots = [attributes(s.span.attributes) for s in spans if s.span.name == root]
        assert [r["toolcall_eval.trace.composite_ok"] for r in roots] == [False], who
        assert len(rx.spans()) == 3
    finally:
        rx.close()


@pytest.mark.parametrize("owner", list(PROGRAMS))
def test_one_line_per_owner_exports_each_span_once_scored(owner: str) -> None:
    package, program = PROGRAMS[owner]
    pytest.importorskip(package)
    _run_once_scored(
        program, {"LOGFIRE_SEND_TO_LOGFIRE": "false"}, "execute_tool get_weather", "invoke_agent weather", owner
    )


@pytest.mark.parametrize("line", list(TRACELOOP_LINES))
def test_traceloop_init_exports_each_span_once_scored(line: str) -> None:
    pytest.importorskip("traceloop.sdk")
    receiver, init = TRACELOOP_LINES[line]
    program = "import json\nfrom traceloop.sdk import Traceloop\n" + init + "\n" + TRACELOOP_AGENT
    # TRACELOOP_BASE_URL: where Traceloop's own exporter sends; no API key, nothing leaves 127.0.0.1
    env = {"TRACELOOP_BASE_URL": "ENDPOINT", "TRACELOOP_METRICS_ENABLED": "false"}
    _run_once_scored(program, env, "get_weather.tool", "weather.workflow", f"Traceloop ({line})", receiver)
