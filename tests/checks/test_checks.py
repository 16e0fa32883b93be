"""The pure checks, one behaviour each, without OpenTelemetry."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from otel_toolcall_eval.checks import normalize
from otel_toolcall_eval.checks.normalize import arguments_key
from otel_toolcall_eval.checks.outcome import classify_outcome
from otel_toolcall_eval.checks.parse import parse_arguments, single_parameter
from otel_toolcall_eval.checks.same_call import wraps_same_call
from otel_toolcall_eval.checks.schema import ValidatorCache, resolve_schema, validate_arguments
from otel_toolcall_eval.checks.unknown_tool import tool_known
from otel_toolcall_eval.checks.verdict import trace_verdict
from otel_toolcall_eval.config import EvalConfig
from otel_toolcall_eval.engine import Scorer
from otel_toolcall_eval.records import (
    NO_ERROR,
    CallHistory,
    ErrorEvidence,
    Outcome,
    ParseStatus,
    ToolCallRecord,
    ToolDefinition,
)
from tests.helpers import COMPILED, WEATHER_SCHEMA

WEATHER = ToolDefinition("get_weather", WEATHER_SCHEMA, None, json.dumps(WEATHER_SCHEMA, sort_keys=True))


# --- parse ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("raw", "single", "status", "value"),
    [
        ('{"city": "Paris"}', None, ParseStatus.OK, {"city": "Paris"}),
        ({"city": "Paris"}, None, ParseStatus.OK, {"city": "Paris"}),
        ("", None, ParseStatus.OK, {}),
        (None, None, ParseStatus.ABSENT, None),
        ("Paris", "city", ParseStatus.BARE_VALUE, {"city": "Paris"}),  # LangChain single-argument tool
        ("Paris", None, ParseStatus.INVALID_JSON, None),
        ('"Paris"', "city", ParseStatus.BARE_VALUE, {"city": "Paris"}),
        ("42", "days", ParseStatus.BARE_VALUE, {"days": 42}),
        ("[1, 2]", None, ParseStatus.NOT_OBJECT, None),
        ('{"city": "Par', None, ParseStatus.INVALID_JSON, None),
        ('{"city": "Par', "city", ParseStatus.INVALID_JSON, None),  # broken JSON is never a bare value
        (b'{"a": 1}', None, ParseStatus.OK, {"a": 1}),
        (("a", "b"), None, ParseStatus.NOT_OBJECT, None),
    ],
)
def test_parse_arguments(raw: object, single: str | None, status: ParseStatus, value: object) -> None:
    parsed = parse_arguments(raw, single_param=single)
    assert parsed.status is status
    assert parsed.value == value


def test_parse_oversized_is_not_parsed() -> None:
    parsed = parse_arguments('{"a": "' + "x" * 2000 + '"}', max_bytes=1000)
    assert parsed.status is ParseStatus.OVERSIZED
    assert parsed.status.parsed is None  # neither pass nor fail: scored as oversized


def test_parse_deep_nesting_is_its_own_failure() -> None:
    parsed = parse_arguments("[" * 10_000 + "]" * 10_000, max_bytes=10**6)
    assert parsed.status is ParseStatus.TOO_DEEP
    assert parsed.status.parsed is False


def test_parse_invalid_utf8_surrogates() -> None:
    parsed = parse_arguments('{"city": "\udcff"}')
    assert parsed.status is ParseStatus.INVALID_JSON
    assert parsed.error is not None and "UTF-8" in parsed.error


def test_single_parameter() -> None:
    assert single_parameter({"properties": {"q": {}}}) == ("q", False)
    assert single_parameter({"properties": {"q": {"type": ["string", "null"]}}}) == ("q", True)
    assert single_parameter(WEATHER_SCHEMA) == (None, False)
    assert single_parameter(None) == (None, False)


def test_bare_text_for_a_string_parameter_stays_text() -> None:
    # LangChain records input.value "12345" for get_order(order_id="12345"): an ID, not a number
    assert parse_arguments("12345", single_param="order_id", string_param=True).value == {"order_id": "12345"}
    assert parse_arguments("true", single_param="q", string_param=True).value == {"q": "true"}
    assert parse_arguments("12345", single_param="n", string_param=False).value == {"n": 12345}


def test_sdk_reported_parse_failure() -> None:
    parsed = parse_arguments("Paris", single_param="city", unparseable=True)
    assert parsed.status is ParseStatus.INVALID_JSON


# --- unknown tool / schema -----------------------------------------------------------------------
def test_tool_known() -> None:
    assert tool_known("a", {"a", "b"}) is True
    assert tool_known("c", {"a", "b"}) is False
    assert tool_known("c", None) is None


def test_schema_valid_and_errors_with_paths() -> None:
    cache = ValidatorCache(4)
    assert validate_arguments({"city": "Paris"}, WEATHER, cache) is not None
    ok = validate_arguments({"city": "Paris", "days": 2}, WEATHER, cache)
    assert ok is not None and ok.valid and ok.errors == ()
    bad = validate_arguments({"days": 0, "x": 1, "y": 2, "z": 3}, WEATHER, cache, max_errors=2, max_length=40)
    assert bad is not None and not bad.valid
    assert len(bad.errors) == 2
    assert all(len(e) <= 40 for e in bad.errors)
    one = validate_arguments({"city": 3}, WEATHER, cache)
    assert one is not None and one.errors[0].startswith("/city: ")


def test_schema_cache_is_bounded_and_reused() -> None:
    cache = ValidatorCache(2)
    defs = [ToolDefinition(f"t{i}", {"type": "object", "maxProperties": i}) for i in range(5)]
    for d in defs:
        validate_arguments({}, d, cache)
    assert len(cache) == 2
    key = json.dumps(defs[4].parameters, sort_keys=True)
    assert cache.get(key, defs[4].parameters) is cache.get(key, defs[4].parameters)


def test_broken_schema_gives_no_verdict() -> None:
    broken = ToolDefinition("t", {"type": "nonsense"})
    assert validate_arguments({}, broken, ValidatorCache()) is None


def test_format_is_not_asserted() -> None:
    # Draft 2020-12 default in both validators: format is an annotation, so verdicts agree with jsonschema
    d = ToolDefinition("t", {"type": "object", "properties": {"e": {"type": "string", "format": "email"}}})
    v = validate_arguments({"e": "not-an-email"}, d, ValidatorCache())
    assert v is not None and v.valid


def test_resolve_schema_prefers_trace_and_flags_drift() -> None:
    other = ToolDefinition("get_weather", {"type": "object"}, None, '{"type":"object"}')
    r = resolve_schema("get_weather", {"get_weather": WEATHER}, None, {"get_weather": other})
    assert r.definition is WEATHER and r.source == "trace" and r.drift is True
    same = resolve_schema("get_weather", {"get_weather": WEATHER}, None, {"get_weather": WEATHER})
    assert same.drift is False
    only_config = resolve_schema("get_weather", None, None, {"get_weather": other})
    assert only_config.definition is other and only_config.source == "config" and only_config.drift is None
    assert resolve_schema("x", None, None, {}).definition is None


# --- outcome -------------------------------------------------------------------------------------
def _classify(**kw: object) -> tuple[Outcome, str | None]:
    args: dict[str, object] = {
        "parse_ok": True,
        "tool_known": True,
        "schema_valid": True,
        "error": ErrorEvidence(),
        "result": "ok",
        "result_recorded": True,
        "input_error_types": {"ValidationError", "ModelRetry"},
        "empty_results": {"", "[]", "null"},
    }
    args.update(kw)
    return classify_outcome(**args)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kw", "expected"),
    [
        ({}, (Outcome.SUCCESS, None)),
        ({"parse_ok": False}, (Outcome.MALFORMED_CALL, "parse")),
        ({"tool_known": False}, (Outcome.MALFORMED_CALL, "unknown_tool")),
        ({"schema_valid": False, "error": ErrorEvidence(status_error=True)}, (Outcome.MALFORMED_CALL, "schema")),
        ({"error": ErrorEvidence(retry_cause="validation_error")}, (Outcome.MALFORMED_CALL, "input_rejected")),
        (
            {"error": ErrorEvidence(status_error=True, exception_type="pydantic_core.ValidationError")},
            (Outcome.MALFORMED_CALL, "input_rejected"),
        ),
        (
            {"error": ErrorEvidence(status_error=True, exception_type="TimeoutError")},
            (Outcome.EXECUTION_FAILED, "exception"),
        ),
        ({"error": ErrorEvidence(error_type="tool_error")}, (Outcome.EXECUTION_FAILED, "error.type")),
        ({"error": ErrorEvidence(status_error=True)}, (Outcome.EXECUTION_FAILED, "status")),
        ({"result": "[]"}, (Outcome.EMPTY_RESULT, "result_text")),
        ({"result": None, "result_recorded": False}, (Outcome.SUCCESS, None)),
        ({"parse_ok": None, "schema_valid": None, "tool_known": None}, (Outcome.SUCCESS, None)),
    ],
)
def test_classify_outcome(kw: dict[str, object], expected: tuple[Outcome, str | None]) -> None:
    assert _classify(**kw) == expected


# --- normalisation -------------------------------------------------------------------------------
def test_arguments_key_folds_case_whitespace_and_key_order() -> None:
    a = arguments_key("t", {"q": "  Hello   World ", "n": 1.0, "z": {"b": 1, "a": [1, "X"]}})
    b = arguments_key("t", {"z": {"a": [1, "x"], "b": 1}, "n": 1, "q": "hello world"})
    assert a == b
    assert arguments_key("t", {"q": "a"}) != arguments_key("t", {"q": "b"})
    assert arguments_key("t", {"q": "a"}) != arguments_key("u", {"q": "a"})


def test_arguments_key_never_crashes_on_unhashable_or_odd_values() -> None:
    odd = {"list": [[1, 2], {"k": [3]}], "obj": object(), 1: "int key"}
    assert isinstance(arguments_key("t", odd), str)  # type: ignore[arg-type]
    assert arguments_key("t", None, "raw text") != arguments_key("t", None, "other")


def _walked_key(name: str, arguments: Any) -> str:
    """``arguments_key`` by the folding walk alone, as it was before ``_folded_text``."""
    try:
        return (
            name + "\x00" + orjson.dumps(normalize._fold(arguments), option=orjson.OPT_SORT_KEYS, default=str).decode()
        )
    except (TypeError, RecursionError):
        return name + "\x00repr\x00" + repr(arguments)


# strings that hit every condition of the text path: case, spaces (leading, trailing, doubled, other whitespace),
# quotes, backslashes, non-ASCII, digits before "." or "e" (a float's look in a string), braces
_TEXTS = st.text(alphabet=st.sampled_from(list("abcxyzAB01_ -") * 4 + list('.eE{}"\\\t\n\u00a0\u00df ')), max_size=8)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False) | _TEXTS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXTS, inner, max_size=3),
    max_leaves=8,
)


_PLAIN = st.text(alphabet=st.sampled_from(list("abcxyzAB01_-") * 3 + [" ", "."]), max_size=6)
_PLAIN_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | _PLAIN,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_PLAIN, inner, max_size=2),
    max_leaves=5,
)


@settings(max_examples=600, deadline=None)
@given(st.dictionaries(_TEXTS, _JSON, max_size=4) | st.dictionaries(_PLAIN, _PLAIN_JSON, max_size=3))
def test_arguments_key_by_the_text_equals_the_folding_walk(arguments: dict[str, Any]) -> None:
    """The text path (``normalize._folded_text``) answers only where it is exact: the key is the walk's (the second
    strategy's arguments mostly take the text path, the first's mostly not)."""
    assert arguments_key("t", arguments) == _walked_key("t", arguments)


def test_arguments_key_by_the_text_covers_the_common_arguments() -> None:
    """Lower-case ASCII arguments, and upper case in the values of a flat object, take the text path; a float, a
    nested object with upper case, or a doubled space do not (the walk decides them)."""
    assert normalize._folded_text({"query": "unpaid invoices 3", "limit": 10, "tags": ["a", "b"], "x": None})
    assert normalize._folded_text({"city": "Paris", "ok": True}) == '{"city":"paris","ok":true}'
    assert normalize._folded_text({"n": 1.0}) is None
    assert normalize._folded_text({"f": {"City": "x"}}) is None
    assert normalize._folded_text({"Q": "Paris"}) is None
    assert normalize._folded_text({"q": "a  b"}) is None
    assert normalize._folded_text({"q": " a"}) is None


# --- trajectory and policies through the scorer --------------------------------------------------
def _record(name: str, args: object, error: ErrorEvidence | None = None) -> ToolCallRecord:
    return ToolCallRecord(name=name, raw_arguments=json.dumps(args), error=error or ErrorEvidence())


def _policy_scorer(**policies: object) -> Scorer:
    return Scorer(EvalConfig.from_dict({"policies": policies}).policy())


def test_duplicate_vs_corrected_retry_vs_legit_repeat() -> None:
    scorer = _policy_scorer()
    h = CallHistory()
    first = scorer.score(_record("search", {"q": "Paris"}), h)
    same = scorer.score(_record("search", {"q": " paris "}), h)
    other = scorer.score(_record("search", {"q": "Lyon"}), h)
    assert (first.duplicate, same.duplicate, other.duplicate) == (False, True, False)
    assert [s.step for s in (first, same, other)] == [1, 2, 3]


def test_repeated_failure_only_when_same_call_fails_same_way() -> None:
    scorer = _policy_scorer()
    h = CallHistory()
    boom = ErrorEvidence(status_error=True, exception_type="TimeoutError")
    s1 = scorer.score(_record("fetch", {"id": 1}, boom), h)
    s2 = scorer.score(_record("fetch", {"id": 1}, boom), h)
    s3 = scorer.score(_record("fetch", {"id": 2}, boom), h)  # corrected arguments: a new call
    s4 = scorer.score(_record("fetch", {"id": 1}, ErrorEvidence(status_error=True, exception_type="KeyError")), h)
    assert [s.repeated_failure for s in (s1, s2, s3, s4)] == [False, True, False, False]
    assert s2.duplicate is True


def test_calls_whose_raw_arguments_are_too_deep_to_print_are_scored_and_never_the_same() -> None:
    """A run file's arguments can be a JSON value a thousand levels deep (untrusted): ``repr`` of it raises
    RecursionError. Two such failed calls of one tool are scored (the first one's digest is taken at once, for its
    recovery class), neither a duplicate nor a repeated failure of the other: they cannot be compared."""
    deep: object = []
    for _ in range(5000):
        deep = [deep]
    assert arguments_key("t", None, deep) != arguments_key("t", None, deep)  # a key of its own, no exception
    scorer = _policy_scorer()
    h = CallHistory()
    boom = ErrorEvidence(status_error=True, exception_type="TimeoutError")
    scores = [scorer.score(ToolCallRecord(name="fetch", raw_arguments=deep, error=boom), h) for _ in range(3)]
    assert [(s.step, s.duplicate, s.repeated_failure) for s in scores] == [
        (1, False, False),
        (2, False, False),
        (3, False, False),
    ]
    assert h.errors == 3


def test_step_budget() -> None:
    scorer = _policy_scorer(step_budget=2)
    h = CallHistory()
    flags = [scorer.score(_record("t", {"i": i}), h).over_budget for i in range(3)]
    assert flags == [False, False, True]
    assert trace_verdict(h, 2).over_budget is True
    assert trace_verdict(h, 3).over_budget is False
    assert _policy_scorer().score(_record("t", {}), CallHistory()).over_budget is None


def test_must_not_call_fails_the_trace() -> None:
    scorer = _policy_scorer(must_not_call=["drop_db"])
    h = CallHistory()
    scorer.score(_record("read", {}), h)
    s = scorer.score(_record("drop_db", {}), h)
    assert s.violations == ["must_not_call"]
    verdict = trace_verdict(h, None)
    assert verdict.violations == 1 and not verdict.correct and not verdict.composite_ok


def test_required_steps_respect_turns_and_success() -> None:
    scorer = _policy_scorer(required_steps=[{"tool": "auth", "before": ["write"]}])
    # prerequisite in an earlier turn: fine
    h = CallHistory()
    scorer.score(_record("auth", {}), h, batch=1)
    assert scorer.score(_record("write", {}), h, batch=2).violations == []
    # prerequisite in the same parallel batch does not count
    h = CallHistory()
    scorer.score(_record("auth", {}), h, batch=1)
    assert scorer.score(_record("write", {}), h, batch=1).violations == ["missing_required_step:auth"]
    # a failed prerequisite does not count
    h = CallHistory()
    scorer.score(_record("auth", {}, ErrorEvidence(status_error=True)), h, batch=1)
    assert scorer.score(_record("write", {}), h, batch=2).violations == ["missing_required_step:auth"]
    # tools the rule does not name are unaffected
    assert scorer.score(_record("read", {}), CallHistory()).violations == []


def test_destructive_needs_confirmation_and_weighs_by_rank() -> None:
    scorer = _policy_scorer(destructive_tools=[{"tool": "rm", "confirm_with": ["confirm"], "irreversibility": 5}])
    h = CallHistory()
    s = scorer.score(_record("rm", {"path": "/"}), h)
    assert s.violations == ["unconfirmed_destructive"] and s.violation_weight == 5
    h = CallHistory()
    scorer.score(_record("confirm", {}), h, batch=1)
    assert scorer.score(_record("rm", {"path": "/"}), h, batch=2).violations == []


def test_argument_rules_are_json_schema_fragments() -> None:
    scorer = _policy_scorer(
        argument_rules=[{"tool": "delete_records", "name": "unscoped_arguments", "schema": {"required": ["filter"]}}]
    )
    assert scorer.score(_record("delete_records", {}), CallHistory()).violations == ["unscoped_arguments"]
    assert scorer.score(_record("delete_records", {"filter": {"id": 1}}), CallHistory()).violations == []


def test_nested_list_and_dict_arguments_do_not_crash_trajectory() -> None:
    scorer = _policy_scorer(step_budget=5)
    h = CallHistory()
    args = {"filters": [{"k": ["a", {"b": [1, 2]}]}], "m": {"x": [None, True]}}
    scorer.score(_record("q", args), h)
    assert scorer.score(_record("q", args), h).duplicate is True


def test_verdict_of_clean_and_empty_traces() -> None:
    scorer = _policy_scorer(step_budget=3)
    h = CallHistory()
    scorer.score(_record("a", {}), h)
    v = trace_verdict(h, 3)
    assert (v.tool_calls, v.errors, v.correct, v.composite_ok) == (1, 0, True, True)
    empty = trace_verdict(CallHistory(), 3)
    assert empty.tool_calls == 0 and empty.composite_ok


def test_history_memory_is_bounded() -> None:
    config = EvalConfig.from_dict({"limits": {"max_calls_per_trace": 10}})
    scorer = Scorer(config.policy())
    h = CallHistory()
    for i in range(100):
        scorer.score(_record("t", {"i": i}), h)
    assert h.calls == 100 and len(h.seen_calls) == 10


@pytest.mark.skipif(COMPILED, reason="passes a string for every field: a compiled factory checks the types")
def test_the_hot_path_factories_set_every_field_by_name() -> None:
    """``new_call_score``, ``new_tool_call_record``, ``new_trace_verdict`` and ``new_scored_child`` (the hot path's
    constructors) set each slot by name: each field gets its own argument (or the fresh-call default), whatever
    the field order."""
    import inspect
    from dataclasses import fields

    from otel_toolcall_eval.online.call import new_scored_child
    from otel_toolcall_eval.online.trace_state import ScoredChild
    from otel_toolcall_eval.records import (
        CallScore,
        TraceVerdict,
        new_call_score,
        new_tool_call_record,
        new_trace_verdict,
    )

    fresh = {"duplicate": False, "repeated_failure": False, "arguments_key": None, "digest": None}
    for factory, cls, defaults in (
        (new_call_score, CallScore, fresh),
        (new_tool_call_record, ToolCallRecord, {"arguments_unparseable": False}),
        (new_trace_verdict, TraceVerdict, {}),
        (new_scored_child, ScoredChild, {}),
    ):
        params = list(inspect.signature(factory).parameters)
        names = [f.name for f in fields(cls)]
        assert sorted(params + list(defaults)) == sorted(names), factory.__name__
        made = factory(*(f"value of {p}" for p in params))  # a distinct value per parameter
        for name in names:
            want = defaults.get(name, f"value of {name}")
            assert getattr(made, name) == want, (factory.__name__, name)


@pytest.mark.parametrize(
    ("outer_name", "outer_raw", "inner_args", "same"),
    [
        ("get_weather", '{"city": "Oslo"}', {"city": " oslo "}, True),  # normalised arguments match
        ("get_weather", None, {"city": "Oslo"}, True),  # the wrapper recorded no arguments
        ("get_weather", '{"city": "Oslo"}', None, True),  # the scored span recorded none
        ("get_weather", {"city": "Oslo"}, {"city": "Oslo"}, True),  # an object, not text
        ("get_weather", '{"city": "Rome"}', {"city": "Oslo"}, False),
        ("lookup", '{"city": "Oslo"}', {"city": "Oslo"}, False),
        ("get_weather", "{not json", {"city": "Oslo"}, False),
    ],
)
def test_wraps_same_call(outer_name: str, outer_raw: Any, inner_args: Any, same: bool) -> None:

    inner_key = arguments_key("get_weather", inner_args)
    assert wraps_same_call(outer_name, outer_raw, "get_weather", inner_key) is same


# --- undeclared arguments: names the schema does not declare -------------------------------------------

ORDER = {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}


@pytest.mark.parametrize(
    ("schema", "arguments", "undeclared"),
    [
        (ORDER, {"order_id": "1", "include_history": True}, ("include_history",)),  # additionalProperties open
        (ORDER, {"order_id": "1"}, ()),
        ({**ORDER, "additionalProperties": False}, {"order_id": "1", "x": 1}, ("x",)),  # the schema fails it too
        ({**ORDER, "additionalProperties": True}, {"order_id": "1", "x": 1}, ()),  # extra keys explicitly allowed
        ({**ORDER, "additionalProperties": {"type": "integer"}}, {"order_id": "1", "x": 1}, ()),
        ({**ORDER, "patternProperties": {"^x": {}}}, {"order_id": "1", "x": 1}, ()),  # not decided by a regex here
        ({"type": "object"}, {"x": 1}, ()),  # declares no properties at all: nothing to tell
        ({"type": "object", "properties": {}}, {"x": 1}, ("x",)),  # declares that there are none
        ({"allOf": [ORDER]}, {"x": 1}, ()),  # composed schemas declare elsewhere
        (None, {"x": 1}, ()),
    ],
)
def test_undeclared_arguments(schema: Any, arguments: dict[str, Any], undeclared: tuple[str, ...]) -> None:
    from otel_toolcall_eval.checks.undeclared import undeclared_arguments

    assert undeclared_arguments(arguments, schema) == undeclared


def test_undeclared_arguments_are_bounded() -> None:
    from otel_toolcall_eval.checks.undeclared import MAX_REPORTED, undeclared_arguments

    many = {f"k{i}": i for i in range(10_000)}
    assert len(undeclared_arguments(many, {"type": "object", "properties": {}})) == MAX_REPORTED


def _order_scorer(**policies: object) -> Scorer:
    config = {"tools": [{"name": "get_order", "parameters": ORDER}], "policies": policies}
    return Scorer(EvalConfig.from_dict(config).policy())


def test_an_undeclared_argument_is_reported_and_by_default_does_not_fail_the_call() -> None:
    score = _order_scorer().score(_record("get_order", {"order_id": "1", "verbose": True}), CallHistory())
    assert score.undeclared_arguments == ("verbose",) and score.schema_valid is True
    assert score.correct and not score.violations


def test_undeclared_arguments_fail_the_call_when_configured() -> None:
    scorer = _order_scorer(undeclared_arguments="fail")
    score = scorer.score(_record("get_order", {"order_id": "1", "verbose": True}), CallHistory())
    assert score.violations == ["undeclared_argument"] and score.violation_weight == 1 and not score.correct
    clean = scorer.score(_record("get_order", {"order_id": "1"}), CallHistory())
    assert clean.correct and clean.undeclared_arguments == ()


def test_undeclared_arguments_setting_is_validated_naming_the_field() -> None:
    from otel_toolcall_eval.config import ConfigError

    with pytest.raises(ConfigError, match="undeclared_arguments"):
        EvalConfig.from_dict({"policies": {"undeclared_arguments": "maybe"}})


_CORRECTNESS_CONFIG = EvalConfig.from_dict(
    {
        "policies": {"must_not_call": ["drop"], "undeclared_arguments": "fail"},
        "tools": [{"name": "lookup", "parameters": {"type": "object", "properties": {"id": {"type": "integer"}}}}],
    }
)


@settings(max_examples=200, deadline=None)
@given(
    calls=st.lists(
        st.tuples(
            st.sampled_from(["get_weather", "lookup", "ghost", "drop"]),
            st.sampled_from(['{"city": "Oslo"}', '{"city": 3}', '{"id": 2}', '{"id": 2, "x": 1}', "{bad", None]),
            st.sampled_from([None, "status", "exception", "unknown_reply"]),
        ),
        max_size=8,
    )
)
def test_the_engine_tracks_correctness_exactly_as_call_score_correct_says(
    calls: list[tuple[str, str | None, str | None]],
) -> None:
    """``Scorer.score`` passes ``correct`` to ``CallHistory.add`` from the parts it has; it must equal the property
    (parse, unknown tool, schema, input rejection, violations, duplicates, repeated failures)."""
    scorer = Scorer(_CORRECTNESS_CONFIG.policy())
    history = CallHistory()
    made = []
    for name, raw, failure in calls:
        error = {
            None: NO_ERROR,
            "status": ErrorEvidence(status_error=True, status_description="Validation failed for input parameters"),
            "exception": ErrorEvidence(exception_type="TimeoutError", exception_message="slow"),
            "unknown_reply": NO_ERROR,
        }[failure]
        unknown_reply = failure == "unknown_reply"
        record = ToolCallRecord(
            name=name,
            raw_arguments=raw,
            result="Unknown tool: x" if unknown_reply else None,
            result_recorded=unknown_reply,
            error=error,
        )
        made.append(scorer.score(record, history, trace_tools={"get_weather": WEATHER}))
    assert history.all_correct == all(s.correct for s in made)
    assert history.errors == sum(s.outcome is not Outcome.SUCCESS for s in made)


def test_a_span_without_a_failure_shares_the_no_error_evidence() -> None:
    """``error_evidence`` returns ``NO_ERROR`` (the engine's identity fast path) only when nothing was recorded."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace import Status, StatusCode

    from otel_toolcall_eval.conventions import error_evidence

    tracer = TracerProvider().get_tracer("t")
    with tracer.start_as_current_span("ok") as ok:
        pass
    with tracer.start_as_current_span("failed") as failed:
        failed.set_status(Status(StatusCode.ERROR, "boom"))
    assert error_evidence(ok, {}) is NO_ERROR  # type: ignore[arg-type]
    evidence = error_evidence(failed, {})  # type: ignore[arg-type]
    assert evidence is not NO_ERROR and evidence.status_error and evidence.status_description == "boom"
    assert error_evidence(ok, {"error.type": "timeout"}).error_type == "timeout"  # type: ignore[arg-type]


def test_the_tuple_built_records_equal_their_public_constructors() -> None:
    """``ModelUsage`` and ``CallStep`` are built with ``tuple.__new__`` on the hot path, the invalid
    ``SchemaVerdict`` with ``object.__setattr__``: each equals (and hashes as) what its own constructor builds."""
    from otel_toolcall_eval.checks.cost import ModelUsage, model_usage
    from otel_toolcall_eval.checks.schema import SchemaVerdict, compile_schema, validate_with

    usage = model_usage({"gen_ai.operation.name": "chat", "gen_ai.request.model": "m", "gen_ai.usage.input_tokens": 3})
    assert type(usage) is ModelUsage and usage == ModelUsage("m", 3, None) and usage.model == "m"
    verdict = validate_with(compile_schema({"type": "object", "required": ["a"]}), {})
    assert type(verdict) is SchemaVerdict and not verdict.valid and len(verdict.errors) == 1
    assert verdict == SchemaVerdict(False, verdict.errors) and hash(verdict) == hash(
        SchemaVerdict(False, verdict.errors)
    )
    with pytest.raises(AttributeError):  # still frozen
        verdict.valid = True  # type: ignore[misc]


def test_the_per_trace_factories_build_what_the_dataclasses_build() -> None:
    """``new_call_history``, ``new_trace_state``, ``new_trace_stats`` and ``new_trace_cost`` set every field to the
    dataclass's own default (a field added to the dataclass and not to its factory fails here)."""
    from dataclasses import fields

    from otel_toolcall_eval.checks.cost import TraceCost, new_trace_cost
    from otel_toolcall_eval.engine.tally import TraceStats, new_trace_stats
    from otel_toolcall_eval.online.trace_state import TraceState, new_trace_state
    from otel_toolcall_eval.records import CallHistory, new_call_history

    for made, want in (
        (new_call_history(), CallHistory()),
        (new_trace_state(12.5), TraceState(last_seen=12.5)),
        (new_trace_stats(), TraceStats()),
        (new_trace_cost(), TraceCost()),
    ):
        for f in fields(want):
            got, expected = getattr(made, f.name), getattr(want, f.name)
            if f.name == "lock":  # a lock of its own, not a shared one
                assert type(got) is type(expected) and got is not expected
            elif f.name == "history":
                assert got == expected and got is not expected
            else:
                assert got == expected and type(got) is type(expected), (type(want).__name__, f.name)
    a, b = new_trace_state(0.0), new_trace_state(0.0)
    assert a.history is not b.history and a.lock is not b.lock  # nothing mutable shared
