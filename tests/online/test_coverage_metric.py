"""The online coverage metric: how many scored tool calls lacked the evidence a check needs, by convention.

``toolcall_eval.coverage.calls`` is the denominator, ``toolcall_eval.coverage.missing`` counts calls without recorded
arguments, without a known schema, or (successful calls only) without a recorded result.
"""

from __future__ import annotations

from opentelemetry import trace

from otel_toolcall_eval.online import metrics as M
from tests.helpers import WEATHER_TOOL, chat_span, make_pipeline, tool_span


def test_missing_evidence_is_counted_by_convention_and_part() -> None:
    p = make_pipeline()
    with p.tracer.start_as_current_span("agent"):
        chat_span(p.tracer, [WEATHER_TOOL])
        tool_span(p.tracer, "get_weather", {"city": "Paris"}, result="sunny")  # complete
        tool_span(p.tracer, "get_weather", result="sunny")  # content capture off: no arguments
        tool_span(p.tracer, "get_weather", {"city": "Rome"})  # succeeded, no result recorded
        tool_span(p.tracer, "lookup", {"q": "x"}, result="found")  # a tool the agent does not have: no schema due
        tool_span(p.tracer, "get_weather", {"city": "Oslo"}, error=ConnectionError("down"))
        with p.tracer.start_as_current_span(
            "tool", attributes={"openinference.span.kind": "TOOL", "tool.name": "get_weather"}
        ):
            pass  # OpenInference, hidden inputs and outputs
    with p.tracer.start_as_current_span("agent"):  # a trace that lists no tools: no schema for the call
        tool_span(p.tracer, "get_weather", {"city": "Paris"}, result="sunny")
    assert p.metric_sum(M.COVERAGE_CALLS, convention="genai") == 6
    assert p.metric_sum(M.COVERAGE_CALLS, convention="openinference") == 1
    missing = {(a["convention"], a["missing"]): v for a, v in p.metric_points(M.COVERAGE_MISSING)}
    assert missing == {
        ("genai", "arguments"): 1,
        ("genai", "result"): 1,  # the failed call has no result either, and needs none
        ("genai", "schema"): 1,
        ("openinference", "arguments"): 1,
        ("openinference", "result"): 1,
    }


def test_no_missing_series_while_every_call_is_complete() -> None:
    p = make_pipeline()
    with p.tracer.start_as_current_span("agent"):
        chat_span(p.tracer, [WEATHER_TOOL])
        tool_span(p.tracer, "get_weather", {"city": "Paris"}, result="sunny")
    assert p.metric_sum(M.COVERAGE_CALLS) == 1
    assert p.metric_points(M.COVERAGE_MISSING) == []
    assert trace.get_current_span() is trace.INVALID_SPAN


def test_a_scope_whose_calls_are_all_invalid_with_the_same_undeclared_keys_is_suspected() -> None:
    """The processor's self-check (issue 26): a wrapper the shape table does not strip makes every call of its scope
    invalid with the same undeclared keys; counted by scope, so a dashboard shows the misread, not a worse model."""
    p = make_pipeline()
    with p.tracer.start_as_current_span("agent"):
        chat_span(p.tracer, [WEATHER_TOOL])
        for city in ("Paris", "Rome", "Oslo", "Bern"):
            tool_span(p.tracer, "get_weather", {"inputs": {"city": city}, "tags": [], "run": city})
    points = {(a["convention"], a["reason"]): v for a, v in p.metric_points(M.COVERAGE_SUSPECT)}
    assert points == {("genai", "same_undeclared_keys"): 2}  # the third and fourth call: three seen from then on


def test_a_valid_call_clears_the_scope_and_a_nameless_call_is_suspect() -> None:
    p = make_pipeline()
    with p.tracer.start_as_current_span("agent"):
        chat_span(p.tracer, [WEATHER_TOOL])
        tool_span(p.tracer, "get_weather", {"city": "Paris"}, result="sunny")  # valid: the shape reads this scope
        for _ in range(4):
            tool_span(p.tracer, "get_weather", {"inputs": {"city": "Rome"}})  # a model that errs, not a misread
        tool_span(p.tracer, "", {"city": "Paris"})
    points = {(a["convention"], a["reason"]): v for a, v in p.metric_points(M.COVERAGE_SUSPECT)}
    assert points == {("genai", "no_tool_name"): 1}
