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
from tests.helpers import OfferedJudge, genai_turn, make_pipeline, scores

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
    tools = [scores(s) for s in p.spans() if s.name.startswith("execute_tool")]
    root = scores(p.one("agent"))
    if not read:  # a scope without the row: its spans are taken at their word, and go out at once
        assert [s["outcome"] for s in tools] == ["success", "success"]
        assert not any("late_outcome.read" in s for s in tools)
        assert (root["trace.errors"], root["trace.composite_ok"]) == (0, True)
        assert not any(key.startswith("trace.late_outcome") for key in root)
        return
    # the tool span itself carries the outcome its reply gave (held until that reply: issue 26)
    assert [(s["step"], s["outcome"], s.get("error_source")) for s in tools] == [
        (1, "execution_failed", "error.type"),
        (2, "success", None),
    ]
    assert [s["late_outcome.read"] for s in tools] == [True, True]
    assert (root["trace.errors"], root["trace.correct"], root["trace.composite_ok"]) == (1, True, False)
    assert (root["trace.late_outcome.checked"], root["trace.late_outcome.failed"]) == (2, 1)
    assert (root["trace.late_outcome.checked_steps"], root["trace.late_outcome.failed_steps"]) == ([1, 2], [1])
    assert root["trace.late_outcome.outcomes"] == ["execution_failed"]
    assert root["trace.late_outcome.replies"] == ["Error executing tool get_population"]


# --- the tool span itself: held until its reply, then written, counted and offered once with the reply's verdict ---


class _Judge(OfferedJudge):
    """The judge (``on_call_scored``), offered every call: what it saw as (tool, outcome, step), and the failed ones
    (what ``on_call_failed`` hooks, sessions', get: the same score); it samples every call, which the span says."""

    @property
    def scored(self) -> list[tuple[str, str, int]]:
        return [(record.name, score.outcome.value, score.step) for _, record, score, _ in self.offered]

    @property
    def failed(self) -> list[tuple[str, str, int]]:
        return [call for call in self.scored if call[1] != "success"]


def _replay_through(p: Any, name: str) -> list[Any]:
    """The recorded spans handed to the pipeline's processor in the order they ended; what it forwarded."""
    from otel_toolcall_eval.replay.engine import end_order
    from tests.framework_scenario import recorded

    spans = [span for group in end_order(recorded(name)) for span in group]
    for span in spans:
        p.processor.on_end(span)
    out = p.spans()
    assert sorted(s.context.span_id for s in out) == sorted(s.context.span_id for s in spans)  # each once
    return out


def _population(p: Any) -> None:
    """The model requests ``get_population`` and the MCP SDK's client span of the call ends, reading as a success."""
    _chat(p, [("c1", "get_population", {"city": "Paris"})])
    _tool(p, "mcp-python-sdk", "get_population", "c1")


def _calls(p: Any, **labels: str) -> float:
    return p.metric_sum("toolcall_eval.tool_calls", **labels)


def test_the_mcp_stdio_client_span_of_the_raising_tool_goes_out_failed_counted_and_offered_once() -> None:
    """The MCP SDK 2.x's client span of the raising tool (``MCP send tools/call get_population``) reads as a success;
    held until the next request carries its reply, it goes out an execution failure, counted once under that outcome,
    offered to the hooks once with it; the root keeps ``trace.late_outcome.*``."""
    hooks = _Judge()
    p = make_pipeline(judge=hooks)
    out = _replay_through(p, "mcp2_stdio-content")
    tools = {scores(s)["step"]: scores(s) for s in out if "step" in scores(s)}
    population = tools[5]
    assert (population["outcome"], population["error_source"], population["late_outcome.read"]) == (
        "execution_failed",
        "error.type",
        True,
    )
    assert population["judge.sampled"] is True  # what a hook adds goes on the span it was offered from
    assert [tools[step]["outcome"] for step in (1, 2)] == ["success", "success"]
    assert [tools[step].get("late_outcome.read") for step in (1, 2, 3, 4)] == [True, True, None, None]
    root = scores(next(s for s in out if s.name == "agent"))
    assert (root["trace.late_outcome.checked"], root["trace.late_outcome.failed"], root["trace.errors"]) == (3, 1, 3)
    # counted once, under the outcome its reply gave
    assert (_calls(p, tool="get_population", outcome="execution_failed"), _calls(p, tool="get_population")) == (1, 1)
    assert (_calls(p, outcome="success"), _calls(p)) == (2, 5)
    # offered once each, in step order of release; the failed ones (the reply's among them) to on_call_failed
    assert sorted(hooks.scored, key=lambda c: c[2]) == [
        ("get_weather", "success", 1),
        ("get_weather", "success", 2),
        ("get_weather", "malformed_call", 3),
        ("book_flight", "malformed_call", 4),
        ("get_population", "execution_failed", 5),
    ]
    assert sorted(hooks.failed, key=lambda c: c[2]) == [c for c in sorted(hooks.scored, key=lambda c: c[2])[2:]]
    assert p.metric_sum("toolcall_eval.late_outcome.unread") == 0


