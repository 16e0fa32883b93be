"""JSON nested deeper than any walk should take: a parse verdict (``ParseStatus.TOO_DEEP``), never an
evaluation error, and one deep tool definition costs only its own schema."""

from __future__ import annotations

import json
from typing import Any

import pytest

from otel_toolcall_eval import _json
from otel_toolcall_eval.checks.normalize import arguments_key
from otel_toolcall_eval.checks.parse import parse_arguments
from otel_toolcall_eval.conventions.llm_spans import DefinitionCache
from otel_toolcall_eval.records import ParseStatus
from tests.helpers import WEATHER_TOOL, chat_span, make_pipeline, scores, tool_span


def _nested(depth: int, leaf: Any = 1) -> Any:
    value = leaf
    for _ in range(depth):
        value = {"a": value}
    return value


def _nested_text(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


@pytest.mark.parametrize("depth", [_json.MAX_DEPTH + 1, 300, 1000])
def test_deep_arguments_are_too_deep_whether_text_or_decoded(depth: int) -> None:
    assert parse_arguments(_nested_text(depth), max_bytes=10**6).status is ParseStatus.TOO_DEEP
    assert parse_arguments(_nested(depth)).status is ParseStatus.TOO_DEEP  # run files carry decoded objects
    assert parse_arguments([_nested(depth)]).status is ParseStatus.TOO_DEEP


def test_arguments_at_the_limit_parse_and_normalise() -> None:
    parsed = parse_arguments(_nested_text(_json.MAX_DEPTH), max_bytes=10**6)
    assert parsed.status is ParseStatus.OK and parsed.value is not None
    assert arguments_key("t", parsed.value).startswith("t\x00{")
    many_brackets = json.dumps({"s": "{[" * 500, "list": [[1], [2], {"x": [3]}]})  # brackets in strings
    assert parse_arguments(many_brackets, max_bytes=10**6).status is ParseStatus.OK


def test_too_deep_is_iterative_at_any_depth() -> None:
    value: Any = []
    for _ in range(100_000):
        value = [value]
    assert _json.too_deep(value) and not _json.too_deep(_nested(_json.MAX_DEPTH))
    assert _json.try_loads(_nested_text(500)) == _nested_text(500)  # kept as text: nothing walks it later


@pytest.mark.parametrize("depth", [300, 1000])
def test_deep_arguments_online_are_a_parse_verdict_not_an_eval_error(depth: int) -> None:
    p = make_pipeline()
    tool = {**WEATHER_TOOL, "parameters": {"type": "object", "properties": {"city": {"type": "object"}}}}
    with p.tracer.start_as_current_span("root"):
        chat_span(p.tracer, [tool])
        tool_span(p.tracer, "get_weather", '{"city": ' + _nested_text(depth) + "}")  # orjson parses 1,024 deep
        tool_span(p.tracer, "get_weather", '{"city": ' + _nested_text(depth) + "}")
    first, second = (scores(s) for s in p.by_name("execute_tool get_weather"))
    assert "eval_error" not in first and "eval_error" not in second
    assert first["parse_ok"] is False and first["error_source"] == "parse" and first["outcome"] == "malformed_call"
    assert "schema_valid" not in first


def test_one_deep_tool_definition_drops_only_its_own_schema() -> None:
    deep = {"type": "function", "name": "deep_tool", "parameters": _nested(300)}
    defs = DefinitionCache().parse(json.dumps([WEATHER_TOOL, deep]))
    assert [(d.name, d.parameters is not None) for d in defs] == [("get_weather", True), ("deep_tool", False)]
    p = make_pipeline()
    with p.tracer.start_as_current_span("root"):
        chat_span(p.tracer, [WEATHER_TOOL, deep])
        tool_span(p.tracer, "get_weather", {"city": 12})  # schema-invalid: city must be a string
        tool_span(p.tracer, "deep_tool", {"x": 1})
    weather, other = scores(p.one("execute_tool get_weather")), scores(p.one("execute_tool deep_tool"))
    assert weather["schema_valid"] is False and weather["outcome"] == "malformed_call"
    assert other["tool_known"] is True and "schema_valid" not in other and other["outcome"] == "success"
