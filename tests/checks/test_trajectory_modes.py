"""Trajectory match modes (checks.trajectory) against LangSmith agentevals' own documented examples.

Each example below is one of agentevals' (langchain-ai/agentevals: the README's strict, unordered, superset and
override examples, and python/tests/test_trajectory.py), rewritten from its OpenAI message lists into our
dataset row and run line: an assistant message's tool calls are one turn (a ``batch``). Its verdicts are the
expected values. They run end to end through the offline scorer (``score_case``), with argument normalisation
off (agentevals compares values with ``==``) unless the example says otherwise.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from otel_toolcall_eval.checks.argument_match import Normalizer
from otel_toolcall_eval.checks.trajectory import arguments_match, trajectory_match, turns
from otel_toolcall_eval.cli import main
from otel_toolcall_eval.config import EvalConfig
from otel_toolcall_eval.dataset.io import read_cases, write_cases
from otel_toolcall_eval.dataset.models import DatasetCase
from otel_toolcall_eval.dataset.schema import dataset_json_schema
from otel_toolcall_eval.offline.prepare import Preparer
from otel_toolcall_eval.offline.runner import evaluate
from otel_toolcall_eval.offline.runs import parse_run_line
from otel_toolcall_eval.offline.score import score_case

PLAIN = EvalConfig.model_validate(
    {
        "arguments": {
            "case_insensitive": False,
            "strip_whitespace": False,
            "dates": False,
            "numeric_strings": False,
            "null_equals_absent": False,
        }
    }
)
MODES = ("strict", "unordered", "subset", "superset", "in_order")
Turns = list[list[tuple[str, dict[str, Any]]]]


def agentevals(
    mode: str,
    outputs: Turns,
    reference: Turns,
    *,
    args: str = "exact",
    tool_args: dict[str, str] | None = None,
    config: EvalConfig = PLAIN,
) -> bool | None:
    """The case's ``trajectory_match`` for ``outputs`` (the run) against ``reference`` (the expected calls)."""
    expected = [{"name": n, "args": a, "batch": t} for t, turn in enumerate(reference) for n, a in turn]
    case = DatasetCase.model_validate(
        {
            "id": "c",
            "user_input": "u",
            "expected_tool_calls": expected,
            "expected_no_tool": not expected,
            "trajectory": {"mode": mode, "args": args, "tool_args": tool_args or {}},
        }
    )
    calls = [{"name": n, "arguments": a, "batch": t} for t, turn in enumerate(outputs) for n, a in turn]
    prep = Preparer(config)
    run = parse_run_line("run.jsonl", 1, orjson.dumps({"id": "c", "tool_calls": calls}))
    result = score_case(prep.prepare(case, 1), run, prep)
    assert result.trajectory_mode == mode
    return result.trajectory_match


SF = {"city": "San Francisco"}


def test_readme_strict_example_fails_on_the_extra_call_in_the_same_message() -> None:
    outputs = [[("get_weather", SF), ("accuweather_forecast", SF)]]
    assert agentevals("strict", outputs, [[("get_weather", SF)]]) is False


def test_readme_unordered_example_passes_across_messages_in_another_order() -> None:
    outputs = [[("get_weather", SF)], [("get_fun_activities", SF)]]
    reference = [[("get_fun_activities", SF), ("get_weather", SF)]]
    assert agentevals("unordered", outputs, reference) is True


def test_readme_superset_example_allows_the_extra_call() -> None:
    both = {"city": "SF and London"}
    outputs = [[("get_weather", both), ("accuweather_forecast", both)]]
    assert agentevals("superset", outputs, [[("get_weather", both)]]) is True
    assert agentevals("subset", outputs, [[("get_weather", both)]]) is False  # accuweather is beyond the reference


def test_readme_override_example_case_folding_is_the_normalisation() -> None:
    """agentevals folds case with a custom matcher; here it is the argument normalisation (on by default)."""
    outputs = [[("get_weather", {"city": "san francisco"})]]
    assert agentevals("strict", outputs, [[("get_weather", SF)]]) is False  # plain ==, as agentevals' "exact"
    assert agentevals("strict", outputs, [[("get_weather", SF)]], config=EvalConfig()) is True


