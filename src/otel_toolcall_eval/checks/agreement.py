"""Agreement between a judge and human raters: is the judge's verdict worth gating on?

Pure functions over label sequences (no OpenTelemetry, no pydantic), so the same numbers come out of a CLI table,
a report or a test against scikit-learn. The human label is the reference: rows of the confusion matrix are the
human's labels, columns the judge's (scikit-learn's ``confusion_matrix(y_true=human, y_pred=judge)``).

A statistic that is undefined on the data (kappa when both raters used one and the same label, precision of a
label the judge never gave) is ``None``, never ``nan``: reports print it as "n/a" and JSON stays valid.
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

Weights = Literal["linear", "quadratic"]
MAX_RESAMPLES = 10_000  # the bootstrap's work is resamples x items: a cap keeps it bounded whatever is asked


def _labels_of(a: Sequence[str], b: Sequence[str], labels: Sequence[str] | None) -> list[str]:
    if len(a) != len(b):
        raise ValueError(f"label sequences differ in length ({len(a)} and {len(b)})")
    if labels is None:
        return sorted(set(a) | set(b))
    if len(set(labels)) != len(labels):
        raise ValueError("a label is listed twice")
    unknown = (set(a) | set(b)) - set(labels)
    if unknown:
        raise ValueError(f"labels not on the scale: {sorted(unknown)}")
    return list(labels)


def confusion_matrix(
    human: Sequence[str], judge: Sequence[str], labels: Sequence[str] | None = None
) -> list[list[int]]:
    """Counts of (human label, judge label): ``matrix[i][j]`` items the human labelled i and the judge j."""
    order = _labels_of(human, judge, labels)
    index = {label: i for i, label in enumerate(order)}
    matrix = [[0] * len(order) for _ in order]
    for h, j in zip(human, judge, strict=True):
        matrix[index[h]][index[j]] += 1
    return matrix


def _disagreement(k: int, weights: Weights | None, positions: Sequence[float] | None) -> list[list[float]]:
    """The weight of each disagreement: 1 off the diagonal (nominal), or the distance on the ordinal scale.

    ``positions`` places each label on the scale (a judge question's scores); by default label i sits at i, which
    is scikit-learn's convention. Labels at the same position (two reactions both scored 1.0) count as agreeing.
    """
    if weights is None:
        return [[0.0 if i == j else 1.0 for j in range(k)] for i in range(k)]
    pos = list(positions) if positions is not None else [float(i) for i in range(k)]
    if len(pos) != k:
        raise ValueError(f"{len(pos)} positions for {k} labels")
    power = 1 if weights == "linear" else 2
    return [[abs(pos[i] - pos[j]) ** power for j in range(k)] for i in range(k)]


def kappa_from_matrix(
    matrix: Sequence[Sequence[int]], weights: Weights | None = None, positions: Sequence[float] | None = None
) -> float | None:
    """Cohen's kappa, 1 - observed / chance-expected (weighted) disagreement; None when chance disagreement is 0."""
    k = len(matrix)
    n = sum(sum(row) for row in matrix)
    if n == 0:
        return None
    w = _disagreement(k, weights, positions)
    rows = [sum(row) for row in matrix]
    cols = [sum(matrix[i][j] for i in range(k)) for j in range(k)]
    observed = sum(w[i][j] * matrix[i][j] for i in range(k) for j in range(k))
    expected = sum(w[i][j] * rows[i] * cols[j] for i in range(k) for j in range(k)) / n
    if expected == 0:
        return None
    return 1.0 - observed / expected


def cohen_kappa(
    human: Sequence[str],
    judge: Sequence[str],
    labels: Sequence[str] | None = None,
    weights: Weights | None = None,
    positions: Sequence[float] | None = None,
) -> float | None:
    """Cohen's kappa of two raters; ``weights`` for an ordinal scale (in the order of ``labels``)."""
    return kappa_from_matrix(confusion_matrix(human, judge, labels), weights, positions)


@dataclass(frozen=True)
class LabelStats:
    """One label: how often each rater gave it, and the judge's precision and recall against the human."""

    label: str
    human_rate: float
    judge_rate: float
    precision: float | None  # of the items the judge gave this label, the share the human gave it too
    recall: float | None  # of the items the human gave this label, the share the judge gave it too


@dataclass(frozen=True)
class Agreement:
    """Judge against human on one question: every figure a calibration needs, from the confusion matrix."""

    labels: tuple[str, ...]
    matrix: tuple[tuple[int, ...], ...]
    n: int
    raw: float | None  # share of items with the same label
    kappa: float | None
    per_label: tuple[LabelStats, ...]


def _ratio(num: int, den: int) -> float | None:
    return num / den if den else None


def agreement(human: Sequence[str], judge: Sequence[str], labels: Sequence[str] | None = None) -> Agreement:
    """Raw agreement, unweighted kappa, base rates and per-label precision/recall of the judge against the human."""
    order = _labels_of(human, judge, labels)
    matrix = confusion_matrix(human, judge, order)
    n = len(human)
    k = len(order)
    rows = [sum(row) for row in matrix]
    cols = [sum(matrix[i][j] for i in range(k)) for j in range(k)]
    per_label = tuple(
        LabelStats(
            label=label,
            human_rate=rows[i] / n if n else 0.0,
            judge_rate=cols[i] / n if n else 0.0,
            precision=_ratio(matrix[i][i], cols[i]),
            recall=_ratio(matrix[i][i], rows[i]),
        )
        for i, label in enumerate(order)
    )
    return Agreement(
        labels=tuple(order),
        matrix=tuple(tuple(row) for row in matrix),
        n=n,
        raw=_ratio(sum(matrix[i][i] for i in range(k)), n),
        kappa=kappa_from_matrix(matrix),
        per_label=per_label,
    )


def bootstrap_ci(
    human: Sequence[str],
    judge: Sequence[str],
    statistic: Callable[[Sequence[Sequence[int]]], float | None],
    labels: Sequence[str] | None = None,
    *,
    resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> tuple[float, float] | None:
    """Percentile bootstrap interval of ``statistic(confusion matrix)`` over items resampled with replacement.

    Resampling n items is drawing n cells of the confusion matrix in proportion to their counts, so each resample
    costs one ``random.choices`` and one count, not a pass over the raw labels. Seeded (the same data gives the
    same interval) and capped at ``MAX_RESAMPLES``. None when fewer than half the resamples define the statistic
    (for kappa: most resamples hold one label only) or there are no items.
    """
    if not 0 < confidence < 1:
        raise ValueError(f"confidence {confidence} is not between 0 and 1")
    matrix = confusion_matrix(human, judge, labels)
    k = len(matrix)
    n = len(human)
    resamples = max(1, min(int(resamples), MAX_RESAMPLES))
    if n == 0:
        return None
    cells = [(i, j) for i in range(k) for j in range(k) if matrix[i][j]]
    counts = [matrix[i][j] for i, j in cells]
    rng = random.Random(seed)
    values: list[float] = []
    for _ in range(resamples):
        drawn = Counter(rng.choices(range(len(cells)), weights=counts, k=n))
        sample = [[0] * k for _ in range(k)]
        for cell, count in drawn.items():
            i, j = cells[cell]
            sample[i][j] = count
        value = statistic(sample)
        if value is not None:
            values.append(value)
    if len(values) * 2 < resamples:
        return None
    values.sort()
    tail = (1 - confidence) / 2
    return _quantile(values, tail), _quantile(values, 1 - tail)


def _quantile(sorted_values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    pos = q * (len(sorted_values) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def fleiss_kappa(items: Sequence[Sequence[Hashable]]) -> float | None:
    """Fleiss' kappa: chance-corrected agreement of m raters per item (every item rated by the same number).

    ``items[i]`` holds the labels the raters gave item i. None when it is undefined (one label throughout, or
    fewer than two raters).
    """
    if not items:
        return None
    m = len(items[0])
    if any(len(row) != m for row in items):
        raise ValueError("Fleiss' kappa needs the same number of ratings for every item")
    if m < 2:
        return None
    n = len(items)
    totals: Counter[Hashable] = Counter()
    per_item = 0.0
    for row in items:
        counts = Counter(row)
        totals.update(counts)
        per_item += (sum(c * c for c in counts.values()) - m) / (m * (m - 1))
    observed = per_item / n
    expected = sum((c / (n * m)) ** 2 for c in totals.values())
    if expected == 1:
        return None
    return (observed - expected) / (1 - expected)


def krippendorff_alpha(units: Sequence[Mapping[str, Hashable] | Sequence[Hashable | None]]) -> float | None:
    """Krippendorff's alpha, nominal: agreement of any number of raters, each item rated by any subset of them.

    Each unit is the labels it received (a rater -> label mapping, or a sequence with None for a missing rating).
    Units with fewer than two ratings are not pairable and are left out, as the coefficient defines. None when it
    is undefined (no pairable unit, or one label throughout).
    """
    coincidence: defaultdict[tuple[Hashable, Hashable], float] = defaultdict(float)
    for unit in units:
        values = [v for v in (unit.values() if isinstance(unit, Mapping) else unit) if v is not None]
        m = len(values)
        if m < 2:
            continue
        counts = Counter(values)
        for c, nc in counts.items():
            for d, nd in counts.items():
                pairs = nc * (nc - 1) if c == d else nc * nd
                coincidence[(c, d)] += pairs / (m - 1)
    total = sum(coincidence.values())
    if total == 0:
        return None
    marginal: defaultdict[Hashable, float] = defaultdict(float)
    for (c, _d), value in coincidence.items():
        marginal[c] += value
    observed = sum(v for (c, d), v in coincidence.items() if c != d)
    expected = total * total - sum(v * v for v in marginal.values())  # n(n-1) x the expected disagreement
    if expected == 0:
        return None
    return 1.0 - (total - 1) * observed / expected


def pass_fail_rates(
    human: Sequence[str], judge: Sequence[str], passing: frozenset[str] | set[str]
) -> tuple[float | None, float | None]:
    """(TPR, TNR) of the judge with the labels in ``passing`` as "pass": the share of the human's passes the
    judge also passed, and of the human's failures the judge also failed (``None`` when the human gave none)."""
    if len(human) != len(judge):
        raise ValueError(f"label sequences differ in length ({len(human)} and {len(judge)})")
    tp = fn = tn = fp = 0
    for h, j in zip(human, judge, strict=True):
        if h in passing:
            tp, fn = (tp + 1, fn) if j in passing else (tp, fn + 1)
        else:
            tn, fp = (tn + 1, fp) if j not in passing else (tn, fp + 1)
    return _ratio(tp, tp + fn), _ratio(tn, tn + fp)
