"""Real JS agents, run under Node, exporting OTLP to the scoring service: their tool spans reach the next hop
scored like the Python frameworks' (the shared scenario of ``tests/framework_scenario.py``).

The Node project is ``tests/integration/node/`` (package.json + package-lock.json; ``make node-deps`` / .ci/run
run ``npm ci``). The agent is unchanged but for its two endpoints: the OTLP exporter points at the service
(OTLP/HTTP protobuf, which the JS exporter sends chunked), the model client at the local fake of the OpenAI API
(``scripted_openai``). The service exports to a real OTLP/gRPC receiver. Nothing talks to anything but 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import ReadableSpan

from otel_toolcall_eval import attributes as A
from otel_toolcall_eval.config import EvalConfig
from otel_toolcall_eval.serve import Service
from tests.framework_scenario import (
    CALLS,
    EXPECTED,
    Expected,
    _content,
    call,
    check,
    record,
    roots_with_verdict,
    scored,
)
from tests.helpers import NODE_PROJECT, node_ready, scored_spans, wait_for_root_verdict, wait_until

from .otlp_receiver import GrpcTraceReceiver
from .scripted_openai import scripted_openai

pytestmark = pytest.mark.integration


@pytest.fixture
def service(receiver: GrpcTraceReceiver) -> Iterator[Service]:
    node_ready()
    serve = {"http_port": 0, "grpc_port": 0, "export": {"endpoint": receiver.endpoint, "schedule_delay_millis": 20}}
    base = EvalConfig()
    svc = Service(base.model_copy(update={"serve": type(base.serve).model_validate(serve)}))
    svc.start()
    yield svc
    svc.stop(timeout=10)


def run_node(script: str, service: Service, model_url: str, **env: str) -> dict[str, object]:
    environment = {
        **os.environ,
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": f"http://127.0.0.1:{service.http_port}/v1/traces",
        "OPENAI_BASE_URL": model_url,
        **env,
    }
    done = subprocess.run(
        ["node", str(NODE_PROJECT / script)], env=environment, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


# Every call kind gets its verdict: valid calls pass; the Vercel AI SDK runs the bad enum unchecked (a JSON Schema
# tool without a validator), which the schema check flags; the raising tool is an execution failure; the unknown
# tool runs no span, and its request (on the model-call span) of a tool the model was not offered is counted.
VERCEL = EXPECTED["vercel_ai-otel"]
# LegacyOpenTelemetry ends each model-call span (``ai.generateText.doGenerate``, which carries ``ai.prompt.tools``
# and ``ai.response.toolCalls``) after the tool span it asked for: the first call is scored before any tool list
# (``tool_known`` and the schema verdict absent; the root checks it against the list later,
# ``trace.unlisted_calls`` 0), and each request arrives after its call ran (answered already, not unexecuted).
VERCEL_LEGACY = Expected(
    [("get_weather", call("success", parse_ok=True)), *_content(True)[1:]],
    correct=False,
    errors=2,
    unknown_tool_requests=1,
    # the first get_weather call, scored before the span with the tool definitions came, is validated when they
    # arrive (checks.late_schema): valid
    late_schema=(1, 0),
)


@pytest.mark.parametrize("telemetry", ["otel", "legacy"])
def test_vercel_ai_sdk_agent_is_scored_by_the_service(
    telemetry: str, service: Service, receiver: GrpcTraceReceiver
) -> None:
    """``otel``: @ai-sdk/otel's OpenTelemetry integration (GenAI ``execute_tool`` spans, convention ``genai``);
    ``legacy``: its LegacyOpenTelemetry (``ai.toolCall`` spans, convention ``vercel_ai``)."""
    with scripted_openai() as model:
        out = run_node("vercel_agent.mjs", service, model.base_url, TELEMETRY=telemetry)
    assert out["steps"] == len(CALLS) + 1
    spans = wait_for_root_verdict(receiver)
    check(spans, VERCEL if telemetry == "otel" else VERCEL_LEGACY)
    root = dict(roots_with_verdict(spans)[0].attributes or {})
    # book_flight, which runs no span; with @ai-sdk/otel a tool span sometimes sorts before the chat span that
    # requested it (the JS span clock's millisecond skew): still answered (tests/conventions/test_vercel_ai.py replays
    # one). With @ai-sdk/otel the next request's reply answers book_flight by its call id: scored from the requests
    # (``VERCEL.requested``), not unexecuted; the legacy spans record no reply by id
    assert root[A.TRACE_UNEXECUTED_CALLS] == (0 if telemetry == "otel" else 1)
    assert root.get(A.TRACE_UNLISTED_CALLS, 0) == 0
    tool_spans = [s for s in spans if A.OUTCOME in (s.attributes or {})]
    convention = "genai" if telemetry == "otel" else "vercel_ai"
    assert {(s.attributes or {})[A.CONVENTION] for s in tool_spans} == {convention}
    # one trace, every span exported once with its parent kept
    assert len({s.context.trace_id for s in spans}) == 1
    assert len({s.context.span_id for s in spans}) == len(spans)


def unscored(spans: list[ReadableSpan]) -> list[ReadableSpan]:
    """The spans as the agent sent them: the next hop's copies without the service's ``toolcall_eval.*`` scores
    (for the fixtures the unit suite replays, ``framework_scenario.record``)."""
    return [
        ReadableSpan(
            name=s.name,
            context=s.context,
            parent=s.parent,
            resource=s.resource,
            attributes={k: v for k, v in (s.attributes or {}).items() if not k.startswith(A.PREFIX)},
            events=s.events,
            links=s.links,
            kind=s.kind,
            status=s.status,
            start_time=s.start_time,
            end_time=s.end_time,
            instrumentation_scope=s.instrumentation_scope,
        )
        for s in spans
    ]


@pytest.mark.parametrize("mode", ["content", "hidden"])
def test_langgraph_js_agent_is_scored_by_the_service(mode: str, service: Service, receiver: GrpcTraceReceiver) -> None:
    """LangGraph.js (a ``StateGraph`` with the prebuilt ``ToolNode``, ``ChatOpenAI``) traced by OpenInference's
    LangChain instrumentation: convention ``openinference``, as the Python OpenInference frameworks. ``hidden``:
    ``OPENINFERENCE_HIDE_INPUTS`` / ``_OUTPUTS`` set, as a privacy-minded deployment runs it."""
    hide = {"OPENINFERENCE_HIDE_INPUTS": "true", "OPENINFERENCE_HIDE_OUTPUTS": "true"} if mode == "hidden" else {}
    with scripted_openai() as model:
        out = run_node("langgraph_agent.mjs", service, model.base_url, **hide)
    assert out == {"steps": len(CALLS) + 1, "text": "Done."}
    spans = wait_for_root_verdict(receiver)
    name = f"langgraph_js-{mode}"
    record(name, unscored(spans))
    check(spans, EXPECTED[name])
    root = dict(roots_with_verdict(spans)[0].attributes or {})
    # content: the bad enum (rejected before any tool span) and book_flight ran no span, but each is answered (by
    # position) and scored from the requests, so none stays unexecuted; hidden: no requests recorded at all
    assert root.get(A.TRACE_UNEXECUTED_CALLS) == (0 if mode == "content" else None)
    tool_spans = [s for s in spans if A.OUTCOME in (s.attributes or {})]
    assert {(s.attributes or {})[A.CONVENTION] for s in tool_spans} == {"openinference"}
    assert len({s.context.trace_id for s in spans}) == 1
    assert len({s.context.span_id for s in spans}) == len(spans)


@pytest.mark.parametrize("mode", ["content", "hidden"])
def test_openai_agents_js_agent_is_scored_by_the_service(
    mode: str, service: Service, receiver: GrpcTraceReceiver
) -> None:
    """The OpenAI Agents SDK for JS (``@openai/agents``: an ``Agent`` with two JSON Schema function tools, its
    ``Runner`` on the Responses API) traced by OpenInference's instrumentation, a trace processor of the SDK
    (``@arizeai/openinference-instrumentation-openai-agents``): convention ``openinference``, the span shape of the
    Python SDK's instrumentation. ``hidden``: ``OPENINFERENCE_HIDE_INPUTS`` / ``_OUTPUTS`` set."""
    hide = {"OPENINFERENCE_HIDE_INPUTS": "true", "OPENINFERENCE_HIDE_OUTPUTS": "true"} if mode == "hidden" else {}
    with scripted_openai() as model:
        out = run_node("openai_agents.mjs", service, model.base_url, **hide)
    assert out["text"] == "Done."
    # one Responses API request per scenario call, then the final text; the agent was offered its two tools
    assert len(model.requests) == len(CALLS) + 1
    assert [t["name"] for t in model.requests[0]["tools"]] == ["get_weather", "get_population"]
    spans = wait_for_root_verdict(receiver)
    name = f"openai_agents_js-{mode}"
    record(name, unscored(spans))
    check(spans, EXPECTED[name])
    root = dict(roots_with_verdict(spans)[0].attributes or {})
    # content: book_flight, requested on a response span and answered "not found" without a tool span: scored from
    # the requests (``requested``), not unexecuted
    assert root.get(A.TRACE_UNEXECUTED_CALLS) == (0 if mode == "content" else None)
    tool_spans = [s for s in spans if A.OUTCOME in (s.attributes or {})]
    assert {(s.attributes or {})[A.CONVENTION] for s in tool_spans} == {"openinference"}
    assert len({s.context.trace_id for s in spans}) == 1
    assert len({s.context.span_id for s in spans}) == len(spans)