@pytest.mark.parametrize("mode", MODES)
def test_identical_trajectories_match_in_every_mode(mode: str) -> None:  # test_trajectory_match
    assert agentevals(mode, [[("get_weather", SF)]], [[("get_weather", SF)]]) is True


@pytest.mark.parametrize("mode", MODES)
def test_one_message_calls_in_another_order_match_in_every_mode(mode: str) -> None:
    # test_trajectory_with_different_tool_message_order: a message's tool calls are a set, also for strict
    outputs = [[("get_weather", {"city": "SF"}), ("get_weather", {"city": "London"})]]
    reference = [[("get_weather", {"city": "London"}), ("get_weather", {"city": "SF"})]]
    assert agentevals(mode, outputs, reference) is True


@pytest.mark.parametrize(
    ("mode", "score"), [("unordered", True), ("superset", True), ("subset", True), ("strict", False)]
)
def test_the_same_calls_in_two_messages_fail_only_strict(mode: str, score: bool) -> None:
    # test_trajectory_with_different_message_count
    outputs = [[("get_weather", {"city": "SF"})], [("get_weather", {"city": "London"})]]
    reference = [[("get_weather", {"city": "London"}), ("get_weather", {"city": "SF"})]]
    assert agentevals(mode, outputs, reference) is score


@pytest.mark.parametrize(
    ("mode", "score"), [("unordered", False), ("superset", False), ("subset", True), ("strict", False)]
)
def test_a_missing_call_passes_only_subset(mode: str, score: bool) -> None:  # test_trajectory_subset_tool_call
    outputs = [[("get_weather", {"city": "SF"})]]
    reference = [[("get_weather", {"city": "London"}), ("get_weather", {"city": "SF"})]]
    assert agentevals(mode, outputs, reference) is score


@pytest.mark.parametrize("mode", MODES)
def test_another_tool_fails_every_mode(mode: str) -> None:  # test_exact_matcher_with_different_called_tools
    outputs = [[("get_weather", {"city": "SF"})]]
    assert agentevals(mode, outputs, [[("accuweather_forecast", SF)]]) is False


@pytest.mark.parametrize(
    ("mode", "score"), [("unordered", False), ("superset", True), ("subset", False), ("strict", False)]
)
def test_extra_calls_with_ignored_arguments(mode: str, score: bool) -> None:
    # test_trajectory_with_extra_tool_calls_and_override: tool_args_match_overrides={"get_weather": "ignore"}
    outputs = [[("get_weather", SF), ("get_weather", {"city": "London"})]]
    reference = [[("get_weather", {"city": "SF and London"})]]
    assert agentevals(mode, outputs, reference, tool_args={"get_weather": "ignore"}) is score


@pytest.mark.parametrize(
    ("mode", "score"), [("unordered", False), ("superset", False), ("subset", True), ("strict", False)]
)
def test_fewer_calls_with_ignored_arguments(mode: str, score: bool) -> None:
    # test_trajectory_with_subset_tool_calls_and_override
    outputs = [[("get_weather", {"city": "SF and London"})]]
    reference = [[("get_weather", {"city": "SF"}), ("get_weather", {"city": "London"})]]
    assert agentevals(mode, outputs, reference, tool_args={"get_weather": "ignore"}) is score


FLIGHT = {"flight_no": "LX0112"}


@pytest.mark.parametrize(("args", "score"), [("exact", False), ("ignore", True), ("subset", False), ("superset", True)])
def test_args_mode_with_an_extra_actual_argument(args: str, score: bool) -> None:  # test_tool_args_match_mode_superset
    outputs = [[("get_flight_info", {"is_cool": True, **FLIGHT})]]
    assert agentevals("strict", outputs, [[("get_flight_info", FLIGHT)]], args=args) is score


