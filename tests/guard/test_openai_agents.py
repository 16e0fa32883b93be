"""The guard as the OpenAI Agents SDK's tool guardrails, on a real agent run against the local fake of the model
API (``tests/integration/scripted_openai.py``): a forbidden call is rejected before the tool runs, the model reads
the guard's message as the tool's output, the run goes on, and the decision is recorded."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tests.helpers import Recorded
from tests.integration.scripted_openai import scripted_openai

pytest.importorskip("agents", reason="the frameworks extra is not installed")
pytestmark = pytest.mark.integration

CONFIG = {
    "policies": {
        "must_not_call": ["delete_all"],
        "required_steps": [{"tool": "login", "before": ["transfer"]}],
    }
}
SCRIPT = [
    ("call_1", "delete_all", {}),
    ("call_2", "transfer", {"amount": 10}),
    ("call_3", "login", {"user": "ada"}),
    ("call_4", "transfer", {"amount": 10}),
]


def _run(mode: str) -> tuple[Recorded, list[str], Any]:
    import openai
    from agents import Agent, OpenAIResponsesModel, RunConfig, Runner, function_tool

    from otel_toolcall_eval.guard.openai_agents import protect

    ran: list[str] = []

    @function_tool
    def delete_all() -> str:
        """Delete every record."""
        ran.append("delete_all")
        return "deleted"

    @function_tool
    def login(user: str) -> str:
        """Log in."""
        ran.append("login")
        return "ok"

    @function_tool
    def transfer(amount: int) -> str:
        """Transfer money."""
        ran.append("transfer")
        return "sent"

    r = Recorded(CONFIG, mode=mode)
    with scripted_openai(script=SCRIPT) as fake:
        client = openai.AsyncOpenAI(base_url=fake.base_url, api_key="test-key", max_retries=0,
                                    http_client=httpx.AsyncClient(trust_env=False))  # fmt: skip
        agent = Agent(name="bank", instructions="Use the tools.", tools=[delete_all, login, transfer],
                      model=OpenAIResponsesModel(model="fake-model", openai_client=client))  # fmt: skip
        protect(agent, r.guard, scope="run-1")
        # the SDK's own trace exporter would talk to OpenAI's servers: off for this run only (a global switch would
        # leave the other framework tests without spans)
        result = Runner.run_sync(agent, "Clean up and pay", max_turns=10, run_config=RunConfig(tracing_disabled=True))
        assert result.final_output
        return r, ran, fake


def _tool_outputs(fake: Any) -> dict[str, str]:
    """What the model was told each call returned (the function_call_output items it was sent back)."""
    out = {}
    for body in fake.requests:
        for item in body.get("input", []):
            if isinstance(item, dict) and item.get("type") == "function_call_output":
                out[item["call_id"]] = item["output"] if isinstance(item["output"], str) else json.dumps(item["output"])
    return out


def test_the_sdk_rejects_what_the_guard_stops_and_the_run_goes_on() -> None:
    r, ran, fake = _run("enforce")
    assert ran == ["login", "transfer"]  # delete_all and the transfer before login never ran
    told = _tool_outputs(fake)
    assert "'delete_all' must never be called" in told["call_1"]
    assert "'login' must succeed in an earlier turn before 'transfer'" in told["call_2"]
    assert told["call_4"] == "sent"
    spans = {s.attributes["gen_ai.tool.call.id"]: s.attributes for s in r.spans()}
    assert set(spans) == {"call_1", "call_2"}
    assert spans["call_1"]["toolcall_eval.guard.prevented"] is True
    assert list(spans["call_2"]["toolcall_eval.guard.policies"]) == ["required_steps"]


def test_shadow_mode_changes_nothing_but_the_record() -> None:
    r, ran, fake = _run("shadow")
    assert ran == ["delete_all", "transfer", "login", "transfer"]
    assert _tool_outputs(fake)["call_1"] == "deleted"
    spans = {s.attributes["gen_ai.tool.call.id"]: s.attributes for s in r.spans()}
    assert spans["call_1"]["gen_ai.guardrail.result.value"] == "block"
    assert spans["call_1"]["toolcall_eval.guard.prevented"] is False
    # the second transfer is a duplicate of the first (which ran in shadow mode): a warning only
    assert list(spans["call_4"]["toolcall_eval.guard.policies"]) == ["duplicate"]
