"""One trace across two services, one verdict: a Python agent process and the Node MCP tool server it spawns,
both exporting OTLP/HTTP to one scoring service, which exports to a real OTLP/gRPC receiver.

The agent (``mcp_agent.py``: the OpenAI client under OpenInference's instrumentation, against the local fake of the
model API; FastMCP's client over stdio) runs the shared scenario (``tests/framework_scenario.py``); its MCP client
(the MCP Python SDK) puts the trace context into each request's ``_meta``, and the server
(``node/mcp_server.mjs``, the official ``@modelcontextprotocol/sdk``) continues it: its ``tools/call`` spans have
a remote parent. With ``serve.remote_parents: segment`` (the default) those spans finish nothing and the agent's
``invoke_agent`` span, the one span without a parent, gets the whole trace's verdict. Real processes, real
exporters; nothing talks to anything but 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind

from otel_toolcall_eval import attributes as A
from otel_toolcall_eval.config import EvalConfig
from otel_toolcall_eval.serve import Service
from tests.framework_scenario import Expected, _content, check, roots_with_verdict, scored

from .otlp_receiver import GrpcTraceReceiver
from .scripted_openai import scripted_openai
from .test_serve_node import _node_ready, scored_spans, wait_for_root_verdict

pytestmark = pytest.mark.integration

ROOT = Path(__file__).parents[2]
pytest.importorskip("fastmcp")
pytest.importorskip("openinference.instrumentation.openai")


def run(remote_parents: str) -> list[ReadableSpan]:
    """The agent process (which spawns the server) against a service with that ``serve.remote_parents``; every
    span the next hop received once the service drained."""
    _node_ready()
    receiver = GrpcTraceReceiver()
    serve = {
        "http_port": 0,
        "grpc_port": 0,
        "remote_parents": remote_parents,
        "export": {"endpoint": receiver.endpoint, "schedule_delay_millis": 20},
    }
    base = EvalConfig()
    service = Service(base.model_copy(update={"serve": type(base.serve).model_validate(serve)}))
    service.start()
    try:
        try:
            with scripted_openai() as model:
                env = {
                    **os.environ,
                    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": f"http://127.0.0.1:{service.http_port}/v1/traces",
                    "OPENAI_BASE_URL": model.base_url,
                }
                done = subprocess.run(
                    [sys.executable, "-m", "tests.integration.mcp_agent"],
                    cwd=ROOT,
                    env=env,
                    capture_output=True,
                    text=True,
                    timeout=120,
                )
            assert done.returncode == 0, done.stderr[-4000:]
            assert json.loads(done.stdout.strip().splitlines()[-1]) == {"turns": 6, "text": "Done."}
            wait_for_root_verdict(receiver)
        finally:
            service.stop(timeout=10)  # drained: every span the two processes sent is at the receiver now
        return scored_spans(receiver)
    finally:
        receiver.close()


# valid, valid, the bad enum (the server runs it unchecked; the agent's schema, from the tool list on its LLM spans,
# flags it), the failing tool (an isError result: ``error.type`` tool_error); book_flight never reaches the server
CROSS_SERVICE = Expected(_content(True, "error.type"), correct=False, errors=2, unknown_tool_requests=1)


def test_a_python_agent_and_a_node_mcp_server_get_one_trace_and_one_verdict() -> None:
    spans = run("segment")
    trace_id = next(s.context.trace_id for s in spans if s.name == "invoke_agent weather-agent")
    mine = [s for s in spans if s.context.trace_id == trace_id]
    services = {str(s.resource.attributes.get("service.name")) for s in mine}
    assert services == {"python-agent", "node-mcp-server"}  # one trace, both processes
    # each call is scored once, on the Node server's span; the agent's client and transport spans point at it
    calls = scored(mine)
    assert {str(s.resource.attributes["service.name"]) for s in calls} == {"node-mcp-server"}
    assert all(s.kind is SpanKind.SERVER and s.parent is not None and s.parent.is_remote for s in calls)
    folded = [s for s in mine if A.SAME_CALL_AS in (s.attributes or {})]
    assert len(folded) == 2 * len(calls)
    # the agent's schema check of what the server ran unchecked; the server's isError result is a failed call
    check(mine, CROSS_SERVICE)
    (root,) = roots_with_verdict(mine)
    assert root.name == "invoke_agent weather-agent" and root.parent is None
    attributes = dict(root.attributes or {})
    # book_flight: the agent told the model it has no such tool; the server's spans, exported before the agent's
    # chat spans that requested them, still answer their requests (matched by name: their ids are JSON-RPC ids)
    assert attributes[A.TRACE_UNEXECUTED_CALLS] == 1


def test_with_remote_parents_as_roots_each_service_gets_its_own_verdict() -> None:
    """``serve.remote_parents: root`` (what the in-process processor does): each server span finishes the trace
    it belongs to, so the trace gets a verdict per part, the first from one call."""
    spans = run("root")
    trace_id = next(s.context.trace_id for s in spans if s.name == "invoke_agent weather-agent")
    roots = roots_with_verdict([s for s in spans if s.context.trace_id == trace_id])
    assert len(roots) > 1
    assert {str(s.resource.attributes["service.name"]) for s in roots} == {"python-agent", "node-mcp-server"}