@pytest.mark.parametrize(("args", "score"), [("exact", False), ("ignore", True), ("subset", True), ("superset", False)])
def test_args_mode_with_a_missing_actual_argument(args: str, score: bool) -> None:  # test_tool_args_match_mode_subset
    reference = [[("get_flight_info", {**FLIGHT, "foo": "bar"})]]
    assert agentevals("strict", [[("get_flight_info", FLIGHT)]], reference, args=args) is score


@pytest.mark.parametrize("args", ["exact", "ignore", "subset", "superset"])
def test_args_modes_all_accept_equal_arguments(args: str) -> None:  # test_tool_args_match_mode_exact
    assert agentevals("strict", [[("get_flight_info", FLIGHT)]], [[("get_flight_info", FLIGHT)]], args=args) is True


def test_a_matching_is_found_where_first_fit_would_miss_it() -> None:
    """With a non-symmetric argument mode, the first fitting call can be the one another expected call needed."""
    outputs = [[("search", {"q": "a", "lang": "en"}), ("search", {"q": "a"})]]
    reference = [[("search", {"q": "a"}), ("search", {"q": "a", "lang": "en"})]]
    assert agentevals("unordered", outputs, reference, args="superset") is True


def test_order_across_turns_matters_only_for_strict() -> None:
    outputs = [[("lookup_policy", {})], [("request_time_off", {})]]
    swapped = [[("request_time_off", {})], [("lookup_policy", {})]]
    assert agentevals("strict", outputs, outputs) is True
    assert agentevals("strict", swapped, outputs) is False
    assert agentevals("unordered", swapped, outputs) is True


def test_per_argument_alternatives_and_optional_arguments_count() -> None:
    plain = Normalizer(case_insensitive=False)
    options = {"unit": ["kg", "lb"]}
    assert arguments_match("exact", {"item": "x"}, {"item": "x", "unit": "lb"}, plain, options=options)
    assert not arguments_match("exact", {"item": "x"}, {"item": "x", "unit": "g"}, plain, options=options)
    assert not arguments_match("exact", {"item": "x"}, {"item": "x"}, plain, options=options)
    assert arguments_match("exact", {"item": "x"}, {"item": "x"}, plain, options=options, optional=["unit"])
    assert not arguments_match("exact", {"item": "x"}, None, plain)  # did not parse
    assert arguments_match("ignore", {"item": "x"}, None, plain)


# agentevals-dev's (Google ADK's) IN_ORDER: the expected calls in their order, extra calls anywhere around them
A, B, C, X = ("a", {}), ("b", {}), ("c", {}), ("x", {})


@pytest.mark.parametrize(
    ("outputs", "score"),
    [
        ([[A], [B], [C]], True),
        ([[X], [A], [X], [B], [X], [C], [X]], True),  # extras before, between and after
        ([[A], [C], [B]], False),  # out of order
        ([[A], [B]], False),  # one missing
        ([[B], [A], [B], [C]], True),  # an early extra b does not hide the later in-order one
        ([[A, B], [C]], True),  # the calls of one turn are in order among the actual calls
    ],
)
def test_in_order_needs_the_expected_calls_as_a_subsequence(outputs: Turns, score: bool) -> None:
    assert agentevals("in_order", outputs, [[A], [B], [C]]) is score


def test_in_order_a_turn_is_a_set_and_turns_keep_their_order() -> None:
    reference = [[A, B], [C]]
    assert agentevals("in_order", [[B], [X], [A], [C]], reference) is True  # a turn's calls in any order
    assert agentevals("in_order", [[A], [C], [B]], reference) is False  # c before the turn a+b is complete
    assert agentevals("in_order", [[A], [B], [C], [A]], [[A], [A]]) is True  # each call used once
    assert agentevals("in_order", [[A]], [[A], [A]]) is False


def test_in_order_uses_the_argument_mode_and_takes_the_placement_that_leaves_room() -> None:
    ref = [[("search", {"q": "a"})], [("search", {"q": "b"})]]
    made = [[("search", {"q": "b"})], [("search", {"q": "a"})], [("search", {"q": "b"})]]
    assert agentevals("in_order", made, ref) is True
    assert agentevals("in_order", made[:2], ref) is False
    assert agentevals("in_order", made[:2], ref, args="ignore") is True


