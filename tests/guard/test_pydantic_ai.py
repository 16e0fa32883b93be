"""The guard as a pydantic-ai capability, on a real instrumented agent run against the local fake of the model API
(``tests/integration/scripted_openai.py``): a forbidden call fails before the tool runs, the model is told why and
the run goes on; the decision's span sits in the run's trace."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from pydantic_ai import Agent
from pydantic_ai.models.instrumented import InstrumentationSettings
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from otel_toolcall_eval.guard.pydantic_ai import GuardCapability
from tests.helpers import REFUND_POLICIES, REFUND_SCRIPT, Recorded
from tests.integration.scripted_openai import scripted_openai

pytestmark = pytest.mark.integration


def _run(mode: str) -> tuple[Recorded, list[str], Any]:
    r = Recorded(REFUND_POLICIES, mode=mode)
    ran: list[str] = []
    with scripted_openai(script=REFUND_SCRIPT) as fake:
        provider = OpenAIProvider(base_url=fake.base_url, api_key="test-key",
                                  http_client=httpx.AsyncClient(trust_env=False))  # fmt: skip
        agent = Agent(OpenAIChatModel("fake-model", provider=provider), capabilities=[GuardCapability(r.guard)])
        agent.instrument = InstrumentationSettings(tracer_provider=r.tracer_provider, include_content=True)

        @agent.tool_plain
        def delete_all() -> str:
            """Delete every record."""
            ran.append("delete_all")
            return "deleted"

        @agent.tool_plain
        def confirm() -> str:
            """Ask the user to confirm."""
            ran.append("confirm")
            return "confirmed"

        @agent.tool_plain
        def refund(order: int) -> str:
            """Refund an order."""
            ran.append("refund")
            return "refunded"

        agent.run_sync("Clean up, then refund order 7")
    return r, ran, fake


def _told(fake: Any) -> dict[str, str]:
    """What the model was told each call returned (the tool messages it was sent back)."""
    out = {}
    for body in fake.requests:
        for message in body.get("messages", []):
            if message.get("role") == "tool":
                out[message["tool_call_id"]] = message["content"]
    return out


def test_the_capability_stops_calls_before_the_tool_runs() -> None:
    r, ran, fake = _run("enforce")
    assert ran == ["confirm", "refund"]
    told = _told(fake)
    assert "'delete_all' must never be called" in told["call_1"]
    assert "needs approval" in told["call_2"] and "'confirm' must succeed" in told["call_2"]
    assert told["call_4"] == "refunded"
    guard_spans = [s for s in r.spans() if s.name == "apply_guardrail otel-toolcall-eval"]
    assert [s.attributes["gen_ai.tool.call.id"] for s in guard_spans] == ["call_1", "call_2"]
    run_trace = {s.context.trace_id for s in r.spans() if s.name.startswith("agent run") or "invoke_agent" in s.name}
    assert {s.context.trace_id for s in guard_spans} <= run_trace  # recorded inside the agent's own trace


def test_shadow_mode_runs_every_call_and_records_the_decisions() -> None:
    r, ran, fake = _run("shadow")
    assert ran == ["delete_all", "refund", "confirm", "refund"]
    assert _told(fake)["call_1"] == "deleted"
    decided = {s.attributes["gen_ai.tool.call.id"]: s.attributes for s in r.spans() if s.name.startswith("apply_")}
    assert decided["call_1"]["gen_ai.guardrail.result.value"] == "block"
    assert decided["call_2"]["gen_ai.guardrail.result.value"] == "ask"
    assert all(a["toolcall_eval.guard.prevented"] is False for a in decided.values())