def test_a_reply_saying_the_tool_is_unknown_makes_the_span_a_malformed_call_and_counts_its_violation() -> None:
    hooks = _Judge()
    p = make_pipeline(judge=hooks)
    with p.tracer.start_as_current_span("agent"):
        _population(p)
        assert p.by_name("execute_tool get_population") == []  # held: its reply decides
        _chat(p, [], [("c1", "Unknown tool: get_population")])
        (span,) = p.by_name("execute_tool get_population")  # out when the reply came, before the root
    got = scores(span)
    assert (got["outcome"], got["error_source"], got["tool_known"]) == ("malformed_call", "unknown_tool", False)
    assert p.metric_sum("toolcall_eval.violations", violation="unknown_tool") == 1
    assert (_calls(p, outcome="malformed_call"), _calls(p)) == (1, 1)
    assert hooks.failed == [("get_population", "malformed_call", 1)] and len(hooks.scored) == 1
    root = scores(p.one("agent"))
    assert (root["trace.correct"], root["trace.late_outcome.outcomes"]) == (False, ["malformed_call"])


def test_a_failure_read_from_the_reply_repeated_in_a_later_turn_fails_the_session() -> None:
    """Sessions see a call through ``on_call_failed``: the MCP client span's call, failing by its reply in two turns
    of one conversation, is two errors and one repeated failure of the session (none when the span was taken at its
    word)."""
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor

    from otel_toolcall_eval import attributes as A

    logs = InMemoryLogRecordExporter()
    logger_provider = LoggerProvider()
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    p = make_pipeline(logger_provider=logger_provider)
    for turn in range(2):
        with p.tracer.start_as_current_span(f"agent {turn}", attributes={A.GEN_AI_CONVERSATION_ID: "conv"}):
            _population(p)
            _chat(p, [], [("c1", "Error executing tool get_population")])
    p.provider.force_flush()
    (record,) = logs.get_finished_logs()
    session = dict(record.log_record.attributes or {})
    assert (session[A.SESSION_TURNS], session[A.SESSION_ERRORS], session[A.SESSION_REPEATED_FAILURES]) == (2, 2, 1)


def _held_pipeline(limits: dict[str, Any], judge: Any = None) -> tuple[Any, list[float]]:
    from otel_toolcall_eval import EvalConfig

    p = make_pipeline(EvalConfig.from_dict({"limits": limits}), judge=judge)
    now = [1000.0]
    held = p.processor._pipeline.held
    if held is not None:
        held._clock = lambda: now[0]
    return p, now


def test_a_span_held_past_the_bound_goes_out_as_read_and_is_counted_once() -> None:
    """``max_hold_seconds`` releases the span before its reply: as it read (a success), counted once, and the label
    says why; the reply that comes later still reaches the root's verdict, never the span again."""
    hooks = _Judge()
    p, now = _held_pipeline({"max_hold_seconds": 5}, hooks)
    with p.tracer.start_as_current_span("agent"):
        _population(p)
        now[0] += 6
        p.processor._lifecycle.tick()  # what the timer thread does
        (span,) = p.by_name("execute_tool get_population")
        assert scores(span)["outcome"] == "success" and "late_outcome.read" not in scores(span)
        _chat(p, [], [("c1", "Error executing tool get_population")])
    assert len(p.by_name("execute_tool get_population")) == 1
    assert p.metric_sum("toolcall_eval.late_outcome.unread", reason="max_hold_seconds") == 1
    assert (_calls(p, outcome="success"), _calls(p)) == (1, 1)
    assert hooks.scored == [("get_population", "success", 1)] and hooks.failed == []
    root = scores(p.one("agent"))
    assert (root["trace.late_outcome.failed"], root["trace.errors"]) == (1, 1)


