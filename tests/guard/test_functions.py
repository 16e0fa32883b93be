"""``@guarded``: plain Python tool functions, sync and async, stopped before their body runs."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from otel_toolcall_eval import EvalConfig
from otel_toolcall_eval.guard import Guard, ToolCallBlocked
from otel_toolcall_eval.guard.functions import guarded
from tests.helpers import Recorded

CONFIG = {
    "policies": {
        "must_not_call": ["drop_table"],
        "destructive_tools": [{"tool": "refund", "confirm_with": ["confirm_refund"]}],
    }
}


def test_a_sync_tool_runs_only_when_allowed() -> None:
    r = Recorded(CONFIG)
    ran: list[Any] = []

    @guarded(r.guard)
    def lookup(order_id: int, verbose: bool = False) -> str:
        ran.append(("lookup", order_id))
        return f"order {order_id}"

    @guarded(r.guard)
    def drop_table(name: str) -> None:
        ran.append(("drop_table", name))

    with r.guard.scope("run"):
        assert lookup(7) == "order 7"
        with pytest.raises(ToolCallBlocked, match="'drop_table' must never be called"):
            drop_table("orders")
        # the derived schema (type hints) is the tool's: a string for an int is a schema violation
        with pytest.raises(ToolCallBlocked, match='is not of type "integer"'):
            lookup("seven")
    assert ran == [("lookup", 7)]
    blocked = [s for s in r.spans() if s.attributes["gen_ai.tool.name"] == "drop_table"]
    assert blocked and blocked[0].attributes["toolcall_eval.guard.prevented"] is True


def test_an_async_tool_and_the_history_that_opens_the_way() -> None:
    r = Recorded(CONFIG)
    ran: list[str] = []

    @guarded(r.guard)
    async def confirm_refund(order_id: int) -> str:
        ran.append("confirm_refund")
        return "confirmed"

    @guarded(r.guard, on_block="return")
    async def refund(order_id: int, amount: float) -> str:
        ran.append("refund")
        return "refunded"

    async def agent() -> list[str]:
        with r.guard.scope("conversation-9"):
            first = await refund(1, 10.0)  # no confirmation yet: the message comes back as the tool's answer
            await confirm_refund(1)
            second = await refund(order_id=1, amount=10.0)
            return [first, second]

    first, second = asyncio.run(agent())
    assert first.startswith("The call of tool 'refund' needs approval by the tool-call guard: 'refund' is destructive")
    assert second == "refunded"
    assert ran == ["confirm_refund", "refund"]


def test_an_exception_is_recorded_as_the_call_failing() -> None:
    r = Recorded(CONFIG)
    attempts: list[int] = []

    @guarded(r.guard)
    def fetch(url: str) -> str:
        attempts.append(1)
        raise ConnectionError("unreachable")

    with r.guard.scope("s"):
        with pytest.raises(ConnectionError):
            fetch("http://x")
        with pytest.raises(ToolCallBlocked, match="the same call failed earlier"):
            fetch(url="http://x")  # by keyword: the same call
    assert len(attempts) == 1


def test_shadow_mode_runs_everything() -> None:
    guard = Guard(EvalConfig.from_dict(CONFIG), mode="shadow")
    ran = []

    @guarded(guard)
    def drop_table(name: str) -> str:
        ran.append(name)
        return "dropped"

    assert drop_table("orders") == "dropped" and ran == ["orders"]
