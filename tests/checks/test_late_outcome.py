"""Outcomes that arrive late (``checks.late_outcome``, issue 26): a call that read as a success on a span whose
instrumentation cannot record a reply's error flag (the MCP SDK's client spans), re-read from the reply the next
model request carries back for its call id, folded into the root's verdict; the same verdict offline.

The pure check first, then the processor on hand-made spans of a scope whose row records no flag, then the recorded
MCP 2.x stdio trace through harvest and ``eval``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from otel_toolcall_eval.checks.late_outcome import AwaitingReply, read_replies, reply_outcome
from otel_toolcall_eval.checks.verdict import trace_verdict
from otel_toolcall_eval.policy import DEFAULT_INPUT_ERROR_TYPES
from otel_toolcall_eval.records import CallHistory, LateOutcomeVerdict, Outcome, ToolReply
from tests.helpers import genai_turn, make_pipeline, scores

INPUT_ERRORS = frozenset(DEFAULT_INPUT_ERROR_TYPES)

# --- the pure check ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("Error executing tool get_population", (Outcome.EXECUTION_FAILED, "error.type")),
        ("ConnectionError('census service unreachable')", (Outcome.EXECUTION_FAILED, "error.type")),
        ("Error executing tool get_weather: 1 validation error for get_weatherArguments", (
            Outcome.MALFORMED_CALL, "input_rejected")),
        ("Unknown tool: book_flight", (Outcome.MALFORMED_CALL, "unknown_tool")),
        ('[{"type": "text", "text": "Error: down"}]', (Outcome.EXECUTION_FAILED, "error.type")),
        ("sunny, 21 degrees", None),
        ("no error here", None),
    ],
)  # fmt: skip
def test_a_reply_tells_the_outcome_of_a_call_that_read_as_a_success(reply: str, expected: Any) -> None:
    assert reply_outcome(reply, INPUT_ERRORS) == expected


def test_only_the_awaited_calls_are_read_each_once_and_in_step_order() -> None:
    awaiting = {"c5": AwaitingReply(5, "get_population"), "c1": AwaitingReply(1, "get_weather")}
    first = read_replies(awaiting, [ToolReply("zz", "Error: not awaited"), ToolReply("c5", "Error: down")], None,
                         INPUT_ERRORS)  # fmt: skip
    assert first == LateOutcomeVerdict((5,), (5,), ("get_population",), ("execution_failed",), ("error.type",),
                                       ("Error: down",))  # fmt: skip
    both = read_replies(awaiting, [ToolReply("c1", "sunny"), ToolReply("c5", "Error: again")], first, INPUT_ERRORS)
    assert both is not None and (both.checked_steps, both.failed_steps) == ((1, 5), (5,))
    assert awaiting == {} and read_replies(awaiting, [ToolReply("c1", "x")], both, INPUT_ERRORS) is both


def test_a_failed_reply_is_a_tool_error_and_a_malformed_one_fails_correct() -> None:
    history = CallHistory()
    failed = LateOutcomeVerdict((1,), (1,), ("t",), ("execution_failed",), ("error.type",), ("Error: x",))
    v = trace_verdict(history, None, late_outcome=failed)
    assert (v.errors, v.correct, v.composite_ok) == (1, True, False)
    rejected = LateOutcomeVerdict((1,), (1,), ("t",), ("malformed_call",), ("input_rejected",), ("Error: x",))
    assert trace_verdict(history, None, late_outcome=rejected).correct is False
    fine = LateOutcomeVerdict((1,), ())
    assert trace_verdict(history, None, late_outcome=fine).composite_ok is True


# --- the online path --------------------------------------------------------------------------------------------


def _chat(p: Any, calls: list[tuple[str, str, Any]] = (), replies: list[tuple[str, str]] = ()) -> None:
    genai_turn(p.tracer, "chat", calls, replies)


def _tool(p: Any, scope: str, name: str, call_id: str) -> None:
    """A tool span as the given instrumentation scope writes it: a GenAI ``execute_tool`` span, no result."""
    tracer = p.provider.get_tracer(scope)
    attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name, "gen_ai.tool.call.id": call_id}
    with tracer.start_as_current_span(f"execute_tool {name}", attributes=attrs):
        pass


@pytest.mark.parametrize(("scope", "read"), [("mcp-python-sdk", True), ("my.instrumentation", False)])
def test_the_reply_decides_a_call_only_where_the_scopes_row_says_its_spans_cannot_record_the_flag(
    scope: str, read: bool
) -> None:
    p = make_pipeline()
    with p.tracer.start_as_current_span("agent"):
        _chat(p, [("c1", "get_population", {"city": "Paris"})])
        _tool(p, scope, "get_population", "c1")
        _chat(p, [("c2", "get_population", {"city": "Rome"})], [("c1", "Error executing tool get_population")])
        _tool(p, scope, "get_population", "c2")
        _chat(p, [], [("c2", "12 million")])
    assert [scores(s)["outcome"] for s in p.spans() if s.name.startswith("execute_tool")] == ["success", "success"]
    root = scores(p.one("agent"))
    if not read:  # a scope without the row: its spans are taken at their word
        assert (root["trace.errors"], root["trace.composite_ok"]) == (0, True)
        assert not any(key.startswith("trace.late_outcome") for key in root)
        return
    assert (root["trace.errors"], root["trace.correct"], root["trace.composite_ok"]) == (1, True, False)
    assert (root["trace.late_outcome.checked"], root["trace.late_outcome.failed"]) == (2, 1)
    assert (root["trace.late_outcome.checked_steps"], root["trace.late_outcome.failed_steps"]) == ([1, 2], [1])
    assert root["trace.late_outcome.outcomes"] == ["execution_failed"]
    assert root["trace.late_outcome.replies"] == ["Error executing tool get_population"]


# --- offline: replay gives the same verdict; harvest and eval too ----------------------------------------------


def test_harvest_and_eval_give_the_call_its_replys_outcome(tmp_path: Path) -> None:
    """The MCP 2.x stdio client spans, replayed through the processor, written as OTLP JSON, harvested and scored by
    ``eval``: the raising tool's call carries the reply and its flag in the run line and fails offline too."""
    from otel_toolcall_eval.cli import main
    from otel_toolcall_eval.dataset import read_cases
    from otel_toolcall_eval.replay import replay_spans
    from otel_toolcall_eval.replay.otlp import encode_json
    from tests.framework_scenario import recorded
    from tests.helpers import harvested_offline

    spans = replay_spans(recorded("mcp2_stdio-content")).spans
    source, cases, runs = tmp_path / "traces.json", tmp_path / "cases.jsonl", tmp_path / "runs.jsonl"
    source.write_text(json.dumps(encode_json(list(spans))))
    where = ["--where", "toolcall_eval.trace.composite_ok = false"]
    command = ["harvest", str(source), *where, "--out", str(cases), "--runs-out", str(runs)]
    assert main(command) == 0
    (case,) = read_cases(cases)
    (line,) = [json.loads(text) for text in runs.read_text().splitlines()]
    population = line["tool_calls"][4]
    assert population["name"] == "get_population" and population["error"] == {"error_type": "tool_error"}
    assert population["result"] == "Error executing tool get_population"
    assert "get_population" not in [c.name for c in case.expected_tool_calls]  # a failed call is no expectation
    rows, _ = harvested_offline(case, line)
    assert (rows[4]["outcome"], rows[4]["error_source"]) == ("execution_failed", "error.type")
    assert [row["outcome"] for row in rows[:2]] == ["success", "success"]
