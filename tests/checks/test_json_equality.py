"""JSON value equality at every depth (issue 29): ``true`` is not ``1`` inside objects and arrays, and ``1`` is
``1.0`` only where the tool's schema says ``number``; in the graded argument match and in every trajectory
argument mode. Python's ``==`` holds for ``{"a": True} == {"a": 1}`` and ``[1] == [1.0]``, so any comparison that
tries ``==`` on two containers before the key-by-key rules is wrong; these tests pin that it never does.

The property tests compare the scorer, with every normalisation off, against ``reference_equal``: a plain
recursive definition written from the rule, not from the code.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from otel_toolcall_eval.checks.argument_match import ABSENT, Normalizer, match_arguments
from otel_toolcall_eval.checks.schema_at import SchemaAt
from otel_toolcall_eval.checks.trajectory import arguments_match
from otel_toolcall_eval.config import EvalConfig
from otel_toolcall_eval.dataset.models import DatasetCase
from otel_toolcall_eval.offline.prepare import Preparer
from otel_toolcall_eval.offline.runs import parse_run_line
from otel_toolcall_eval.offline.score import score_case

NORM = Normalizer()
PLAIN = Normalizer(
    case_insensitive=False, strip_whitespace=False, dates=False, numeric_strings=False, null_is_absent=False
)
# a schema that says "number" wherever a number can be, at any depth (through ``$ref``s to the root)
NUMBERS_ANYWHERE: dict[str, Any] = {
    "anyOf": [
        {"type": "number"},
        {"type": "object", "additionalProperties": {"$ref": "#"}},
        {"type": "array", "items": {"$ref": "#"}},
        {"type": ["string", "boolean", "null"]},
    ]
}
# the same as a tool's parameters: an object whose values say number at any depth, through ``$defs``
OBJECT_OF_NUMBERS: dict[str, Any] = {
    "type": "object",
    "additionalProperties": {"$ref": "#/$defs/v"},
    "$defs": {
        "v": {
            "anyOf": [
                {"type": "number"},
                {"type": "object", "additionalProperties": {"$ref": "#/$defs/v"}},
                {"type": "array", "items": {"$ref": "#/$defs/v"}},
                {"type": ["string", "boolean", "null"]},
            ]
        }
    },
}


def reference_equal(expected: Any, actual: Any, numbers: bool, subset: bool) -> bool:
    """JSON equality as the rule states it: a boolean only equals a boolean, two numbers of different Python types
    (``1`` and ``1.0``) only where the schema says number (``numbers``), objects key by key (``subset``: extra
    actual keys allowed), arrays element by element."""
    if isinstance(expected, bool) or isinstance(actual, bool):
        return type(expected) is type(actual) and expected == actual
    if isinstance(expected, (int, float)) and isinstance(actual, (int, float)):
        return expected == actual and (type(expected) is type(actual) or numbers)
    if isinstance(expected, dict) and isinstance(actual, dict):
        if not subset and expected.keys() != actual.keys():
            return False
        return all(k in actual and reference_equal(v, actual[k], numbers, subset) for k, v in expected.items())
    if isinstance(expected, list) and isinstance(actual, list):
        return len(expected) == len(actual) and all(
            reference_equal(e, a, numbers, subset) for e, a in zip(expected, actual, strict=True)
        )
    return type(expected) is type(actual) and expected == actual


SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.sampled_from([0, 1, 2, -1, 0.0, 1.0, 2.0, -1.0, 1.5]),
    st.sampled_from(["a", "b", "1"]),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from("xyz"), inner, max_size=3),
    max_leaves=6,
)


def _mutate(value: Any, data: st.DataObject) -> Any:
    """A value that differs from ``value`` at most by a swapped type somewhere inside (True <-> 1, 1 <-> 1.0)."""
    if isinstance(value, dict):
        return {k: _mutate(v, data) for k, v in value.items()}
    if isinstance(value, list):
        return [_mutate(v, data) for v in value]
    if not data.draw(st.booleans()):
        return value
    if value is True or value is False:
        return int(value)
    if type(value) is int:
        return data.draw(st.sampled_from([float(value), value == 1]))
    if type(value) is float and value.is_integer():
        return int(value)
    return value


@settings(max_examples=400, deadline=None)
@given(VALUES, st.data())
def test_normalizer_equal_is_the_reference_at_every_depth(expected: Any, data: st.DataObject) -> None:
    actual = data.draw(st.one_of(VALUES, st.just(_mutate(expected, data))))
    for required_only in (True, False):
        assert PLAIN.equal(expected, actual, required_only) is reference_equal(
            expected, actual, False, required_only
        ), (expected, actual, required_only)
        assert PLAIN.equal(expected, actual, required_only, schema=SchemaAt.of(NUMBERS_ANYWHERE)) is reference_equal(
            expected, actual, True, required_only
        ), (expected, actual, required_only)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from("xyz"), VALUES, max_size=3), st.data())
def test_graded_match_and_every_trajectory_mode_are_the_reference(
    expected: dict[str, Any], data: st.DataObject
) -> None:
    actual = data.draw(
        st.one_of(st.dictionaries(st.sampled_from("xyz"), VALUES, max_size=3), st.just(_mutate(expected, data)))
    )
    for schema, numbers in ((None, False), (OBJECT_OF_NUMBERS, True)):
        graded = match_arguments(expected, actual, PLAIN, schema=schema).ok
        assert graded is reference_equal(expected, actual, numbers, True), (expected, actual, schema)
        strict = match_arguments(expected, actual, PLAIN, required_only=False, schema=schema).ok
        assert strict is reference_equal(expected, actual, numbers, False)
        assert arguments_match("exact", expected, actual, PLAIN, schema=schema) is reference_equal(
            expected, actual, numbers, False
        )
        # a trajectory mode's own rule is for the top-level keys; nested values compare whole (strictly)
        superset = all(k in actual and reference_equal(v, actual[k], numbers, False) for k, v in expected.items())
        assert arguments_match("superset", expected, actual, PLAIN, schema=schema) is superset
        assert arguments_match("subset", expected, actual, PLAIN, schema=schema) is reference_equal(
            {k: v for k, v in expected.items() if k in actual}, actual, numbers, False
        )


@pytest.mark.parametrize(
    ("expected", "actual"),
    [
        ({"private": True}, {"private": 1}),
        ([True], [1]),
        ({"a": [{"b": False}]}, {"a": [{"b": 0}]}),
        ({"n": 1}, {"n": 1.0}),  # no schema says number here
        ([2], [2.0]),
    ],
)
def test_python_equal_containers_are_not_json_equal(expected: Any, actual: Any) -> None:
    assert expected == actual  # what Python's == says
    assert not NORM.equal(expected, actual)
    assert not NORM.equal(actual, expected)
    assert not match_arguments({"k": expected}, {"k": actual}, NORM).ok
    for mode in ("exact", "subset", "superset"):
        assert not arguments_match(mode, {"k": expected}, {"k": actual}, NORM)
    assert not NORM.exact_equal(expected, actual)


SETTINGS = {
    "type": "object",
    "properties": {
        "flags": {"type": "object", "properties": {"private": {"type": "boolean"}}},
        "ratio": {"type": "number"},
        "count": {"type": "integer"},
        "point": {"type": "array", "items": {"type": "number"}},
        "ref": {"$ref": "#/$defs/amount"},
        "maybe": {"anyOf": [{"type": "number"}, {"type": "null"}]},
    },
    "$defs": {"amount": {"type": "object", "properties": {"value": {"type": "number"}}}},
}


@pytest.mark.parametrize(
    ("expected", "actual", "equal"),
    [
        ({"ratio": 1}, {"ratio": 1.0}, True),  # the schema says number: one number type
        ({"point": [1, 2]}, {"point": [1.0, 2.0]}, True),
        ({"ref": {"value": 3}}, {"ref": {"value": 3.0}}, True),  # through a $ref
        ({"maybe": 3}, {"maybe": 3.0}, True),  # a branch says number
        ({"count": 1}, {"count": 1.0}, False),  # integer: 1.0 is another literal
        ({"flags": {"private": True}}, {"flags": {"private": 1}}, False),
        ({"ratio": True}, {"ratio": 1}, False),
    ],
)
def test_one_is_one_point_zero_only_where_the_schema_says_number(
    expected: dict[str, Any], actual: dict[str, Any], equal: bool
) -> None:
    assert match_arguments(expected, actual, NORM, schema=SETTINGS).ok is equal
    assert arguments_match("exact", expected, actual, NORM, schema=SETTINGS) is equal
    for exact in ([], list(expected)):  # the graded match's fast path, and the exact_args path
        case = DatasetCase.model_validate(
            {
                "id": "c",
                "user_input": "u",
                "expected_tool_calls": [{"name": "set", "args": expected, "exact_args": exact}],
                "available_tools": [{"name": "set", "parameters": SETTINGS}],
                "trajectory": {"mode": "strict", "args": "exact"},
            }
        )
        prep = Preparer(EvalConfig())
        line = orjson.dumps({"id": "c", "tool_calls": [{"name": "set", "arguments": actual}]})
        result = score_case(prep.prepare(case, 1), parse_run_line("run.jsonl", 1, line), prep)
        assert result.passed is equal, result.reasons
        assert result.trajectory_match is equal


def test_the_offline_fast_path_does_not_pass_python_equal_objects() -> None:
    """One call of one tool, identical keys: the path that skips ``match_arguments`` for identical values."""
    case = DatasetCase.model_validate(
        {"id": "c", "user_input": "u", "expected_tool_calls": [{"name": "share", "args": {"opts": {"private": True}}}]}
    )
    prep = Preparer(EvalConfig())
    run = parse_run_line(
        "run.jsonl",
        1,
        orjson.dumps({"id": "c", "tool_calls": [{"name": "share", "arguments": {"opts": {"private": 1}}}]}),
    )
    result = score_case(prep.prepare(case, 1), run, prep)
    assert not result.passed
    assert "share arguments differ: opts" in result.reasons


def test_absent_rules_still_apply_inside_objects() -> None:
    assert NORM.equal({"a": None}, {})  # null == absent (the default), at depth too
    assert not PLAIN.equal({"a": None}, {})
    assert NORM.equal({"a": 1}, {"a": ABSENT}) is False


def test_the_schema_is_asked_only_where_two_values_can_need_it() -> None:
    """A key's schema is looked up for two numbers of different types, a number against a string, or two
    containers; never for strings (normalised or not) or equal values of one type, which is nearly every key of
    a dataset (``argument_match.under``: a lookup at every key cost the offline scorer ~15 % per case)."""
    asked: list[str] = []

    @dataclass(slots=True, frozen=True)
    class Counting(SchemaAt):
        def at_key(self, key: str) -> SchemaAt | None:
            asked.append(key)
            return SchemaAt.at_key(self, key)

    schema = {
        "type": "object",
        "properties": {"city": {"type": "string"}, "days": {"type": "integer"}, "temp": {"type": "number"}},
    }
    counting = Counting(schema, schema)
    expected = {"city": "Paris", "days": 3, "temp": 1, "where": {"lat": 1}}
    actual = {"city": " paris ", "days": 3, "temp": 1.0, "where": {"lat": 1}}
    assert match_arguments(expected, actual, NORM, schema=counting).ok
    assert asked == ["temp", "where"]
    asked.clear()
    assert not match_arguments({"city": "Paris", "days": 3}, {"city": "Rome", "days": 4}, NORM, schema=counting).ok
    assert asked == []
