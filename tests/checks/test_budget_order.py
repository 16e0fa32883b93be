"""One rule for the step budget inside a parallel batch, in the engine (issue 29).

The calls of one parallel batch were issued at once: their order among themselves is how they happened to end
(online) or how a run line lists them (offline), and the two disagree. A call's budget position is therefore where
its batch starts: 1 + the calls made before the batch (a call without a batch: 1 + the calls before it). A call is
over the budget when its position is; the trace is over the budget when any call is. So a batch the model issued
within the budget runs whole within it, and which call of a batch is "over" never depends on the end order.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from otel_toolcall_eval import EvalConfig
from otel_toolcall_eval.checks.verdict import trace_verdict
from otel_toolcall_eval.engine import Scorer
from otel_toolcall_eval.records import NO_ERROR, CallHistory, new_tool_call_record
from tests.helpers import harvested, harvested_offline, harvested_online, make_pipeline, scores

BUDGET = EvalConfig.from_dict({"policies": {"step_budget": 3}})


def _call(name: str) -> Any:
    return new_tool_call_record(name, "{}", None, False, NO_ERROR, None, "offline", None, "", "", None, None, None)


def _flags(order: list[str], before: int = 2) -> tuple[dict[str, bool | None], bool]:
    scorer, history = Scorer(BUDGET.policy()), CallHistory()
    for i in range(before):
        scorer.score(_call(f"first{i}"), history, batch=i + 1)
    out = {name: scorer.score(_call(name), history, batch=before + 1).over_budget for name in order}
    return out, trace_verdict(history, 3).over_budget


def test_which_call_of_a_batch_is_over_budget_does_not_depend_on_its_order() -> None:
    """Budget 3, two calls, then a batch of three: before, the batch's last call in whatever order was over."""
    results = [_flags(list(order)) for order in itertools.permutations(["a", "b", "c"])]
    assert all(r == results[0] for r in results)
    flags, over = results[0]
    assert flags == {"a": False, "b": False, "c": False} and over is False  # issued within the budget: runs whole
    late, over = _flags(["a", "b"], before=3)  # a batch issued after the budget was spent: all of it is over
    assert late == {"a": True, "b": True} and over is True


def test_calls_without_a_batch_count_one_by_one() -> None:
    scorer, history = Scorer(BUDGET.policy()), CallHistory()
    flags = [scorer.score(_call(n), history).over_budget for n in "abcd"]
    assert flags == [False, False, False, True] and trace_verdict(history, 3).over_budget


def _reversed_batch_trace() -> Any:
    """Two single calls, then one chat turn requesting three calls that run in parallel and end in reverse order
    (as they started): online scores them by end order, the harvested run line lists them by start order."""
    import json

    pipe = make_pipeline(EvalConfig.from_dict({"policies": {"step_budget": 3}}))
    tracer = pipe.tracer
    tools = [{"type": "function", "name": n, "parameters": {"type": "object", "properties": {}}} for n in "abcxy"]
    with tracer.start_as_current_span("invoke_agent", attributes={"gen_ai.operation.name": "invoke_agent"}):
        for turn, names in enumerate([["x"], ["y"], ["a", "b", "c"]]):
            parts = [{"type": "tool_call", "id": f"{turn}.{n}", "name": n, "arguments": "{}"} for n in names]
            attrs = {
                "gen_ai.operation.name": "chat",
                "gen_ai.tool.definitions": json.dumps(tools),
                "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": parts}]),
            }
            with tracer.start_as_current_span("chat", attributes=attrs):
                pass
            spans = []
            for n in names:
                spans.append(
                    tracer.start_span(
                        f"execute_tool {n}",
                        attributes={
                            "gen_ai.operation.name": "execute_tool",
                            "gen_ai.tool.name": n,
                            "gen_ai.tool.call.id": f"{turn}.{n}",
                            "gen_ai.tool.call.arguments": "{}",
                        },
                    )
                )
            for span in reversed(spans):
                span.end()
    return pipe


def test_online_and_offline_mark_the_same_calls_of_a_batch_over_budget(tmp_path: Path) -> None:
    pipe = _reversed_batch_trace()
    online_rows, _ = harvested_online(pipe)
    tool_spans = sorted(
        (s for s in pipe.spans() if (s.attributes or {}).get("gen_ai.operation.name") == "execute_tool"),
        key=lambda s: s.end_time or 0,
    )
    online = {s.attributes["gen_ai.tool.name"]: scores(s).get("over_budget") for s in tool_spans}
    cases, lines = harvested(tmp_path, [pipe])
    (key,) = lines
    rows, _ = harvested_offline(cases[key], lines[key])
    offline = {call["name"]: row["over_budget"] for call, row in zip(lines[key]["tool_calls"], rows, strict=True)}
    assert [c["name"] for c in lines[key]["tool_calls"]][2:] == ["a", "b", "c"]  # listed by start order
    assert [s.attributes["gen_ai.tool.name"] for s in tool_spans][2:] == ["c", "b", "a"]  # ended in reverse
    assert online == offline == {"x": False, "y": False, "a": False, "b": False, "c": False}
    assert len(online_rows) == 5
