"""Order over matched pairs (T-Eval: match first, then the longest ordered subsequence of the pairs), with ties
between equally good pairings settled towards order. End to end through ``score_case``."""

from __future__ import annotations

import itertools
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from otel_toolcall_eval.checks.argument_match import Normalizer, closeness, match_arguments
from otel_toolcall_eval.checks.order import aligned_pairs, order_score, pair_order_score
from otel_toolcall_eval.checks.pairing import assign, optimal_assignments
from otel_toolcall_eval.config import EvalConfig
from otel_toolcall_eval.dataset.models import DatasetCase
from otel_toolcall_eval.offline.prepare import Preparer
from otel_toolcall_eval.offline.runs import parse_run_line
from otel_toolcall_eval.offline.score import CaseResult, score_case


def _score(expected: list[dict[str, Any]], calls: list[dict[str, Any]], **case: Any) -> CaseResult:
    row = {"id": "c", "user_input": "u", "expected_tool_calls": expected, **case}
    prep = Preparer(EvalConfig())
    run = parse_run_line("run.jsonl", 1, orjson.dumps({"id": "c", "tool_calls": calls}))
    return score_case(prep.prepare(DatasetCase.model_validate(row), 1), run, prep)


def _e(name: str, **args: Any) -> dict[str, Any]:
    return {"name": name, "args": args}


def _a(name: str, **args: Any) -> dict[str, Any]:
    return {"name": name, "arguments": args}


def _order(result: CaseResult) -> float:
    assert result.order is not None
    return result.order.score


def test_one_skipped_call_still_grades_high_when_identical_calls_tie() -> None:
    """The first of two identical expected calls is skipped: the call made pairs with the second, in order."""
    result = _score([_e("search", q="x"), _e("book"), _e("search", q="x")], [_a("book"), _a("search", q="x")])
    assert _order(result) == 0.8  # k = 2 of 3 + 2: the name LCS, not the 0.4 an arbitrary tie would give


def test_a_tie_between_failing_pairs_also_keeps_order() -> None:
    result = _score([_e("search", q="x"), _e("book"), _e("search", q="x")], [_a("book"), _a("search", q="y")])
    assert result.argument_accuracy == 0.5 and _order(result) == 0.8  # book passes, the search does not


def test_one_inserted_call_still_grades_high() -> None:
    result = _score([_e("a"), _e("b"), _e("c")], [_a("a"), _a("x"), _a("b"), _a("c")])
    assert _order(result) == 2 * 3 / 7


def test_a_retry_loop_costs_once_per_repeat() -> None:
    result = _score([_e("search"), _e("book")], [_a("search"), _a("book"), _a("book"), _a("book")])
    assert round(_order(result), 3) == 0.667


def test_swapped_arguments_of_sequential_calls_are_out_of_order() -> None:
    """T-Eval: pairs follow the arguments, so calling b's search before a's is one pair out of order."""
    expected = [_e("search", q="a"), _e("search", q="b")]
    result = _score(expected, [_a("search", q="b"), _a("search", q="a")])
    assert result.argument_accuracy == 1.0 and _order(result) == 0.5
    assert result.order is not None and not result.order.exact
    ordered = _score(expected, [_a("search", q="b"), _a("search", q="a")], slice="ordered-dependency")
    assert not ordered.passed and any(r.startswith("order:") for r in ordered.reasons)
    in_a_batch = [{**c, "batch": 1} for c in (_a("search", q="b"), _a("search", q="a"))]
    assert _order(_score(expected, in_a_batch)) == 1.0  # a batch is a set


def test_an_expected_batch_is_a_set_too() -> None:
    expected = [{**_e("search", q="a"), "batch": 0}, {**_e("search", q="b"), "batch": 0}, _e("book")]
    result = _score(expected, [_a("search", q="b"), _a("search", q="a"), _a("book")])
    assert result.passed and _order(result) == 1.0


def test_assign_keeps_the_preferred_pairs_among_ties_only() -> None:
    def same(i: int, j: int) -> bool:
        return True

    def weight(v: bool) -> tuple[bool, float]:
        return v, 0.0

    assert assign(2, [0, 1], same, weight, prefer=[(0, 1), (1, 0)]) == [(0, 1, True), (1, 0, True)]
    assert assign(2, [5], same, weight, prefer=[(1, 5)]) == [(1, 5, True)]

    def only_diagonal(i: int, j: int) -> bool:
        return i == j

    # a preference never costs a pass
    assert assign(2, [0, 1], only_diagonal, weight, prefer=[(0, 1), (1, 0)]) == [(0, 0, True), (1, 1, True)]


NAMES = st.lists(st.sampled_from("abc"), max_size=6)


@settings(max_examples=200, deadline=None)
@given(NAMES, NAMES)
def test_with_identical_arguments_the_pair_order_is_the_name_lcs(expected: list[str], actual: list[str]) -> None:
    """Where arguments never tell two calls of a tool apart, ties decide every pairing: k is the name LCS."""
    result = _score([_e(n) for n in expected], [_a(n) for n in actual], expected_no_tool=not expected)
    if expected:
        assert result.order is not None and result.order == order_score(expected, actual)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("ab"), st.sampled_from("xy")), max_size=6), st.data())
