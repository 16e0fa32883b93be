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
    grid), as lists of ``(row, column)`` pairs, in the order of ``itertools.permutations`` of the larger side;
    None when there are more than ``limit`` pairings to try.

    For the order score's definition (``checks.order.most_ordered``): among the maximum matchings, the one
    whose ordered subsequence is longest. Only small groups are enumerated (``limit``): depth first, each cell
    weighed once, a branch left as soon as even the best cell of every row still open cannot reach the best
    assignment found (calls whose arguments tell them apart, the usual case, leave one branch: 5 calls of one
    tool were 120 pairings weighed whole, ~5x the cost of the case's scoring in the compiled build).
    """
    size = min(len(rows), len(columns))
    if math.perm(max(len(rows), len(columns)), size) > limit:
        return None
    flip = len(rows) > len(columns)
    short, long = (columns, rows) if flip else (rows, columns)
    span = (size + 1) * 1_000_000  # one more pass outweighs any sum of closeness on the 1e-6 grid
    grid: list[list[int]] = []
    for a in short:
        line = []
        for b in long:
            ok, closeness = weight(b, a) if flip else weight(a, b)
            line.append(ok * span + round(_quantum(closeness) * 1e6))  # integers: the grid's sums compare exactly
        grid.append(line)
    rest = [0] * (size + 1)  # rest[k]: the most rows k.. could add, each taking its best cell
    for k in range(size - 1, -1, -1):
        rest[k] = rest[k + 1] + max(grid[k])
    found: list[list[int]] = []
    _walk(grid, rest, 0, 0, [False] * len(long), [], [-1], found)
    if flip:
        return [[(long[b], a) for a, b in zip(short, picks, strict=True)] for picks in found]
    return [[(a, long[b]) for a, b in zip(short, picks, strict=True)] for picks in found]


def _walk(
    grid: list[list[int]],
    rest: list[int],
    k: int,
    total: int,
    used: list[bool],
    picks: list[int],
    best: list[int],
    found: list[list[int]],
) -> None:
    """``optimal_assignments``' search: row ``k`` on, ``total`` so far; ``best[0]`` the best total found, whose
    assignments (the larger side's index per row) are in ``found``."""
    if k == len(grid):
        if total > best[0]:
            best[0] = total
            found.clear()
        if total == best[0]:
            found.append(list(picks))
        return
    if total + rest[k] < best[0]:
        return
    line = grid[k]
    for b in range(len(line)):
        if not used[b]:
            used[b] = True
            picks.append(b)
            _walk(grid, rest, k + 1, total + line[b], used, picks, best, found)
            picks.pop()
            used[b] = False


def _quantum(closeness: float) -> float:
    """Closeness on a 1e-6 grid, capped below a pass: ties are exact, and a preference never outweighs a step."""
    return math.floor(min(max(closeness, 0.0), 0.999) * 1e6) / 1e6


def _weight(judged: tuple[bool, float], big: float) -> float:
    passed, closeness = judged
    return (big if passed else 0.0) + _quantum(closeness)
