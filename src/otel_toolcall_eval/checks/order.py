"""Where in the sequence: two order scores over the tool names, E expected and A actual.

    edit distance  d     = Levenshtein(E, A) / max(|E|, |A|)            (0.0 when both are empty)
    order score    s     = 2 k / (|E| + |A|)                             (1.0 when both are empty)

where k is the length of the longest ordered subsequence of matched pairs: calls are matched by name, and of
all matchings the one whose pairs keep the most calls in the same relative order counts, which is the
longest common subsequence of the two name sequences. One inserted or skipped call lowers s by about
``2 / (|E| + |A|)`` instead of shifting every later position, as a strict positional comparison would; a retry
loop (the same call repeated) lowers it once per repeat, while set comparison cannot see it at all.

Calls of one parallel batch are compared as a set: before scoring, the members of each batch (on either side)
are arranged in the order that agrees with the other side, so a batch's internal order never costs anything.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rapidfuzz.distance import LCSseq, Levenshtein


@dataclass(slots=True, frozen=True)
class OrderScore:
    score: float  # 2k / (|E| + |A|)
    edit_distance: float  # Levenshtein / max length
    exact: bool  # the sequences agree (batches as sets)


EXACT = OrderScore(1.0, 0.0, True)


def order_score(
    expected: Sequence[str],
    actual: Sequence[str],
    expected_batches: Sequence[int | None] | None = None,
    actual_batches: Sequence[int | None] | None = None,
) -> OrderScore:
    """Both scores of ``actual`` against ``expected``; batches are per-call batch numbers (None: its own turn)."""
    if expected_batches is not None and any(b is not None for b in expected_batches):
        expected = arrange_batches(expected, expected_batches, actual)
    if actual_batches is not None and any(b is not None for b in actual_batches):
        actual = arrange_batches(actual, actual_batches, expected)
    n, m = len(expected), len(actual)
    if n == m and list(expected) == list(actual):
        return EXACT
    if not n or not m:
        return OrderScore(0.0, 1.0, False)
    k = LCSseq.similarity(expected, actual)
    distance = Levenshtein.distance(expected, actual)
    return OrderScore(2.0 * k / (n + m), distance / max(n, m), False)


def arrange_batches(names: Sequence[str], batches: Sequence[int | None], other: Sequence[str]) -> list[str]:
    """``names`` with each batch's members sorted by where they occur in ``other`` (unknown ones last, stable).

    A batch sits where its first member was; members of a batch need not be adjacent.
    """
    positions: dict[str, list[int]] = {}
    for i, name in enumerate(other):
        positions.setdefault(name, []).append(i)
    groups: list[list[str]] = []
    by_batch: dict[int, list[str]] = {}
    for name, batch in zip(names, batches, strict=True):
        if batch is None:
            groups.append([name])
            continue
        group = by_batch.get(batch)
        if group is None:
            group = by_batch[batch] = []
            groups.append(group)
        group.append(name)
    out: list[str] = []
    far = len(other)
    for group in groups:
        if len(group) == 1:
            out.append(group[0])
            continue
        seen: dict[str, int] = {}
        keyed = []
        for name in group:
            nth = seen.get(name, 0)
            seen[name] = nth + 1
            found = positions.get(name, ())
            keyed.append((found[nth] if nth < len(found) else far, name))
        keyed.sort(key=lambda item: item[0])
        out.extend(name for _, name in keyed)
    return out
