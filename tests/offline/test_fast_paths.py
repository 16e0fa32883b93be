"""The offline scorer's fast paths give the verdicts of the general path, on the benchmark's cases and mutations.

``score_case`` passes a forced pair whose values are identical without calling ``match_arguments``, when the
expected call is "plain" (``Reference.plain``: no alternatives, no optional keys, extras ignored, no free-text
field). The same cases are scored a second time with every ``plain`` flag off, so each pair goes through
``match_arguments``: every observable part of the result (the report row with its reasons, the pair verdicts,
the order, the counts, the aggregate) must be equal. Mutations cover what the fast path must not touch: value
differences that only normalisation accepts, parse and schema failures, strict calls, alternatives and optional
keys, free-text fields, wrong and missing values, several calls of one tool, no arguments recorded, batches and run errors.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import orjson
from benchmarks.offline_cases import dataset_row, run_line
from hypothesis import given, settings
from hypothesis import strategies as st

from otel_toolcall_eval.config import EvalConfig
from otel_toolcall_eval.dataset.models import DatasetCase
from otel_toolcall_eval.offline.aggregate import RunAggregate
from otel_toolcall_eval.offline.cases import case_row
from otel_toolcall_eval.offline.prepare import PreparedCase, Preparer
from otel_toolcall_eval.offline.runs import parse_run_line
from otel_toolcall_eval.offline.score import CaseResult, score_case

MUTATIONS = (
    "none",
    "duplicate_call",
    "reversed",
    "unparseable",
    "second_expected_call_of_a_tool",
    "reformatted_date",
    "options",
    "strict",
    "run_error",
    "unknown_tool_forbidden",
    "batches",
    "wrong_types",
    "no_calls",
    "calls_twice",
    "alternative",
    "no_arguments",
    "schema_invalid",
    "wrong_value",
    "missing_argument",
)

_PREPS = {
    "plain": Preparer(EvalConfig()),
    "free_text": Preparer(
        EvalConfig.model_validate(
            {
                "arguments": {"free_text": {"book_hotel": ["city"]}},
                "policies": {"required_steps": [{"tool": "book_hotel", "before": ["get_weather"]}]},
            }
        )
    ),
}


def _mutated(i: int, mutation: str) -> tuple[dict[str, Any], dict[str, Any]]:
    row, line = copy.deepcopy(dataset_row(i)), copy.deepcopy(run_line(i))
    calls: list[dict[str, Any]] = line["tool_calls"]
    expected: list[dict[str, Any]] = row["expected_tool_calls"]
    if mutation == "duplicate_call":
        calls.append(copy.deepcopy(calls[0]))
    elif mutation == "reversed":
        calls.reverse()
    elif mutation == "unparseable":
        calls[0]["arguments"] = "{not json"
    elif mutation == "second_expected_call_of_a_tool":
        expected.append({"name": expected[0]["name"], "args": {"origin": "OSL", "destination": "PRG", "date": "x"}})
    elif mutation == "reformatted_date":
        calls[0]["arguments"] = {"origin": "cdg", "destination": " LIS ", "date": "December 1, 2026"}
    elif mutation == "options":
        expected[0]["arg_options"] = {"class": ["economy", "business"]}
        expected[0]["optional_args"] = ["class"]
    elif mutation == "strict":
        for e in expected:
            e["required_args_only"] = False
    elif mutation == "run_error":
        line["error"] = "boom"
    elif mutation == "unknown_tool_forbidden":
        row["must_not_call"] = ["get_forecast"]
        del row["available_tools"]
    elif mutation == "batches":
        for k, c in enumerate(calls):
            c["batch"] = k // 2
        for k, e in enumerate(expected):
            e["batch"] = k // 2
    elif mutation == "wrong_types":
        calls[-1]["arguments"] = {"city": 5, "nights": "2"}
    elif mutation == "no_calls":
        line["tool_calls"] = []
    elif mutation == "calls_twice":
        calls.extend(copy.deepcopy(calls))
    elif mutation == "alternative":
        row["acceptable_alternatives"] = [[{"name": e["name"], "args": {}} for e in expected[::-1]]]
    elif mutation == "no_arguments":
        for c in calls:
            c["arguments"] = None
        expected[1]["args"] = {}
    elif mutation == "wrong_value":
        calls[0]["arguments"] = {**_object(calls[0]["arguments"]), "destination": "OSL"}
        calls[-1]["arguments"] = {**_object(calls[-1]["arguments"]), "city": "Atlantis"}
    elif mutation == "missing_argument":
        calls[1]["arguments"] = {}
    elif mutation == "schema_invalid":
        calls[-1]["arguments"] = {"city": "Rome", "nights": 0}
    return row, line


def _object(arguments: Any) -> dict[str, Any]:
    value = orjson.loads(arguments) if isinstance(arguments, str) else arguments
    assert isinstance(value, dict)
    return value


def _general(case: PreparedCase) -> PreparedCase:
    """The case with every fast path off: each pair is judged by ``match_arguments``."""
    refs = tuple(dataclasses.replace(r, plain=(False,) * len(r.calls)) for r in case.references)
    return dataclasses.replace(case, references=refs)


def _observed(result: CaseResult) -> dict[str, Any]:
    row = case_row([result])
    row["pair_verdicts"] = [(t, v.failed, v.mismatched, v.similarity, j) for t, v, j in result.pair_verdicts]
    row["order"] = None if result.order is None else dataclasses.astuple(result.order)
    row["counts"] = [
        result.reference,
        result.pairs,
        result.args_correct,
        result.required_checked,
        result.required_ok,
        result.core_ok,
        result.expected_counts,
        result.actual_counts,
    ]
    row["policy"] = None if result.policy_violations is None else [repr(v) for v in result.policy_violations]
    return row


@settings(max_examples=150)
@given(
    cases=st.lists(
        st.tuples(st.integers(0, 10_000), st.sampled_from(MUTATIONS), st.booleans()), min_size=1, max_size=8
    ),
    config=st.sampled_from(sorted(_PREPS)),
)
def test_fast_paths_give_the_general_paths_verdicts(cases: list[tuple[int, str, bool]], config: str) -> None:
    prep = _PREPS[config]
    fast_total, general_total = RunAggregate(), RunAggregate()
    for i, mutation, has_run in cases:
        row, line = _mutated(i, mutation)
        case = prep.prepare(DatasetCase.model_validate(row), i + 1)
        run = parse_run_line("run.jsonl", i + 1, orjson.dumps(line)) if has_run else None
        fast = score_case(case, run, prep)
        # a fresh parse: the engine keeps per-call state (normalised keys) on the records' scores
        again = parse_run_line("run.jsonl", i + 1, orjson.dumps(line)) if has_run else None
        general = score_case(_general(case), again, prep)
        assert _observed(fast) == _observed(general), (i, mutation)
        fast_total.add(fast)
        general_total.add(general)
    assert fast_total.report(policies=prep.has_policies) == general_total.report(policies=prep.has_policies)


def test_the_fast_path_is_taken_on_the_benchmarks_exact_case() -> None:
    """Guards the test above against comparing the general path with itself: the bench's exact case is plain."""
    prep = _PREPS["plain"]
    case = prep.prepare(DatasetCase.model_validate(dataset_row(0)), 1)
    assert all(case.references[0].plain)
    assert not any(_general(case).references[0].plain)
    options = prep.prepare(DatasetCase.model_validate(_mutated(0, "options")[0]), 1)
    assert options.references[0].plain == (False, True, True)
    free = _PREPS["free_text"].prepare(DatasetCase.model_validate(dataset_row(0)), 1)
    assert free.references[0].plain == (True, True, False)  # book_hotel's city is free text
