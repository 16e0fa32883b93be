"""The offline metric functions: the issue's worked examples, each normalisation, and their properties."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from otel_toolcall_eval.checks.argument_match import (
    ABSENT,
    Normalizer,
    canonical_datetime,
    match_arguments,
)
from otel_toolcall_eval.checks.necessity import made_unnecessary_call, missed_all_calls, rate, unnecessary_calls
from otel_toolcall_eval.checks.order import arrange_batches, order_score
from otel_toolcall_eval.checks.selection import NONE, confusion_label, counts, per_tool_correct, selection
from otel_toolcall_eval.config import ConfigError, EvalConfig
from otel_toolcall_eval.offline.prepare import Preparer
from otel_toolcall_eval.offline.score import score_case
from tests.helpers import ORDER_TOOLS, dataset_case, score_run_calls

NORM = Normalizer()
NAMES = st.lists(st.sampled_from(["search", "book", "notify", "cancel", "calendar"]), max_size=7)


# --- worked examples ---------------------------------------------------------------------------------------


def test_extra_argument_is_ignored_against_the_expected_keys() -> None:
    verdict = match_arguments({"order_id": "12345"}, {"order_id": "12345", "include_history": False}, NORM)
    assert verdict.ok and verdict.mismatched == ()


def test_calendar_needed_with_reminder_but_only_calendar_fired() -> None:
    s = selection(["calendar", "reminder"], ["calendar"])
    assert (s.precision, s.recall) == (1.0, 0.5)
    assert s.f1 == pytest.approx(2 / 3)


def test_retry_loop_scores_worse_on_order_than_a_clean_run_while_sets_match() -> None:
    expected = ["search", "book"]
    clean = ["search", "book"]
    retry = ["search", "book", "book", "book"]  # the same failing call, retried
    assert set(clean) == set(retry)  # set comparison cannot tell them apart
    assert order_score(expected, retry).score < order_score(expected, clean).score == 1.0
    assert order_score(expected, retry).edit_distance > order_score(expected, clean).edit_distance == 0.0
    assert selection(expected, retry).precision < selection(expected, clean).precision  # multisets can


# --- selection --------------------------------------------------------------------------------------------


def test_selection_counts_repeated_calls_twice() -> None:
    s = selection(["search", "search"], ["search"])
    assert (s.tp, s.precision, s.recall) == (1, 1.0, 0.5)
    s = selection(["search"], ["search", "search"])
    assert (s.tp, s.precision, s.recall) == (1, 0.5, 1.0)


def test_selection_edge_cases() -> None:
    both_empty = selection([], [])
    assert (both_empty.precision, both_empty.recall, both_empty.f1) == (1.0, 1.0, 1.0)
    nothing_called = selection(["search"], [])  # a call was needed and none was made: nothing to credit
    assert (nothing_called.precision, nothing_called.recall, nothing_called.f1) == (0.0, 0.0, 0.0)
    unnecessary = selection([], ["search"])  # no call was missed, one was wrong
    assert (unnecessary.precision, unnecessary.recall, unnecessary.f1) == (0.0, 1.0, 0.0)


def test_per_tool_correct_and_confusion_labels() -> None:
    assert per_tool_correct(counts(["a", "a", "b"]), counts(["a", "c"])) == {"a": 1, "b": 0}
    assert confusion_label(["a"], ["b", "a"]) == ("a", "a")  # the expected tool was among the calls
    assert confusion_label(["a"], ["b", "c"]) == ("a", "b")
    assert confusion_label(["a"], []) == ("a", NONE)
    assert confusion_label([], ["b"]) == (NONE, "b")
    assert confusion_label(["a", "b"], ["a"]) is None


@given(NAMES, NAMES)
def test_selection_bounds_and_symmetry(expected: list[str], actual: list[str]) -> None:
    s, swapped = selection(expected, actual), selection(actual, expected)
    for value in (s.precision, s.recall, s.f1):
        assert 0.0 <= value <= 1.0
    assert s.f1 == pytest.approx(swapped.f1)
    if expected and actual:  # an empty side is not symmetric: nothing called where calls were needed is 0, 0
        assert (s.precision, s.recall) == (swapped.recall, swapped.precision)
    harmonic = 2 * s.precision * s.recall / (s.precision + s.recall) if s.precision + s.recall else 0.0
    assert s.f1 == pytest.approx(harmonic)
    assert (s.f1 == 1.0) == (sorted(expected) == sorted(actual))


@given(NAMES, NAMES, st.sampled_from(["search", "book", "ghost"]))
def test_selection_monotonicity(expected: list[str], actual: list[str], name: str) -> None:
    before = selection(expected, actual)
    if counts(expected).get(name, 0) > counts(actual).get(name, 0):  # a still-missing expected call
        after = selection(expected, [*actual, name])
        assert after.recall > before.recall and after.tp == before.tp + 1
    else:  # a call nothing expects (any more)
        after = selection(expected, [*actual, name])
        assert after.precision <= before.precision and after.recall == before.recall


# --- argument match ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expected", "actual"),
    [
        ("Paris", "  paris "),
        ("2025-03-05", "March 5, 2025"),
        ("2025-03-05", "5 Mar 2025"),
        ("2025-03-05T15:00:00", "2025-03-05 15:00"),
        ("2025-03-05T15:00:00Z", "2025-03-05T16:00:00+01:00"),
        ("2025-03-05T15:00:00", "March 5, 2025 3:00 PM"),
        (12345, "12345"),
        ("3.50", 3.5),
        (None, ABSENT),
        ({"city": "Paris", "days": 3}, {"days": "3", "city": "PARIS", "units": "metric"}),
        (["a", "b"], ["A", " b"]),
    ],
)
def test_values_equal_after_normalisation(expected: Any, actual: Any) -> None:
    assert NORM.equal(expected, actual)
    assert NORM.equal(actual, expected) or isinstance(expected, dict)  # objects ignore extra actual keys


@pytest.mark.parametrize(
    ("expected", "actual"),
    [
        ("Paris", "Lyon"),
        ("007", "7"),  # two strings stay strings
        (True, 1),  # a boolean is never a number
        (2, 2.0),  # no schema says number here (tests/checks/test_json_equality.py)
        ("true", True),
        ("2025-03-05", "2025-03-05T00:00:00"),  # a date is not a date-time
        ("2025-03-05T15:00:00", "2025-03-05T15:00:00Z"),  # naive against aware
        ("", ABSENT),  # by default an empty string is a value
        (["a", "b"], ["b", "a"]),  # arrays keep their order
        ([1], [1, 2]),
        (None, "x"),
    ],
)
def test_values_differ(expected: Any, actual: Any) -> None:
    assert not NORM.equal(expected, actual)


def test_configured_normalisation_options() -> None:
    config = EvalConfig.from_dict(
        {
            "arguments": {
                "id_prefixes": ["ORD-", "#"],
                "case_insensitive": False,
                "null_equals_absent": False,
                "empty_string_equals_absent": True,
                "numeric_strings": False,
                "dates": False,
            }
        }
    )
    norm = config.arguments.normalizer()
    assert norm.equal("12345", "ORD-12345") and norm.equal("#12345", "12345")
    assert not norm.equal("ORD-", "")  # a bare prefix is not stripped to nothing
    assert not norm.equal("Paris", "paris")
    assert not norm.equal(None, ABSENT) and norm.equal("", ABSENT)
    assert not norm.equal(12345, "12345")
    assert not norm.equal("2025-03-05", "March 5, 2025")


def test_strict_expected_call_rejects_extra_arguments() -> None:
    verdict = match_arguments({"city": "Paris"}, {"city": "Paris", "days": 3}, NORM, required_only=False)
    assert verdict.failed == "required" and verdict.mismatched == ("+days",)
    assert match_arguments({"city": "Paris"}, {"city": "Paris", "days": None}, NORM, required_only=False).ok


def test_layers_short_circuit_in_order() -> None:
    assert match_arguments({"a": 1}, None, NORM, parse_ok=False).failed == "parse"
    assert match_arguments({"a": 1}, {"a": 2}, NORM, schema_valid=False).failed == "schema"
    assert match_arguments({"a": 1}, {"a": 2}, NORM).mismatched == ("a",)
    missing = match_arguments({"a": 1}, None, NORM, parse_ok=None)  # nothing recorded: the key is absent
    assert missing.failed == "required"


def test_free_text_fields_compare_by_similarity() -> None:
    expected = {"to": "sam@example.com", "body": "Running ten minutes late, sorry!"}
    close = {"to": "sam@example.com", "body": "Sorry, running 10 minutes late"}
    far = {"to": "sam@example.com", "body": "Meeting cancelled"}
    ok = match_arguments(expected, close, NORM, free_text={"body"}, threshold=0.6)
    assert ok.ok and ok.similarity is not None and 0.6 <= ok.similarity < 1.0
    bad = match_arguments(expected, far, NORM, free_text={"body"}, threshold=0.6)
    assert bad.failed == "free_text" and bad.mismatched == ("body",)
    wrong_to = match_arguments(expected, {**close, "to": "kim@example.com"}, NORM, free_text={"body"})
    assert wrong_to.failed == "required"  # the strict keys are checked before the free text


class WordOverlap:
    """A stand-in for an embedding model: Jaccard overlap of lower-cased words."""

    def similarity(self, expected: str, actual: str) -> float:
        a, b = set(expected.lower().split()), set(actual.lower().split())
        return len(a & b) / len(a | b) if a | b else 1.0


def make_word_overlap() -> WordOverlap:
    return WordOverlap()


def test_embedding_similarity_is_pluggable_from_the_config() -> None:
    config = EvalConfig.from_dict(
        {
            "arguments": {
                "free_text": {"send_email": ["body"]},
                "similarity": {"embedding": "tests.offline.test_metrics:make_word_overlap", "threshold": 0.5},
            }
        }
    )
    prep = Preparer(config)
    assert isinstance(prep.similarity, WordOverlap)
    case = dataset_case([{"name": "send_email", "args": {"body": "lunch is at noon"}}])
    # rapidfuzz would accept this reordering; word overlap (1/7) does not
    result = score_run_calls(case, [{"name": "send_email", "arguments": {"body": "noon at lunch? no, never is"}}], prep)
    assert not result.passed and result.free_text_similarity == pytest.approx(3 / 7)
    with pytest.raises(ConfigError, match="embedding"):
        from otel_toolcall_eval.offline.runner import evaluate

        evaluate("missing.jsonl", [], EvalConfig.from_dict({"arguments": {"similarity": {"embedding": "nope:f"}}}))


def test_canonical_datetimes() -> None:
    assert canonical_datetime("2025-03-05") == "d:2025-03-05"
    assert canonical_datetime("2025-03-05T15:00:00Z") == canonical_datetime("2025-03-05T10:00:00-05:00")
    assert canonical_datetime("not a date at all") is None
    assert canonical_datetime("12") is None


JSON_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**6), 10**6),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.text(max_size=12),
    st.sampled_from(["2025-03-05", "March 5, 2025", "  PARIS ", "paris", "12", "12.0", "ORD-12"]),
)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=8,
)


@given(JSON_VALUES)
def test_equality_is_reflexive(value: Any) -> None:
    assert NORM.equal(value, value)
    assert match_arguments({"k": value}, {"k": value}, NORM).ok


@given(JSON_SCALARS, JSON_SCALARS)
def test_scalar_equality_is_symmetric(a: Any, b: Any) -> None:
    assert NORM.equal(a, b) == NORM.equal(b, a)


@given(st.dictionaries(st.text(max_size=4), JSON_SCALARS, max_size=4), st.text(max_size=4), JSON_SCALARS)
def test_extra_actual_keys_never_break_a_match(expected: dict[str, Any], key: str, extra: Any) -> None:
    actual = dict(expected)
    if key not in expected:
        actual[key] = extra
    assert match_arguments(expected, actual, NORM).ok


# --- order ------------------------------------------------------------------------------------------------


def test_order_scores_are_graded() -> None:
    expected = ["a", "b", "c"]
    assert order_score(expected, ["a", "x", "b", "c"]).score == pytest.approx(6 / 7)  # one insertion
    assert order_score(expected, ["a", "c"]).score == pytest.approx(4 / 5)  # one skip
    swapped = order_score(expected, ["b", "a", "c"])
    assert swapped.score == pytest.approx(4 / 6) and swapped.edit_distance == pytest.approx(2 / 3)
    assert order_score(expected, []).score == 0.0 and order_score([], []).exact


def test_parallel_batch_is_compared_as_a_set() -> None:
    expected = ["auth", "calendar", "reminder", "send"]
    actual = ["auth", "reminder", "calendar", "send"]
    assert not order_score(expected, actual).exact
    assert order_score(expected, actual, None, [1, 2, 2, 3]).exact  # the model issued the two together
    assert order_score(expected, actual, [1, 2, 2, 3], None).exact  # the dataset allows either order
    assert arrange_batches(["b", "a", "x"], [1, 1, 1], ["a", "b"]) == ["a", "b", "x"]
    # a batch never excuses calls outside it
    assert not order_score(["a", "b", "c"], ["c", "b", "a"], None, [1, 1, 2]).exact


@given(NAMES, NAMES)
def test_order_bounds_and_symmetry(expected: list[str], actual: list[str]) -> None:
    s, swapped = order_score(expected, actual), order_score(actual, expected)
    assert 0.0 <= s.score <= 1.0 and 0.0 <= s.edit_distance <= 1.0
    assert s.score == pytest.approx(swapped.score) and s.edit_distance == pytest.approx(swapped.edit_distance)
    assert s.exact == (expected == actual) == (s.score == 1.0)
    assert s.score <= selection(expected, actual).f1 + 1e-12  # order can only cost, never add


@given(NAMES.filter(bool), NAMES)
def test_order_appending_an_unexpected_call_lowers_the_score(expected: list[str], actual: list[str]) -> None:
    # (the normalised edit distance is not monotone here: dividing by the longer length can shrink it)
    before, after = order_score(expected, actual), order_score(expected, [*actual, "ghost"])
    assert after.score <= before.score
    if before.score > 0:
        assert after.score < before.score


# --- necessity --------------------------------------------------------------------------------------------


def test_necessity_pair() -> None:
    assert unnecessary_calls(actual=3, true_positives=2) == 1
    assert made_unnecessary_call(True, 1) and not made_unnecessary_call(False, 1)
    assert missed_all_calls(False, 0) and not missed_all_calls(True, 0)
    assert rate(0, 0) is None and rate(1, 4) == 0.25


# --- one case, all metrics (the offline scorer over the same records as online) ---------------------------


def test_case_with_the_worked_argument_example_passes() -> None:
    case = dataset_case([{"name": "get_order", "args": {"order_id": "12345"}}], available_tools=ORDER_TOOLS)
    result = score_run_calls(case, [{"name": "get_order", "arguments": '{"order_id":"12345","include_history":false}'}])
    assert result.passed and result.required_args_match and result.schema_valid
    assert (result.precision, result.recall, result.f1) == (1.0, 1.0, 1.0)


def test_parse_failure_is_scored_apart_from_selection() -> None:
    case = dataset_case([{"name": "get_order", "args": {"order_id": "12345"}}], available_tools=ORDER_TOOLS)
    result = score_run_calls(case, [{"name": "get_order", "arguments": '{"order_id": "123'}])
    assert result.parse_failures == 1 and result.f1 == 1.0  # the right tool, arguments broken
    assert not result.passed and result.argument_accuracy == 0.0 and result.required_args_match is None
    assert result.reasons == ["get_order arguments did not parse"]


def test_schema_failure_short_circuits_the_value_check() -> None:
    case = dataset_case([{"name": "get_order", "args": {"order_id": "12345"}}], available_tools=ORDER_TOOLS)
    result = score_run_calls(case, [{"name": "get_order", "arguments": {"order_id": 12345}}])
    assert result.schema_valid is False and result.required_args_match is None
    assert "fail the schema" in result.reasons[0] and "/order_id" in result.reasons[0]


def test_must_not_call_fails_the_case_whatever_else() -> None:
    case = dataset_case([{"name": "get_order"}], available_tools=ORDER_TOOLS, must_not_call=["delete_all"])
    result = score_run_calls(case, [{"name": "get_order", "arguments": {}}, {"name": "delete_all", "arguments": {}}])
    assert not result.passed and result.must_not_call_violations == ["delete_all"]
    assert EvalConfig.from_dict({"policies": {"must_not_call": ["get_order"]}}).policies.must_not_call
    prep = Preparer(EvalConfig.from_dict({"policies": {"must_not_call": ["delete_all"]}}))
    global_rule = score_run_calls(
        dataset_case([{"name": "get_order"}]), [{"name": "delete_all", "arguments": {}}], prep
    )
    assert global_rule.must_not_call_violations == ["delete_all"]  # the config's list applies to every case


def test_acceptable_alternative_passes_and_is_named() -> None:
    case = dataset_case(
        [{"name": "search_web", "args": {"q": "weather paris"}}],
        acceptable_alternatives=[[{"name": "get_weather", "args": {"city": "Paris"}}]],
    )
    result = score_run_calls(case, [{"name": "get_weather", "arguments": {"city": "paris"}}])
    assert result.passed and result.reference == 1 and result.expected == ("get_weather",)


def test_order_counts_for_passing_only_in_the_ordered_slice() -> None:
    calls = [{"name": "update_event", "arguments": {}}, {"name": "list_events", "arguments": {}}]
    expected = [{"name": "list_events"}, {"name": "update_event"}]
    unordered = score_run_calls(dataset_case(expected), calls)
    ordered = score_run_calls(dataset_case(expected, slice="ordered-dependency"), calls)
    assert unordered.passed and unordered.order is not None and not unordered.order.exact
    assert not ordered.passed and ordered.reasons[0].startswith("order:")


def test_unknown_tools_duplicates_and_run_metadata() -> None:
    case = dataset_case([{"name": "get_order", "args": {"order_id": "1"}}], available_tools=ORDER_TOOLS)
    calls = [
        {"name": "get_order", "arguments": {"order_id": "1"}},
        {"name": "get_order", "arguments": {"order_id": " 1 "}},  # the same call after normalisation
        {"name": "lookup_order", "arguments": {}},
    ]
    result = score_run_calls(case, calls, latency_ms=120, tokens={"input": 10, "output": 5}, error="timeout")
    assert result.unknown_tools == 1 and result.duplicate_calls == 1 and result.unnecessary_calls == 2
    assert (result.latency_ms, result.tokens, result.error) == (120.0, 15.0, "timeout")
    assert not result.passed and result.reasons[0] == "run error: timeout"


def test_missing_run_line_fails_the_case() -> None:
    prep = Preparer(EvalConfig())
    result = score_case(prep.prepare(dataset_case([{"name": "a"}]), 1), None, prep)
    assert result.missing_run and not result.passed and result.recall == 0.0 and result.f1 == 0.0
    assert result.precision == 0.0


def test_a_case_that_expected_calls_and_got_none_has_precision_zero_in_the_case_and_the_summary() -> None:
    from otel_toolcall_eval.offline.aggregate import Totals

    silent = score_run_calls(dataset_case([{"name": "search"}, {"name": "book"}]), [])
    assert (silent.precision, silent.recall, silent.f1) == (0.0, 0.0, 0.0)
    totals = Totals()
    totals.add(silent)
    assert totals.summary()["tool_selection"]["precision"] == 0.0  # no call anywhere: nothing was right
    totals.add(score_run_calls(dataset_case([{"name": "search"}]), [{"name": "search", "arguments": {}}]))
    # micro-averaged over the calls made: a case without calls adds none, so precision stays that of the calls
    assert totals.summary()["tool_selection"]["precision"] == 1.0
    assert totals.summary()["tool_selection"]["mean_case_f1"] == 0.5


def test_no_tool_case_passes_only_without_calls() -> None:
    assert score_run_calls(dataset_case([]), []).passed
    chatty = score_run_calls(dataset_case([]), [{"name": "search", "arguments": {}}])
    assert not chatty.passed and chatty.unnecessary_calls == 1 and chatty.order is None


@settings(max_examples=60)
@given(NAMES.filter(bool), NAMES)
def test_case_metrics_agree_with_the_metric_functions(expected: list[str], actual: list[str]) -> None:
    result = score_run_calls(
        dataset_case([{"name": n} for n in expected]), [{"name": n, "arguments": {}} for n in actual]
    )
    s = selection(expected, actual)
    assert (result.precision, result.recall, result.f1) == (s.precision, s.recall, s.f1)
    assert result.order is not None and result.order.score == order_score(expected, actual).score
    assert result.passed == (sorted(expected) == sorted(actual))


# --- pairing: an optimal assignment, so the order of the calls never changes the verdict ------------------

WEATHER = [
    {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "unit": {"type": "string"}},
            "required": ["city"],
        },
    }
]


@pytest.mark.parametrize("reverse", [False, True])
def test_an_unconstrained_optional_key_does_not_take_the_call_another_expected_call_needed(reverse: bool) -> None:
    # BFCL parallel_136 in miniature: the first expected call leaves `unit` open, the second needs celsius
    expected = [
        {"name": "get_weather", "args": {"city": "Paris"}, "batch": 1},
        {"name": "get_weather", "args": {"city": "Paris", "unit": "celsius"}, "batch": 1},
    ]
    calls = [
        {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}, "batch": 1},
        {"name": "get_weather", "arguments": {"city": "Paris", "unit": "kelvin"}, "batch": 1},
    ]
    result = score_run_calls(dataset_case(expected, available_tools=WEATHER), calls[::-1] if reverse else calls)
    assert result.passed and result.args_correct == 2 == result.pairs
    assert sorted(j for _, _, j in result.pair_verdicts) == [0, 1]  # each call answers one expected call


def test_pairing_prefers_the_closest_call_when_none_passes() -> None:
    expected = [{"name": "get_weather", "args": {"city": "Rome", "unit": "celsius"}}]
    calls = [
        {"name": "get_weather", "arguments": {"city": "Oslo", "unit": "kelvin"}},
        {"name": "get_weather", "arguments": {"city": "Rome", "unit": "kelvin"}},
    ]
    result = score_run_calls(dataset_case(expected, available_tools=WEATHER), calls)
    assert not result.passed and result.reasons[-1] == "get_weather arguments differ: unit"


@settings(max_examples=60)
@given(st.permutations([("Paris", None), ("Paris", "celsius"), ("Rome", None), ("Rome", "kelvin")]), st.data())
def test_the_verdict_does_not_depend_on_the_order_of_the_calls(specs: list[tuple[str, str | None]], data: Any) -> None:
    def args(city: str, unit: str | None) -> dict[str, str]:
        return {"city": city} if unit is None else {"city": city, "unit": unit}

    expected = [{"name": "get_weather", "args": args(c, u)} for c, u in specs]
    made = [{"name": "get_weather", "arguments": args(c, u or "celsius")} for c, u in specs]
    first = score_run_calls(dataset_case(expected, available_tools=WEATHER), made)
    shuffled = score_run_calls(dataset_case(expected, available_tools=WEATHER), data.draw(st.permutations(made)))
    assert first.passed and shuffled.passed
    assert (shuffled.args_correct, shuffled.pairs) == (first.args_correct, first.pairs) == (4, 4)


def test_when_no_pairing_passes_the_assignment_keeps_each_call_with_its_closest_expected_call() -> None:
    expected = [
        {"name": "get_weather", "args": {"city": "Rome", "unit": "celsius", "days": 3}},
        {"name": "get_weather", "args": {"city": "Oslo", "unit": "kelvin", "days": 5}},
    ]
    calls = [
        {"name": "get_weather", "arguments": {"city": "Oslo", "unit": "celsius", "days": 5}},
        {"name": "get_weather", "arguments": {"city": "Rome", "unit": "kelvin", "days": 3}},
    ]
    result = score_run_calls(dataset_case(expected, available_tools=WEATHER), calls)
    assert [j for _, _, j in result.pair_verdicts] == [1, 0]  # first-fit would pair Rome with Oslo
    assert result.reasons == ["get_weather arguments differ: unit"] * 2


# --- case folding stops where the schema tells two members apart ------------------------------------------

SIZES = [
    {
        "name": "set_size",
        "parameters": {
            "type": "object",
            "properties": {
                "size": {"type": "string", "enum": ["AA", "aa", "B"]},
                "sizes": {"type": "array", "items": {"enum": ["XL", "xl"]}},
                "note": {"type": "string"},
            },
        },
    }
]


@pytest.mark.parametrize(
    ("expected", "made", "passed"),
    [
        ({"size": "AA"}, {"size": "aa"}, False),  # two declared members: a different value
        ({"size": "aa"}, {"size": "aa"}, True),
        ({"sizes": ["XL"]}, {"sizes": ["xl"]}, False),  # members of an array's items
        ({"note": "Hello"}, {"note": " hello"}, True),  # no such members: case and whitespace fold
    ],
)
def test_case_folds_only_where_the_schema_does_not_declare_both_spellings(
    expected: dict[str, Any], made: dict[str, Any], passed: bool
) -> None:
    case = dataset_case([{"name": "set_size", "args": expected}], available_tools=SIZES)
    result = score_run_calls(case, [{"name": "set_size", "arguments": made}])
    assert result.passed is passed, result.reasons
    config = EvalConfig.from_dict({"tools": [{**SIZES[0]}]})  # the config's schema counts too
    from_config = score_run_calls(
        dataset_case([{"name": "set_size", "args": expected}]),
        [{"name": "set_size", "arguments": made}],
        Preparer(config),
    )
    assert from_config.passed is passed


# --- undeclared arguments offline: counted always, failing with policies.undeclared_arguments: fail --------


def test_undeclared_arguments_are_counted_and_fail_the_case_only_when_configured() -> None:
    case = dataset_case([{"name": "get_order", "args": {"order_id": "1"}}], available_tools=ORDER_TOOLS)
    calls = [{"name": "get_order", "arguments": {"order_id": "1", "include_history": True}}]
    reported = score_run_calls(case, calls)
    assert reported.passed and reported.undeclared_arguments == 1
    prep = Preparer(EvalConfig.from_dict({"policies": {"undeclared_arguments": "fail"}}))
    failed = score_run_calls(case, calls, prep)
    assert not failed.passed and failed.undeclared_arguments == 1
    assert failed.reasons == ["policy: undeclared_argument (get_order, call 1)"]
    assert score_run_calls(case, [{"name": "get_order", "arguments": {"order_id": "1"}}], prep).passed


# --- per-argument alternatives and optional arguments in the expected call --------------------------------

UNIT_TOOLS = [
    {
        "name": "convert",
        "parameters": {
            "type": "object",
            "properties": {"amount": {"type": "number"}, "unit": {"type": "string"}, "round": {"type": "boolean"}},
        },
    }
]


@pytest.mark.parametrize(
    ("made", "passed"),
    [
        ({"amount": 5, "unit": "kg"}, True),
        ({"amount": 5, "unit": " LB "}, True),  # one of the values, after normalisation
        ({"amount": 5}, True),  # optional: may be absent
        ({"amount": 5, "unit": "oz"}, False),
        ({"unit": "kg"}, False),  # amount is not optional
        ({"amount": 5, "unit": "kg", "round": True}, False),  # strict: round is not expected
    ],
)
def test_per_argument_alternatives_with_an_optional_marker(made: dict[str, Any], passed: bool) -> None:
    expected = {
        "name": "convert",
        "args": {"amount": 5},
        "arg_options": {"unit": ["kg", "lb"]},
        "optional_args": ["unit"],
        "required_args_only": False,
    }
    result = score_run_calls(
        dataset_case([expected], available_tools=UNIT_TOOLS), [{"name": "convert", "arguments": made}]
    )
    assert result.passed is passed, result.reasons


def test_a_missing_required_option_is_named_in_the_reasons() -> None:
    expected = {"name": "convert", "args": {"amount": 5}, "arg_options": {"unit": ["kg", "lb"]}}
    result = score_run_calls(
        dataset_case([expected], available_tools=UNIT_TOOLS), [{"name": "convert", "arguments": {"amount": 6}}]
    )
    assert result.reasons == ["convert arguments differ: unit, amount"]


@pytest.mark.parametrize(
    ("made", "passed"),
    [
        ({"items": "myItemList", "unit": "KG"}, True),  # unit is still folded, items is not
        ({"items": "MyItemList", "unit": "kg"}, False),  # identifiers are case-sensitive
        ({"items": " myItemList", "unit": "kg"}, False),
        ({"items": "myItemList"}, True),  # optional and exact: absent is fine
        ({"items": "otherList", "unit": "kg"}, True),  # one of the alternatives, exactly
        ({"items": "OTHERLIST", "unit": "kg"}, False),
    ],
)
def test_exact_args_are_compared_without_normalisation(made: dict[str, Any], passed: bool) -> None:
    tools = [{"name": "sort", "parameters": {"type": "object", "properties": {"items": {}, "unit": {}}}}]
    expected = {
        "name": "sort",
        "args": {"unit": "kg"},
        "arg_options": {"items": ["myItemList", "otherList"]},
        "optional_args": ["items", "unit"],
        "exact_args": ["items"],
    }
    result = score_run_calls(dataset_case([expected], available_tools=tools), [{"name": "sort", "arguments": made}])
    assert result.passed is passed, result.reasons
    plain = {"name": "sort", "args": {"items": "myItemList"}, "exact_args": ["items"]}
    result = score_run_calls(
        dataset_case([plain], available_tools=tools), [{"name": "sort", "arguments": {"items": "MYITEMLIST"}}]
    )
    assert not result.passed and result.reasons == ["sort arguments differ: items"]


def test_an_exact_argument_is_never_compared_as_free_text() -> None:
    prep = Preparer(EvalConfig.model_validate({"arguments": {"free_text": {"sort": ["items"]}}}))
    plain = {"name": "sort", "args": {"items": "myItemList"}}
    close = [{"name": "sort", "arguments": {"items": "myItemLists"}}]
    assert score_run_calls(dataset_case([plain]), close, prep).passed  # similar enough as free text
    assert not score_run_calls(dataset_case([{**plain, "exact_args": ["items"]}]), close, prep).passed


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("x", "x", True),
        ("x", "X", False),
        (5, 5.0, False),  # only where the schema says number (tests/checks/test_json_equality.py)
        (True, 1, False),
        ([True], [1], False),
        ({"a": [1, "b"]}, {"a": [1, "b"]}, True),
        ({"a": 1}, {"a": 1, "b": 2}, False),
        ("5", 5, False),
        (None, None, True),
    ],
)
def test_exact_equality_is_json_equality(a: Any, b: Any, same: bool) -> None:
    assert Normalizer().exact_equal(a, b) is same
    assert Normalizer().exact_equal(b, a) is same