@pytest.mark.parametrize(
    ("limits", "reason"), [({"max_held_spans_per_trace": 1}, "max_held_spans_per_trace"), ({"max_held_spans": 1}, "max_held_spans")]
)  # fmt: skip
def test_a_span_no_bound_lets_wait_goes_out_at_once_as_read_and_is_counted(limits: dict[str, Any], reason: str) -> None:
    p, _ = _held_pipeline(limits)
    with p.tracer.start_as_current_span("agent"):
        _chat(p, [("c1", "get_population", {"city": "Paris"}), ("c2", "get_population", {"city": "Rome"})])
        _tool(p, "mcp-python-sdk", "get_population", "c1")
        _tool(p, "mcp-python-sdk", "get_population", "c2")  # no room: out at once
        (span,) = p.by_name("execute_tool get_population")
        assert scores(span)["step"] == 2 and scores(span)["outcome"] == "success"
        _chat(p, [], [("c1", "Error executing tool get_population"), ("c2", "Error: down")])
    assert [scores(s)["outcome"] for s in p.by_name("execute_tool get_population")] == ["success", "execution_failed"]
    assert p.metric_sum("toolcall_eval.late_outcome.unread", reason=reason) == 1
    assert (_calls(p, outcome="execution_failed"), _calls(p)) == (1, 2)


def test_the_root_ending_before_any_reply_releases_the_span_as_read() -> None:
    hooks = _Judge()
    p = make_pipeline(judge=hooks)
    with p.tracer.start_as_current_span("agent"):
        _population(p)
        assert p.by_name("execute_tool get_population") == []
    assert [s.name for s in p.spans()][-2:] == ["execute_tool get_population", "agent"]  # before its root
    assert scores(p.one("execute_tool get_population"))["outcome"] == "success"
    assert p.metric_sum("toolcall_eval.late_outcome.unread", reason="trace_end") == 1
    assert (_calls(p), hooks.scored) == (1, [("get_population", "success", 1)])


def test_nothing_is_held_when_holding_is_off() -> None:
    p, _ = _held_pipeline({"max_held_spans": 0})
    with p.tracer.start_as_current_span("agent"):
        _population(p)
        assert scores(p.one("execute_tool get_population"))["outcome"] == "success"  # out at once, as read
        _chat(p, [], [("c1", "Error: down")])
    assert scores(p.one("agent"))["trace.late_outcome.failed"] == 1


def test_calls_scored_from_the_requests_of_anthropic_under_openllmetry_are_counted_and_offered_with_the_reply() -> None:
    """OpenLLMetry's Anthropic instrumentation (its row records no error flag) runs no tool span: the calls are scored
    from the requests when the reply arrives, so the raising tool's reply text decides its verdict there, counted
    and offered once (nothing to hold)."""
    hooks = _Judge()
    p = make_pipeline(judge=hooks)
    _replay_through(p, "anthropic_openllmetry-content")
    assert ("get_population", "execution_failed", 5) in hooks.failed
    assert len(hooks.scored) == 5 and len(set(hooks.scored)) == 5
    assert (_calls(p, tool="get_population", outcome="execution_failed"), _calls(p)) == (1, 5)


# --- offline: replay gives the same verdict; harvest and eval too ----------------------------------------------


