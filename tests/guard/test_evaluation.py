"""The evaluation side sees what the guard stopped: a blocked call is not an executed one, and the trace verdict
says which calls were prevented.

Real traces: a pydantic-ai agent with the guard's capability (its framework still writes an ``execute_tool`` span
for the call the guard failed, with the guard's span inside it) and a decorated function under an agent span (no
tool span at all for the stopped call), both through the real processor.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic_ai import Agent
from pydantic_ai.models.instrumented import InstrumentationSettings
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from otel_toolcall_eval import EvalConfig, ToolCallEvalProcessor
from otel_toolcall_eval.guard import Guard, ToolCallBlocked
from otel_toolcall_eval.guard.functions import guarded
from otel_toolcall_eval.guard.pydantic_ai import GuardCapability
from tests.helpers import REFUND_POLICIES, REFUND_SCRIPT
from tests.integration.scripted_openai import scripted_openai

pytestmark = pytest.mark.integration

CONFIG = EvalConfig.from_dict(REFUND_POLICIES)  # test_pydantic_ai's: must-not-call delete_all, refund confirmed first


def _pipeline() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(ToolCallEvalProcessor(SimpleSpanProcessor(exporter), CONFIG))
    return provider, exporter


def _pydantic_ai_run(mode: str) -> list[Any]:
    provider, exporter = _pipeline()
    guard = Guard(CONFIG, mode=mode, tracer_provider=provider)
    with scripted_openai(script=REFUND_SCRIPT) as fake:
        client = OpenAIProvider(base_url=fake.base_url, api_key="test-key",
                                http_client=httpx.AsyncClient(trust_env=False))  # fmt: skip
        agent = Agent(OpenAIChatModel("fake-model", provider=client), capabilities=[GuardCapability(guard)])
        agent.instrument = InstrumentationSettings(tracer_provider=provider, include_content=True)
        for name in ("delete_all", "confirm", "refund"):
            agent.tool_plain(name=name)(lambda **_: "done")
        agent.run_sync("Clean up, then refund order 7")
    return list(exporter.get_finished_spans())


def _tool_spans(spans: list[Any]) -> dict[str, Any]:
    return {s.attributes["gen_ai.tool.call.id"]: s.attributes for s in spans if s.name.startswith("execute_tool")}


def _root(spans: list[Any]) -> Any:
    return next(s.attributes for s in spans if s.parent is None)


def test_a_call_the_guard_stopped_is_not_scored_as_executed() -> None:
    spans = _pydantic_ai_run("enforce")
    tools = _tool_spans(spans)
    # the framework's span of a stopped call says so, and carries no scores of a call that ran
    assert tools["call_1"]["toolcall_eval.guard.prevented"] is True
    assert "toolcall_eval.violations" not in tools["call_1"] and "toolcall_eval.outcome" not in tools["call_1"]
    assert tools["call_2"]["toolcall_eval.guard.prevented"] is True
    # the calls that ran are scored as if the stopped ones never happened: step 1 and 2, no violation
    assert [tools[c]["toolcall_eval.step"] for c in ("call_3", "call_4")] == [1, 2]
    assert "toolcall_eval.violations" not in tools["call_4"]
    root = _root(spans)
    assert root["toolcall_eval.trace.tool_calls"] == 2 and root["toolcall_eval.trace.violations"] == 0
    assert root["toolcall_eval.trace.composite_ok"] is True
    assert root["toolcall_eval.trace.prevented_calls"] == 2
    assert list(root["toolcall_eval.trace.prevented_tools"]) == ["delete_all", "refund"]


def test_in_shadow_mode_the_calls_ran_and_are_scored_as_such() -> None:
    spans = _pydantic_ai_run("shadow")
    tools = _tool_spans(spans)
    assert "toolcall_eval.guard.prevented" not in tools["call_1"]
    assert list(tools["call_1"]["toolcall_eval.violations"]) == ["must_not_call"]
    root = _root(spans)
    assert root["toolcall_eval.trace.tool_calls"] == 4 and root["toolcall_eval.trace.composite_ok"] is False
    assert "toolcall_eval.trace.prevented_calls" not in root


def test_a_stopped_call_without_a_tool_span_is_still_in_the_verdict() -> None:
    provider, exporter = _pipeline()
    guard = Guard(CONFIG, tracer_provider=provider)
    tracer = provider.get_tracer("agent")

    @guarded(guard)
    def delete_all() -> str:
        return "deleted"

    @guarded(guard)
    def lookup(order: int) -> str:
        with tracer.start_as_current_span("execute_tool lookup", attributes={
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup",
            "gen_ai.tool.call.arguments": f'{{"order": {order}}}', "gen_ai.tool.call.result": "found"}):  # fmt: skip
            return "found"

    with tracer.start_as_current_span("invoke_agent support"):
        with pytest.raises(ToolCallBlocked):
            delete_all()
        lookup(7)
    spans = list(exporter.get_finished_spans())
    root = _root(spans)
    assert root["toolcall_eval.trace.tool_calls"] == 1 and root["toolcall_eval.trace.composite_ok"] is True
    assert root["toolcall_eval.trace.prevented_calls"] == 1
    assert list(root["toolcall_eval.trace.prevented_tools"]) == ["delete_all"]