def test_pair_order_never_exceeds_the_name_lcs(expected: list[tuple[str, str]], data: Any) -> None:
    actual = data.draw(st.permutations(expected))
    result = _score([_e(n, q=q) for n, q in expected], [_a(n, q=q) for n, q in actual], expected_no_tool=not expected)
    if expected:
        names_e, names_a = [n for n, _ in expected], [n for n, _ in actual]
        assert result.order is not None
        assert result.order.score <= order_score(names_e, names_a).score + 1e-12
        assert result.argument_accuracy == 1.0  # a permutation: every call found its expected call


def test_aligned_pairs_and_pair_order_score_directly() -> None:
    assert aligned_pairs(["s", "u", "s"], ["u", "s"]) == {(1, 0), (2, 1)}
    assert pair_order_score([(0, 1), (1, 0)], ["s", "s"], ["s", "s"]).score == 0.5
    assert pair_order_score([(0, 0), (1, 1)], ["s", "s"], ["s", "s"]).exact


# --- the order score by its definition: the maximum matching that maximises the ordered subsequence -----------

CALL = st.tuples(st.sampled_from("ab"), st.sampled_from(["x", "y", None]))


def _args(q: str | None) -> dict[str, Any]:
    return {} if q is None else {"q": q}


def _lis(pairs: list[tuple[int, int]]) -> int:
    """The longest subsequence of pairs in order on both sides, by trying every subset (small inputs only)."""
    best = 0
    ordered = sorted(pairs)
    for size in range(len(ordered), 0, -1):
        for subset in itertools.combinations(ordered, size):
            if all(a[1] < b[1] for a, b in itertools.pairwise(subset)):
                return size
    return best


def reference_order_score(expected: list[tuple[str, str | None]], actual: list[tuple[str, str | None]]) -> float:
    """T-Eval's order score by its definition, exhaustively: every maximum matching (per tool, an assignment of
    ``min(rows, columns)`` pairs maximising the passes, then the summed closeness), and the longest ordered
    subsequence of the best one of them."""
    n, m = len(expected), len(actual)
    if not n or not m:
        return 1.0 if n == m else 0.0
    per_tool: list[list[list[tuple[int, int]]]] = []
    for tool in sorted({name for name, _ in expected} & {name for name, _ in actual}):
        rows = [i for i, (name, _) in enumerate(expected) if name == tool]
        columns = [j for j, (name, _) in enumerate(actual) if name == tool]
        matchings: list[tuple[tuple[int, float], list[tuple[int, int]]]] = []
        if len(rows) <= len(columns):
            options = [list(zip(rows, p, strict=True)) for p in itertools.permutations(columns, len(rows))]
        else:
            options = [list(zip(p, columns, strict=True)) for p in itertools.permutations(rows, len(columns))]
        for pairs in options:
            passed, close = 0, 0.0
            for i, j in pairs:
                ok, weight = closeness(match_arguments(_args(expected[i][1]), _args(actual[j][1]), Normalizer()))
                passed += ok
                close += min(weight, 0.999)
            matchings.append(((passed, round(close, 6)), pairs))
        top = max(score for score, _ in matchings)
        per_tool.append([pairs for score, pairs in matchings if score == top])
    k = max((_lis([p for part in combo for p in part]) for combo in itertools.product(*per_tool)), default=0)
    return 1.0 if k == n == m else 2.0 * k / (n + m)


@settings(max_examples=400, deadline=None)
@given(st.lists(CALL, min_size=1, max_size=5), st.lists(CALL, max_size=5))
def test_the_order_score_is_the_definitions_on_small_sequences(
    expected: list[tuple[str, str | None]], actual: list[tuple[str, str | None]]
) -> None:
    result = _score([_e(n, **_args(q)) for n, q in expected], [_a(n, **_args(q)) for n, q in actual])
    assert result.order is not None
    assert abs(result.order.score - reference_order_score(expected, actual)) < 1e-9, (expected, actual)


def test_a_tie_settled_across_is_settled_by_the_definition() -> None:
    """Two maximum matchings of ``a``: the one an alignment of the names prefers pairs ``b`` with a failing call,
    which no maximum matching can hold; the definition takes the other (k = 2, not 1)."""
    expected = [("a", "x"), ("b", "x"), ("a", "x")]
    actual = [("b", "x"), ("a", "x"), ("b", "y")]
    result = _score([_e(n, q=q) for n, q in expected], [_a(n, q=q) for n, q in actual])
    assert _order(result) == reference_order_score(expected, actual) == 2 * 2 / 6


def test_optimal_assignments_weighs_each_cell_once_and_keeps_every_tie() -> None:
    """5 calls of one tool: each (expected, actual) cell weighed once (was once per pairing: 120 x 5), the
    unique best pairing when the arguments tell the calls apart, every tied pairing when they do not."""
    calls: list[tuple[int, int]] = []

    def apart(i: int, j: int) -> tuple[bool, float]:
        calls.append((i, j))
        return i == 4 - j, 0.5

    assert optimal_assignments(range(5), range(5), apart, limit=720) == [[(i, 4 - i) for i in range(5)]]
    assert sorted(calls) == [(i, j) for i in range(5) for j in range(5)]
    same = optimal_assignments([0, 1, 2], [5, 6, 7], lambda i, j: (True, 1.0), limit=720)
    assert same is not None and len(same) == 6 and same[0] == [(0, 5), (1, 6), (2, 7)]
