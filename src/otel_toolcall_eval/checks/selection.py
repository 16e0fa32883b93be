"""Tool selection: did the agent call the right tools, as many times as needed?

Over multisets of names (a repeated call counts twice), with E the expected and A the actual names:

    TP        = sum over names n of min(count_E(n), count_A(n))
    precision = TP / |A|                 (|A| = 0: 1.0 when |E| = 0 too, else 0.0)
    recall    = TP / |E|                 (1.0 when |E| = 0: no call was missed)
    F1        = 2 TP / (|E| + |A|)       (1.0 when both are empty)

F1 in this form is the harmonic mean of precision and recall (0 when either is 0), so calling nothing where a
call was needed, or anything where none was, scores F1 = 0. Calling nothing where calls were needed has
precision 0.0, not a vacuous 1.0 (as the LangWatch tool-selection cookbook's per-case table and most harnesses
give: a silent agent must not top a precision ranking); a call where none was needed keeps recall 1.0
(nothing was missed).
With both sides non-empty, swapping E and A swaps precision and recall and keeps F1. Aggregates are
micro-averages (sums of TP, |E| and |A| over cases), so a no-tool case with an unnecessary call lowers
precision and leaves recall alone, and a case with no call lowers recall only. Per-tool recall is
correct(n) / expected(n).

The confusion matrix is over single-call cases: the expected tool against the tool that was called, where
"called" is the expected tool when it is among the calls, else the first call, else ``NONE``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

NONE = "(none)"  # the confusion-matrix label for "no tool"


@dataclass(slots=True)  # one per case scored: a frozen init costs ~5x
class Selection:
    tp: int
    expected: int
    actual: int

    @property
    def precision(self) -> float:
        if self.actual:
            return self.tp / self.actual
        return 0.0 if self.expected else 1.0  # calls needed, none made: 0 (the LangWatch cookbook's table)

    @property
    def recall(self) -> float:
        return self.tp / self.expected if self.expected else 1.0

    @property
    def f1(self) -> float:
        total = self.expected + self.actual
        return 2 * self.tp / total if total else 1.0


def counts(names: Sequence[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for name in names:
        out[name] = out.get(name, 0) + 1
    return out


def true_positives(expected: Mapping[str, int], actual: Mapping[str, int]) -> int:
    """Size of the multiset intersection."""
    if len(actual) < len(expected):
        expected, actual = actual, expected
    tp = 0
    for name, n in expected.items():
        m = actual.get(name)
        if m:
            tp += n if n < m else m
    return tp


def selection(expected: Sequence[str], actual: Sequence[str]) -> Selection:
    """Precision, recall and F1 of ``actual`` against ``expected`` (both lists of tool names)."""
    if len(expected) == len(actual) and list(expected) == list(actual):
        return Selection(len(expected), len(expected), len(actual))
    return Selection(true_positives(counts(expected), counts(actual)), len(expected), len(actual))


def per_tool_correct(expected: Mapping[str, int], actual: Mapping[str, int]) -> dict[str, int]:
    """For each expected tool, how many of its expected calls were made (``min`` of the two counts)."""
    return {name: min(n, actual.get(name, 0)) for name, n in expected.items()}


def confusion_label(expected: Sequence[str], actual: Sequence[str]) -> tuple[str, str] | None:
    """(expected, called) for a case with at most one expected call; None for multi-call cases."""
    if len(expected) > 1:
        return None
    want = expected[0] if expected else NONE
    if not actual:
        return want, NONE
    if want in actual:
        return want, want
    return want, actual[0]