def _harvested(tmp_path: Path, fixture: str | list[Any]) -> tuple[list[Any], Any, dict[str, Any], list[dict[str, Any]]]:
    """The recorded trace replayed through the processor (or spans it scored), written as OTLP JSON, harvested
    (``--runs-out``) and scored by ``eval``'s scorer: the scored spans, the case, its run line and the offline rows."""
    from otel_toolcall_eval.cli import main
    from otel_toolcall_eval.dataset import read_cases
    from otel_toolcall_eval.replay import replay_spans
    from otel_toolcall_eval.replay.otlp import encode_json
    from tests.framework_scenario import recorded
    from tests.helpers import harvested_offline

    spans = replay_spans(recorded(fixture)).spans if isinstance(fixture, str) else fixture
    source, cases, runs = tmp_path / "traces.json", tmp_path / "cases.jsonl", tmp_path / "runs.jsonl"
    source.write_text(json.dumps(encode_json(list(spans))))
    where = ["--where", "toolcall_eval.trace.composite_ok = false"]
    command = ["harvest", str(source), *where, "--out", str(cases), "--runs-out", str(runs)]
    assert main(command) == 0
    (case,) = read_cases(cases)
    (line,) = [json.loads(text) for text in runs.read_text().splitlines()]
    rows, _ = harvested_offline(case, line)
    return list(spans), case, line, rows


def test_harvest_and_eval_give_the_call_its_replys_outcome(tmp_path: Path) -> None:
    """The MCP 2.x stdio client spans harvested and scored by ``eval``: the raising tool's call carries the reply and
    its flag in the run line and fails offline too."""
    _, case, line, rows = _harvested(tmp_path, "mcp2_stdio-content")
    population = line["tool_calls"][4]
    assert population["name"] == "get_population" and population["error"] == {"error_type": "tool_error"}
    assert population["result"] == "Error executing tool get_population"
    assert "get_population" not in [c.name for c in case.expected_tool_calls]  # a failed call is no expectation
    assert (rows[4]["outcome"], rows[4]["error_source"]) == ("execution_failed", "error.type")
    assert [row["outcome"] for row in rows[:2]] == ["success", "success"]


@pytest.mark.parametrize("fixture", ["mcp2_stdio-content", "mcp2-content"])
def test_every_calls_verdict_offline_is_its_tool_spans_online(tmp_path: Path, fixture: str) -> None:
    """Per call, what ``eval`` gives the harvested run line is what the processor wrote on the call's span: the raising
    tool's client span itself says it failed, and the arguments each MCP span borrowed from the model's requests are
    in the run line (harvest borrows them as the processor does: by call id, else the one request of its name)."""
    from tests.framework_scenario import scored

    spans, _, _, rows = _harvested(tmp_path, fixture)
    verdict = ("outcome", "error_source", "parse_ok", "tool_known", "schema_valid")
    online = [tuple(scores(s).get(key) for key in verdict) for s in scored(spans)]
    assert [tuple(row[key] for key in verdict) for row in rows] == online


def test_a_call_failing_by_its_reply_as_an_earlier_one_did_is_a_repeated_failure_online_and_offline(
    tmp_path: Path,
) -> None:
    """The same call twice, each failing by its reply: the second is a repeated failure on its span (and in the
    violations), as ``eval`` finds it in the harvested run line, where both calls carry their replies' errors."""
    from tests.framework_scenario import scored

    tools = [{"type": "function", "name": "get_population", "parameters": {"type": "object"}}]
    p = make_pipeline()
    with p.tracer.start_as_current_span("agent"):
        genai_turn(p.tracer, "chat", [("c1", "get_population", {"city": "Paris"})], tools=tools)
        _tool(p, "mcp-python-sdk", "get_population", "c1")
        genai_turn(p.tracer, "chat", [("c2", "get_population", {"city": "Paris"})], [("c1", "Error: down")], tools)
        _tool(p, "mcp-python-sdk", "get_population", "c2")
        genai_turn(p.tracer, "chat", [], [("c2", "Error: down")], tools)
    spans = p.spans()
    online = [(scores(s)["outcome"], scores(s)["repeated_failure"]) for s in scored(spans)]
    assert online == [("execution_failed", False), ("execution_failed", True)]
    assert p.metric_sum("toolcall_eval.violations", violation="repeated_failure") == 1
    assert scores(p.one("agent"))["trace.correct"] is False
    _, _, _, rows = _harvested(tmp_path, spans)
    assert [(row["outcome"], row["repeated_failure"]) for row in rows] == online
