"""Which actual call answers which expected call: an optimal assignment, never first-come-first-served.

Among the expected calls of one tool and the actual calls of that tool, every pairing of the same size is
possible; the one chosen maximises, in this order, the number of pairs whose arguments pass, then the sum of
their partial closeness (``closeness``: 0 for a call that did not parse or fails its schema, else the share
of expected keys that matched, or the free-text similarity). It is a maximum-weight bipartite matching
(``scipy.optimize.linear_sum_assignment`` on the weight matrix ``w[i][j] = P + closeness`` when call j passes
expected call i, else ``closeness`` below 1, with ``P`` larger than any sum of closeness), so the verdict
does not depend on the order in which the calls were made or listed: an expected call that leaves an optional
key unconstrained never takes the call another expected call needed (greedy pairing did, BFCL parallel_136).
Among assignments that tie (identical calls, equally close failures), the caller's preferred pairs win: an
ordered alignment of the calls, so the order score (``checks.order``) never drops on an arbitrary tie.

The assignment is built only when it can change the verdict: a tool expected once and called once pairs
directly (in offline/score.py), and a first-fit pass whose every pair passes is already optimal (see
``assign``). scipy is imported on the first real assignment (it adds ~50 MiB to a process that needs none).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Collection, Sequence
from typing import TypeVar

V = TypeVar("V")


def assign(
    rows: int,
    columns: Sequence[int],
    verdict: Callable[[int, int], V],
    weight: Callable[[V], tuple[bool, float]],
    prefer: Collection[tuple[int, int]] = (),
) -> list[tuple[int, int, V]]:
    """Optimal pairs ``(row, column, verdict)`` of ``rows`` expected calls over the candidate ``columns``.

    ``verdict(i, j)`` judges expected call ``i`` against actual call ``j``; ``weight(verdict)`` is (passed,
    closeness in [0, 1]). ``min(rows, len(columns))`` pairs are returned, ordered by row. ``prefer``: pairs
    ``(row, column)`` to keep where assignments tie (equal passes and closeness, closeness compared to 1e-6),
    as many of them as an optimal assignment can hold: the calls' ordered alignment (``checks.order``), so a
    tie between identical calls never breaks an order that the arguments allow.
    """
    if not rows or not columns:
        return []
    cache: dict[tuple[int, int], V] = {}

    def judge(i: int, j: int) -> V:
        v = cache.get((i, j))
        if v is None:
            v = cache[i, j] = verdict(i, j)
        return v

    # Greedy first (the preferred pairs that pass, then each expected call takes the first free call that
    # passes it): when every pair it makes passes, no assignment has more passes, all closeness is equal and it
    # holds every preferred pair that can pass, so it is optimal and the matrix is never built. The calls made
    # in the expected order need only about one verdict per expected call.
    size = min(rows, len(columns))
    free = list(columns)
    greedy: list[tuple[int, int, V]] = []
    taken: set[int] = set()
    for i, j in prefer:
        if j in free and weight(v := judge(i, j))[0]:
            greedy.append((i, j, v))
            free.remove(j)
            taken.add(i)
    for i in range(rows):
        if len(greedy) == size:
            break
        if i in taken:
            continue
        for j in free:
            v = judge(i, j)
            if weight(v)[0]:
                greedy.append((i, j, v))
                free.remove(j)
                break
    if len(greedy) == size:
        greedy.sort(key=lambda pair: pair[0])
        return greedy
    preferred = set(prefer)
    if size == 1:  # one pair to make: the closest, a preferred one on a tie, then the first
        cells = [(i, j) for i in range(rows) for j in columns]
        best = max(cells, key=lambda c: (_quantum(weight(judge(*c))[1]), c in preferred))
        return [(best[0], best[1], judge(*best))]
    from scipy.optimize import linear_sum_assignment  # lazily: see the module docstring

    verdicts = [[judge(i, j) for j in columns] for i in range(rows)]
    big = float(size + 1)  # one more pass outweighs any sum of closeness
    tie = 1e-7 / (size + 1)  # every preferred pair together weigh less than one quantum of closeness
    matrix = [
        [_weight(weight(v), big) + (tie if (i, j) in preferred else 0.0) for j, v in zip(columns, line, strict=True)]
        for i, line in enumerate(verdicts)
    ]
    picked_rows, picked_columns = linear_sum_assignment(matrix, maximize=True)
    return [
        (int(i), columns[int(k)], verdicts[int(i)][int(k)]) for i, k in zip(picked_rows, picked_columns, strict=True)
    ]


def optimal_assignments(
    rows: Sequence[int],
    columns: Sequence[int],
    weight: Callable[[int, int], tuple[bool, float]],
    limit: int,
) -> list[list[tuple[int, int]]] | None:
    """Every assignment ``assign`` could return (the same objective: most passes, then the most closeness on its
    grid), as lists of ``(row, column)`` pairs; None when there are more than ``limit`` pairings to try.

    For the order score's definition (``checks.order.most_ordered``): among the maximum matchings, the one
    whose ordered subsequence is longest. Only small groups are enumerated (``limit``), by brute force.
    """
    size = min(len(rows), len(columns))
    if math.perm(max(len(rows), len(columns)), size) > limit:
        return None
    if len(rows) <= len(columns):
        options = (list(zip(rows, p, strict=True)) for p in itertools.permutations(columns, size))
    else:
        options = (list(zip(p, columns, strict=True)) for p in itertools.permutations(rows, size))
    best: tuple[int, int] | None = None
    out: list[list[tuple[int, int]]] = []
    for pairs in options:
        passed = close = 0
        for i, j in pairs:
            ok, closeness = weight(i, j)
            passed += ok
            close += round(_quantum(closeness) * 1e6)  # integers: the grid's sums compare exactly
        score = (passed, close)
        if best is None or score > best:
            best, out = score, [pairs]
        elif score == best:
            out.append(pairs)
    return out


def _quantum(closeness: float) -> float:
    """Closeness on a 1e-6 grid, capped below a pass: ties are exact, and a preference never outweighs a step."""
    return math.floor(min(max(closeness, 0.0), 0.999) * 1e6) / 1e6


def _weight(judged: tuple[bool, float], big: float) -> float:
    passed, closeness = judged
    return (big if passed else 0.0) + _quantum(closeness)
