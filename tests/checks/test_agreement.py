"""Agreement statistics against scikit-learn on the same data, and against published worked examples."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import cohen_kappa_score
from sklearn.metrics import confusion_matrix as sk_confusion_matrix

from otel_toolcall_eval.checks.agreement import (
    MAX_RESAMPLES,
    agreement,
    bootstrap_ci,
    cohen_kappa,
    confusion_matrix,
    fleiss_kappa,
    kappa_from_matrix,
    krippendorff_alpha,
)

SCALE = ["good", "partial", "poor", "none"]


@st.composite
def label_pairs(draw: st.DrawFn) -> tuple[list[str], list[str], list[str]]:
    k = draw(st.integers(min_value=2, max_value=4))
    labels = SCALE[:k]
    n = draw(st.integers(min_value=1, max_value=60))
    label = st.sampled_from(labels)
    return draw(st.lists(label, min_size=n, max_size=n)), draw(st.lists(label, min_size=n, max_size=n)), labels


def _same(ours: float | None, theirs: float) -> None:
    if math.isnan(theirs):
        assert ours is None
    else:
        assert ours is not None and ours == pytest.approx(theirs, abs=1e-9)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.UndefinedMetricWarning")
@settings(max_examples=200, deadline=None)
@given(label_pairs(), st.sampled_from([None, "linear", "quadratic"]))
def test_kappa_matches_scikit_learn(data: tuple[list[str], list[str], list[str]], weights: str | None) -> None:
    human, judge, labels = data
    theirs = float(cohen_kappa_score(human, judge, labels=labels, weights=weights))
    _same(cohen_kappa(human, judge, labels, weights=weights), theirs)  # type: ignore[arg-type]


@settings(max_examples=100, deadline=None)
@given(label_pairs())
def test_confusion_matrix_matches_scikit_learn(data: tuple[list[str], list[str], list[str]]) -> None:
    human, judge, labels = data
    assert confusion_matrix(human, judge, labels) == sk_confusion_matrix(human, judge, labels=labels).tolist()


@settings(max_examples=100, deadline=None)
@given(label_pairs())
def test_precision_recall_and_base_rates_match_scikit_learn(data: tuple[list[str], list[str], list[str]]) -> None:
    from sklearn.metrics import precision_score, recall_score

    human, judge, labels = data
    result = agreement(human, judge, labels)
    assert result.raw == pytest.approx(sum(h == j for h, j in zip(human, judge, strict=True)) / len(human))
    kw = {"labels": labels, "average": None, "zero_division": math.nan}
    precision = precision_score(human, judge, **kw)
    recall = recall_score(human, judge, **kw)
    for i, stats in enumerate(result.per_label):
        _same(stats.precision, float(precision[i]))
        _same(stats.recall, float(recall[i]))
        assert stats.human_rate == pytest.approx(human.count(stats.label) / len(human))
        assert stats.judge_rate == pytest.approx(judge.count(stats.label) / len(judge))
    assert sum(s.human_rate for s in result.per_label) == pytest.approx(1.0)


def test_kappa_textbook_example() -> None:
    # Wikipedia's "Cohen's kappa" example: 50 proposals, yes/yes 20, yes/no 5, no/yes 10, no/no 15 -> 0.4
    assert kappa_from_matrix([[20, 5], [10, 15]]) == pytest.approx(0.4)


def test_undefined_statistics_are_none_not_nan() -> None:
    result = agreement(["yes"] * 5, ["yes"] * 5, ["yes", "no"])
    assert result.kappa is None and result.raw == 1.0
    no = result.per_label[1]
    assert no.precision is None and no.recall is None and no.human_rate == 0.0
    assert agreement([], [], ["yes", "no"]).raw is None


def test_tied_scale_positions_count_as_agreement_when_weighted() -> None:
    # error_handling scores three reactions 1.0: weighted by score they agree, nominally they do not
    human = ["corrected_retry", "switched_tool", "carried_on", "carried_on"]
    judge = ["switched_tool", "corrected_retry", "carried_on", "carried_on"]
    labels = ["corrected_retry", "switched_tool", "carried_on"]
    assert cohen_kappa(human, judge, labels, weights="linear", positions=[1.0, 1.0, 0.0]) == pytest.approx(1.0)
    assert cohen_kappa(human, judge, labels) < 1.0  # type: ignore[operator]


def test_bad_input_is_named() -> None:
    with pytest.raises(ValueError, match="differ in length"):
        cohen_kappa(["a"], ["a", "b"])
    with pytest.raises(ValueError, match="not on the scale"):
        confusion_matrix(["a"], ["c"], ["a", "b"])


def test_bootstrap_interval_is_seeded_and_covers_the_estimate() -> None:
    human = ["yes"] * 40 + ["no"] * 40
    judge = ["yes"] * 34 + ["no"] * 6 + ["no"] * 30 + ["yes"] * 10
    estimate = cohen_kappa(human, judge)
    first = bootstrap_ci(human, judge, kappa_from_matrix, resamples=500, seed=3)
    assert first == bootstrap_ci(human, judge, kappa_from_matrix, resamples=500, seed=3)
    assert first != bootstrap_ci(human, judge, kappa_from_matrix, resamples=500, seed=4)
    assert first is not None and estimate is not None
    low, high = first
    assert low < estimate < high
    assert 0.1 < high - low < 0.6  # ~ 4 standard errors of kappa at n=80 (about 0.1 each)


def test_bootstrap_narrows_with_more_items() -> None:
    human = ["yes"] * 30 + ["no"] * 30
    judge = ["yes"] * 25 + ["no"] * 5 + ["no"] * 24 + ["yes"] * 6
    small = bootstrap_ci(human, judge, kappa_from_matrix, resamples=400)
    large = bootstrap_ci(human * 16, judge * 16, kappa_from_matrix, resamples=400)
    assert small is not None and large is not None
    assert (large[1] - large[0]) < (small[1] - small[0]) / 2.5  # sqrt(16) = 4 in theory


def test_bootstrap_is_bounded_and_undefined_when_kappa_mostly_is() -> None:
    calls = 0

    def count(matrix: object) -> float:
        nonlocal calls
        calls += 1
        return 0.0

    bootstrap_ci(["a", "b"], ["a", "b"], count, resamples=10**9)
    assert calls == MAX_RESAMPLES
    # one label throughout: kappa is undefined in every resample, so is its interval
    assert bootstrap_ci(["a"] * 10, ["a"] * 10, kappa_from_matrix, resamples=200) is None
    half = iter([None, 1.0] * 50 + [None])
    assert bootstrap_ci(["a", "b"], ["a", "b"], lambda m: next(half), resamples=101) is None  # 50 of 101
    assert bootstrap_ci([], [], kappa_from_matrix) is None


def test_fleiss_kappa_published_example() -> None:
    # Wikipedia's "Fleiss' kappa" worked example: 10 items, 14 raters, 5 categories -> 0.210
    table = [
        [0, 0, 0, 0, 14],
        [0, 2, 6, 4, 2],
        [0, 0, 3, 5, 6],
        [0, 3, 9, 2, 0],
        [2, 2, 8, 1, 1],
        [7, 7, 0, 0, 0],
        [3, 2, 6, 3, 0],
        [2, 5, 3, 2, 2],
        [6, 5, 2, 1, 0],
        [0, 2, 2, 3, 7],
    ]
    items = [[c for c, count in enumerate(row) for _ in range(count)] for row in table]
    assert fleiss_kappa(items) == pytest.approx(0.210, abs=5e-4)
    assert fleiss_kappa([["a", "a"], ["a", "a"]]) is None
    with pytest.raises(ValueError, match="same number"):
        fleiss_kappa([["a", "b"], ["a"]])


def test_fleiss_kappa_of_two_raters_is_scotts_pi() -> None:
    human = ["yes"] * 20 + ["no"] * 15 + ["yes"] * 5 + ["no"] * 10
    judge = ["yes"] * 20 + ["no"] * 15 + ["no"] * 5 + ["yes"] * 10
    pooled = {"yes": (human + judge).count("yes") / 100, "no": (human + judge).count("no") / 100}
    expected = sum(p * p for p in pooled.values())
    scotts_pi = (0.7 - expected) / (1 - expected)
    assert fleiss_kappa(list(zip(human, judge, strict=True))) == pytest.approx(scotts_pi)


def test_krippendorff_alpha_published_example() -> None:
    # Krippendorff (2011), "Computing Krippendorff's alpha-reliability": 4 observers, 12 units, missing data;
    # nominal alpha = 0.743
    rows = [
        [1, 2, 3, 3, 2, 1, 4, 1, 2, None, None, None],
        [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, None, 3],
        [None, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, None],
        [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, None],
    ]
    units = [[row[u] for row in rows] for u in range(12)]
    assert krippendorff_alpha(units) == pytest.approx(0.743, abs=5e-4)
    by_name = [{n: v for n, v in zip("ABCD", unit, strict=True) if v is not None} for unit in units]
    assert krippendorff_alpha(by_name) == krippendorff_alpha(units)
    assert krippendorff_alpha([["x", "x"], ["x", "x"]]) is None
    assert krippendorff_alpha([["x"], [None, "y"]]) is None  # nothing pairable