def test_openai_agents_js_run_ended_by_an_unknown_tool_leaves_its_trace_without_a_verdict(
    service: Service, receiver: GrpcTraceReceiver
) -> None:
    """The SDK's default on a tool the agent lacks (``toolNotFoundBehavior: 'raise_error'``) ends the run with
    ``ModelBehaviorError``; the instrumentation (0.2.15) then never ends its root span, so the trace has no root
    and no verdict, while every call that ran is still scored. The framework table says so; this test notices
    when a new version ends the root (then the table and this test change)."""
    with scripted_openai(order=[0, 1, 2, 4, 3]) as model:  # the unknown tool last: it ends the run
        out = run_node("openai_agents.mjs", service, model.base_url, UNKNOWN_TOOL="raise")
    assert out == {"error": "Tool book_flight not found in agent weather."}
    # the agent's process has exited after its flush: what it will ever send has reached the service
    wait_until(lambda: len(scored(scored_spans(receiver))) == 4, "the four scored tool spans")
    spans = scored_spans(receiver)
    assert [(s.attributes or {})[A.OUTCOME] for s in scored(spans)] == [
        "success",
        "success",
        "malformed_call",
        "execution_failed",
    ]
    ids = {s.context.span_id for s in spans}
    tops = [s for s in spans if s.parent is None or s.parent.span_id not in ids]
    assert [s.name for s in tops] == ["Agent workflow"]  # the SDK's run span, under the root that never ended
    assert tops[0].parent is not None
    assert roots_with_verdict(spans) == []