def test_no_tool_cases() -> None:
    assert trajectory_match("superset", [], ["a"], lambda i, j: True) is True
    assert trajectory_match("subset", [], ["a"], lambda i, j: True) is False
    assert trajectory_match("strict", [], [], lambda i, j: True) is True


def _write(tmp_path: Path, rows: list[dict[str, Any]], runs: dict[str, list[dict[str, Any]]]) -> tuple[Path, Path]:
    dataset = tmp_path / "d.jsonl"
    dataset.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    run = tmp_path / "r.jsonl"
    run.write_bytes(b"".join(orjson.dumps({"id": k, "tool_calls": v}) + b"\n" for k, v in runs.items()))
    return dataset, run


ROWS = [
    {
        "id": "extra-call",
        "user_input": "weather",
        "expected_tool_calls": [{"name": "get_weather", "args": SF}],
        "trajectory": {"mode": "superset"},
    },
    {"id": "plain", "user_input": "weather", "expected_tool_calls": [{"name": "get_weather", "args": SF}]},
]
RUNS = {
    "extra-call": [{"name": "get_weather", "arguments": SF}, {"name": "accuweather_forecast", "arguments": SF}],
    "plain": [{"name": "get_weather", "arguments": SF}, {"name": "accuweather_forecast", "arguments": SF}],
}


def test_reported_per_case_and_in_the_summary_next_to_the_graded_scores(tmp_path: Path) -> None:
    dataset, run = _write(tmp_path, ROWS, RUNS)
    with evaluate(dataset, [run]) as result:
        rows = {r["id"]: r for r in result.cases}
        assert (rows["extra-call"]["trajectory_mode"], rows["extra-call"]["trajectory_match"]) == ("superset", True)
        assert rows["extra-call"]["passed"] is False  # the graded verdict still sees the unexpected call
        assert "trajectory_mode" not in rows["plain"]  # no mode for it: no key
        assert result.report["summary"]["trajectory_match_rate"] == 1.0
    config = EvalConfig.model_validate({"trajectory": {"mode": "strict"}})  # the default for cases without one
    with evaluate(dataset, [run], config) as result:
        rows = {r["id"]: r for r in result.cases}
        assert rows["plain"]["trajectory_mode"] == "strict" and rows["plain"]["trajectory_match"] is False
        assert rows["extra-call"]["trajectory_mode"] == "superset"  # the case's own mode wins
        assert result.report["summary"]["trajectory_match_rate"] == 0.5
        assert result.report["slices"]["single-tool"]["trajectory_match_rate"] == 0.5


def test_a_deciding_trajectory_mode_passes_the_case_on_its_verdict(tmp_path: Path) -> None:
    """``decides``: "one or more calls" (superset) is the case's verdict; the graded scores are still reported."""
    rows = [{**ROWS[0], "trajectory": {"mode": "superset", "decides": True}}, ROWS[1]]
    twice = [{"name": "get_weather", "arguments": SF}, {"name": "get_weather", "arguments": SF}]
    dataset, run = _write(tmp_path, rows, {"extra-call": twice, "plain": twice})
    with evaluate(dataset, [run]) as result:
        rows_out = {r["id"]: r for r in result.cases}
        assert rows_out["extra-call"]["passed"] is True and rows_out["extra-call"]["precision"] == 0.5
        assert rows_out["plain"]["passed"] is False  # no trajectory mode: graded as always
    dataset, run = _write(tmp_path, rows, {"extra-call": [{"name": "other", "arguments": {}}], "plain": twice})
    with evaluate(dataset, [run]) as result:
        row = next(r for r in result.cases if r["id"] == "extra-call")
        assert row["passed"] is False and "trajectory (superset) does not match" in row["reasons"]
    # the config's default decides for cases that do not say; a case's own false wins
    config = EvalConfig.model_validate({"trajectory": {"mode": "superset", "decides": True}})
    rows = [{**ROWS[0], "trajectory": {"mode": "superset", "decides": False}}, ROWS[1]]
    dataset, run = _write(tmp_path, rows, {"extra-call": twice, "plain": twice})
    with evaluate(dataset, [run], config) as result:
        rows_out = {r["id"]: r for r in result.cases}
        assert rows_out["extra-call"]["passed"] is False and rows_out["plain"]["passed"] is True


