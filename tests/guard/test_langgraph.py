"""The guard in LangGraph's tool node, on a real ``create_react_agent`` graph around a scripted chat model: a
forbidden call is answered with an error ToolMessage before the tool runs, the graph goes on, the decision is
recorded."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.prebuilt import create_react_agent

from otel_toolcall_eval.guard.langgraph import guarded_tool_node
from tests.helpers import Recorded
from tests.integration.scripted_langchain import LANGGRAPH_DEPRECATION, ScriptedChatModel, calls

pytestmark = [pytest.mark.integration, pytest.mark.filterwarnings(LANGGRAPH_DEPRECATION)]

CONFIG = {"policies": {"must_not_call": ["delete_all"]}}


def _run(mode: str) -> tuple[Recorded, list[str], list[Any]]:
    ran: list[str] = []

    @tool
    def delete_all() -> str:
        """Delete every record."""
        ran.append("delete_all")
        return "deleted"

    @tool
    def search(q: str) -> str:
        """Search the records."""
        ran.append("search")
        if q == "fail":
            raise ConnectionError("index down")
        return f"3 records match {q}"

    r = Recorded(CONFIG, mode=mode)
    model = ScriptedChatModel(
        responses=[
            calls(("c1", "delete_all", {})),
            calls(("c2", "search", {"q": "fail"})),
            calls(("c3", "search", {"q": "fail"})),
            calls(("c4", "search", {"q": "invoices"})),
            AIMessage(content="done"),
        ]
    )
    node = guarded_tool_node([delete_all, search], r.guard, scope="run", handle_tool_errors=True)
    out = create_react_agent(model, node).invoke({"messages": [("user", "clean up")]})
    return r, ran, [m for m in out["messages"] if isinstance(m, ToolMessage)]


def test_the_tool_node_answers_a_stopped_call_with_an_error_message() -> None:
    r, ran, answers = _run("enforce")
    assert ran == ["search", "search"]  # delete_all and the repeated failure never ran
    by_id = {m.tool_call_id: m for m in answers}
    assert by_id["c1"].status == "error" and "'delete_all' must never be called" in str(by_id["c1"].content)
    assert by_id["c2"].status == "error" and "index down" in str(by_id["c2"].content)
    assert by_id["c3"].status == "error" and "the same call failed earlier" in str(by_id["c3"].content)
    assert by_id["c4"].content == "3 records match invoices"
    prevented = [
        s.attributes["gen_ai.tool.call.id"] for s in r.spans() if s.attributes["toolcall_eval.guard.prevented"]
    ]
    assert prevented == ["c1", "c3"]


def test_shadow_mode_lets_every_call_run() -> None:
    _, ran, answers = _run("shadow")
    assert ran == ["delete_all", "search", "search", "search"]
    assert {m.tool_call_id: m.content for m in answers}["c1"] == "deleted"
