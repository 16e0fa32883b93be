"""Schemas that arrive late (``checks.late_schema``): calls whose arguments were recorded before any schema of their
tool are validated when a span brings it, and the trace's root carries the verdicts (issue 26: Semantic Kernel
records the definitions only on its root ``invoke_agent`` span, which ends after every tool span)."""

from __future__ import annotations

import json
from typing import Any

from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_toolcall_eval import EvalConfig
from otel_toolcall_eval.checks.late_schema import WaitingCall, validate_waiting, waits_for_schema
from otel_toolcall_eval.checks.schema import ValidatorCache
from otel_toolcall_eval.online.trace_state import WAITING_BYTES
from otel_toolcall_eval.records import LateSchemaVerdict, ToolDefinition
from tests.helpers import WEATHER_SCHEMA, WEATHER_TOOL, assert_replay_matches, make_pipeline, scores, tool_span

NESTED = {"type": "function", "function": {"name": "get_weather", "parameters": WEATHER_SCHEMA}}


def _root(tools: list[dict[str, Any]]) -> dict[str, Any]:
    """An ``invoke_agent`` root as Semantic Kernel writes it: the definitions, nested, on the root only."""
    return {"gen_ai.operation.name": "invoke_agent", "gen_ai.tool.definitions": json.dumps(tools)}


# --- the check ------------------------------------------------------------------------------------------------


def test_waiting_calls_are_validated_against_the_schema_that_came() -> None:
    waiting = [
        WaitingCall(1, "get_weather", {"city": "Paris"}),
        WaitingCall(2, "get_weather", {"city": "Rome", "days": 0}),
        WaitingCall(3, "lookup", {"q": "x"}),  # no schema of its tool yet: it keeps waiting
    ]
    tools = {"get_weather": ToolDefinition("get_weather", WEATHER_SCHEMA), "lookup": ToolDefinition("lookup")}
    still, verdict = validate_waiting(waiting, tools, ValidatorCache(), None)
    assert still == [waiting[2]]
    assert verdict is not None
    assert (verdict.checked_steps, verdict.invalid_steps, verdict.invalid_tools) == ((1, 2), (2,), ("get_weather",))
    assert verdict.errors[0].startswith("get_weather: /days: ")
    # a later schema of the waiting tool adds to the verdict, in step order
    tools["lookup"] = ToolDefinition("lookup", {"type": "object", "properties": {"q": {"type": "integer"}}})
    again, merged = validate_waiting(still, tools, ValidatorCache(), verdict)
    assert again == []
    assert merged is not None
    assert (merged.checked_steps, merged.invalid_steps, merged.invalid_tools) == (
        (1, 2, 3),
        (2, 3),
        ("get_weather", "lookup"),
    )


def test_nothing_validated_leaves_the_verdict_as_it_was() -> None:
    waiting = [WaitingCall(1, "get_weather", {"city": "Paris"})]
    before = LateSchemaVerdict((4,), (), (), ())
    assert validate_waiting(waiting, {}, ValidatorCache(), before) == (waiting, before)
    broken = {"get_weather": ToolDefinition("get_weather", {"type": "no-such-type"})}  # does not compile: no verdict
    assert validate_waiting(waiting, broken, ValidatorCache(), None) == (waiting, None)


# --- the processor ---------------------------------------------------------------------------------------------


def test_a_schema_on_the_root_validates_the_calls_that_ended_before_it() -> None:
    """A call the framework ran although its arguments break the schema (nothing rejected it): its tool span goes
    out without a schema verdict, the root (the defining span) carries it, and the trace is not correct."""
    p = make_pipeline()
    raw = InMemorySpanExporter()
    p.provider.add_span_processor(SimpleSpanProcessor(raw))
    with p.tracer.start_as_current_span("invoke_agent weather", attributes=_root([NESTED])):
        tool_span(p.tracer, "get_weather", {"city": "Paris"}, call_id="a", result="sunny")
        tool_span(p.tracer, "get_weather", {"city": "Rome", "days": 0}, call_id="b", result="rain")
    for span in p.by_name("execute_tool get_weather"):
        s = scores(span)
        assert s["outcome"] == "success" and s["parse_ok"] is True and "schema_valid" not in s
    root = scores(p.one("invoke_agent weather"))
    assert root["trace.late_schema.checked"] == 2
    assert root["trace.late_schema.invalid"] == 1
    assert root["trace.late_schema.checked_steps"] == [1, 2]
    assert root["trace.late_schema.invalid_steps"] == [2]
    assert root["trace.late_schema.errors"] == ["get_weather: /days: 0 is less than the minimum of 1"]
    assert root["trace.correct"] is False and root["trace.composite_ok"] is False
    assert root["trace.unlisted_calls"] == 0  # the names were checked late too
    # the late verdict counts as the call's schema_invalid violation, as it would have on its span
    assert p.metric_sum("toolcall_eval.violations", tool="get_weather", violation="schema_invalid") == 1
    # replay runs the same processor: the same verdicts from the recorded spans
    p.provider.force_flush()
    assert_replay_matches(list(raw.get_finished_spans()), p.spans())