def test_a_case_without_a_run_line_does_not_match(tmp_path: Path) -> None:
    rows = [{**ROWS[1], "trajectory": {"mode": "subset"}}]  # subset would hold vacuously for no calls
    dataset, run = _write(tmp_path, rows, {})
    with evaluate(dataset, [run]) as result:
        row = next(iter(result.cases))
        assert row["trajectory_match"] is False and result.report["summary"]["trajectory_match_rate"] == 0.0


def test_off_by_default_no_key_anywhere(tmp_path: Path) -> None:
    dataset, run = _write(tmp_path, ROWS[1:], {"plain": RUNS["plain"]})
    with evaluate(dataset, [run]) as result:
        assert "trajectory_match_rate" not in result.report["summary"]
        assert all("trajectory_match" not in r for r in result.cases)


def test_gate_on_the_trajectory_match_rate(tmp_path: Path) -> None:
    dataset, run = _write(tmp_path, ROWS, RUNS)
    config = tmp_path / "c.yaml"
    config.write_text("trajectory: {mode: strict}\ngate: {min: {trajectory_match_rate: 0.9}}\n")
    assert main(["eval", "--dataset", str(dataset), "--runs", str(run), "--config", str(config)]) == 1


def test_dataset_option_is_validated_round_trips_csv_and_is_in_the_schema(tmp_path: Path, capsys: Any) -> None:
    rows = [{**ROWS[0], "trajectory": {"mode": "unordered", "args": "subset", "tool_args": {"get_weather": "ignore"}}}]
    dataset, _ = _write(tmp_path, rows, {})
    cases = list(read_cases(dataset))
    csv = tmp_path / "d.csv"
    write_cases(csv, cases)
    assert list(read_cases(csv)) == cases
    first, back = tmp_path / "first.jsonl", tmp_path / "back.jsonl"
    write_cases(first, cases)
    write_cases(back, read_cases(csv))
    assert back.read_bytes() == first.read_bytes()  # JSONL -> CSV -> JSONL byte for byte
    assert orjson.loads(back.read_bytes())["trajectory"] == rows[0]["trajectory"]
    schema = dataset_json_schema()
    assert "trajectory" in schema["properties"]
    bad, _ = _write(tmp_path, [{**ROWS[0], "trajectory": {"mode": "sideways"}}], {})
    assert main(["dataset", "validate", str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"{bad}:1: trajectory: mode: Input should be" in err and "Traceback" not in err


def _in_order_brute_force(e_turns: list[list[int]], e: list[str], a: list[str], same: Any, start: int = 0) -> bool:
    if not e_turns:
        return True
    turn, rest = e_turns[0], e_turns[1:]
    for chosen in itertools.combinations(range(start, len(a)), len(turn)):
        for order in itertools.permutations(chosen):
            fits = all(a[j] == e[i] and same(i, j) for i, j in zip(turn, order, strict=True))
            if fits and _in_order_brute_force(rest, e, a, same, max(chosen) + 1):
                return True
    return False


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from("ab"), max_size=4),
    st.lists(st.integers(0, 2), max_size=4),
    st.lists(st.sampled_from("abx"), max_size=7),
    st.sets(st.tuples(st.integers(0, 3), st.integers(0, 6))),
)
def test_in_order_equals_a_search_of_every_placement(
    e: list[str], labels: list[int], a: list[str], refused: set[tuple[int, int]]
) -> None:
    batches: list[int | None] = [labels[i] if i < len(labels) else None for i in range(len(e))]

    def same(i: int, j: int) -> bool:
        return (i, j) not in refused

    want = _in_order_brute_force(turns(len(e), batches), e, a, same)
    assert trajectory_match("in_order", e, a, same, batches) is want