def test_valid_calls_validated_late_keep_the_trace_correct() -> None:
    p = make_pipeline()
    with p.tracer.start_as_current_span("invoke_agent weather", attributes=_root([WEATHER_TOOL])):
        tool_span(p.tracer, "get_weather", {"city": "Paris", "days": 2}, result="sunny")
    root = scores(p.one("invoke_agent weather"))
    assert (root["trace.late_schema.checked"], root["trace.late_schema.invalid"]) == (1, 0)
    assert "trace.late_schema.invalid_steps" not in root
    assert root["trace.correct"] is True


def test_a_schema_on_a_span_that_ends_before_the_root_is_used_when_it_ends() -> None:
    """google-genai's ``generate_content`` (or ADK's legacy ``call_llm``) ends after its tool spans and before the
    root: the waiting calls are validated when it ends; calls after it are validated at once, on their span."""
    p = make_pipeline()
    with p.tracer.start_as_current_span("agent"):
        with p.tracer.start_as_current_span("generate_content", attributes=_chat([WEATHER_TOOL])):
            tool_span(p.tracer, "get_weather", {"city": 5}, result="?")
        tool_span(p.tracer, "get_weather", {"city": "Oslo", "days": 0}, result="snow")
    late, at_once = p.by_name("execute_tool get_weather")
    assert "schema_valid" not in scores(late)
    assert scores(at_once)["schema_valid"] is False  # its schema was known when it ended
    root = scores(p.one("agent"))
    assert (root["trace.late_schema.checked_steps"], root["trace.late_schema.invalid_steps"]) == ([1], [1])
    assert root["trace.correct"] is False


def _chat(tools: list[dict[str, Any]]) -> dict[str, Any]:
    return {"gen_ai.operation.name": "chat", "gen_ai.tool.definitions": json.dumps(tools)}


def test_no_late_verdict_without_arguments_a_schema_or_a_wait() -> None:
    """Arguments not recorded (SK's plain mode), a schema known already (the config's), or no schema ever: nothing is
    validated late and the root carries no ``trace.late_schema.*``."""
    config = EvalConfig.from_dict({"tools": [{"name": "get_weather", "parameters": WEATHER_SCHEMA}]})
    for pipeline, arguments, tools in (
        (make_pipeline(), None, [NESTED]),
        (make_pipeline(config), {"city": "Paris"}, [NESTED]),
        (make_pipeline(), {"city": "Paris"}, [{"type": "function", "function": {"name": "get_weather"}}]),
    ):
        with pipeline.tracer.start_as_current_span("invoke_agent weather", attributes=_root(tools)):
            tool_span(pipeline.tracer, "get_weather", arguments, result="sunny")
        root = scores(pipeline.one("invoke_agent weather"))
        assert not [k for k in root if k.startswith("trace.late_schema.")], root


def test_waiting_calls_are_bounded_by_the_calls_per_trace() -> None:
    from otel_toolcall_eval.records import new_call_score

    assert waits_for_schema(_score(new_call_score, {"city": "Paris"}))
    assert not waits_for_schema(_score(new_call_score, None))  # no arguments: nothing to validate
    p = make_pipeline(EvalConfig.from_dict({"limits": {"max_calls_per_trace": 3}}))
    with p.tracer.start_as_current_span("invoke_agent weather", attributes=_root([NESTED])):
        for n in range(5):
            tool_span(p.tracer, "get_weather", {"city": f"c{n}", "days": 0}, result="sunny")
    root = scores(p.one("invoke_agent weather"))
    assert root["trace.late_schema.checked"] == 3  # the first three waited; past the bound none is kept
    # and in bytes: the state keeps at most WAITING_BYTES of argument text a trace
    p = make_pipeline()
    big = "x" * (WAITING_BYTES // 3)
    with p.tracer.start_as_current_span("invoke_agent weather", attributes=_root([NESTED])):
        for _ in range(5):
            tool_span(p.tracer, "get_weather", {"city": big}, result="sunny")
    assert scores(p.one("invoke_agent weather"))["trace.late_schema.checked_steps"] == [1, 2]


def _score(new_call_score: Any, arguments: dict[str, Any] | None) -> Any:
    from otel_toolcall_eval.records import Outcome, ParseStatus

    status = ParseStatus.OK if arguments is not None else ParseStatus.ABSENT
    return new_call_score("t", 1, Outcome.SUCCESS, None, status, None, None, (), None, None, None, None, None, [], 0,
                          arguments, None, None, ())  # fmt: skip
