"""Where in the sequence: two order scores, E expected and A actual calls.

    edit distance  d     = Levenshtein(E, A) / max(|E|, |A|)  over the tool names   (0.0 when both are empty)
    order score    s     = 2 k / (|E| + |A|)                                          (1.0 when both are empty)

k is T-Eval's: match first, then order. The calls are matched (``checks.pairing``: each expected call with a
call of its tool, an optimal assignment by their arguments, so two calls of one tool with swapped arguments
are paired across); k is the length of the longest subsequence of those pairs that is in order on both sides
(the longest increasing subsequence of the actual positions, the pairs taken in expected order). Ties between
equally good assignments (identical calls, a retry) are settled towards order: among them the one whose
ordered subsequence is longest (``most_ordered``: T-Eval's definition, k over the maximum matching that
maximises it), so k equals the longest common subsequence of the names unless the arguments force a pair out
of order. Beyond a budget of combinations, the tie goes to the assignment that keeps the most pairs of one
ordered alignment of the names (a longest common subsequence, ``aligned_pairs``), which can fall short of it. One
inserted or skipped call lowers s by about ``2 / (|E| + |A|)`` instead of shifting every later position, as a
strict positional comparison would; a retry loop (the same call repeated) lowers it once per repeat, while set
comparison cannot see it at all.

Calls of one parallel batch are compared as a set, on either side: positions are turns (one per batch, a call
without a batch a turn of its own), pairs are taken in (expected turn, actual turn) order and k is the longest
subsequence whose actual turns never decrease, so a batch's internal order never costs anything. For the edit
distance and the alignment, each batch's members are arranged in the order that agrees with the other side.
"""

from __future__ import annotations

import importlib
import itertools
from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(slots=True, frozen=True)
class OrderScore:
    score: float  # 2k / (|E| + |A|)
    edit_distance: float  # Levenshtein / max length
    exact: bool  # the sequences agree (batches as sets)


EXACT = OrderScore(1.0, 0.0, True)

_distance: Any = None  # rapidfuzz.distance, once imported


def _rapidfuzz() -> Any:
    """``rapidfuzz.distance`` (the offline extra), imported at first use: the processor's config reaches this
    module, and the core install has no rapidfuzz. Kept in a global: a ``from rapidfuzz.distance import ...`` in
    the scoring functions ran importlib's ``_handle_fromlist`` (Python, interpreted in the compiled build too)
    on every call, not a dict lookup."""
    global _distance
    if _distance is None:
        _distance = importlib.import_module("rapidfuzz.distance")
    return _distance


def order_score(
    expected: Sequence[str],
    actual: Sequence[str],
    expected_batches: Sequence[int | None] | None = None,
    actual_batches: Sequence[int | None] | None = None,
) -> OrderScore:
    """Both scores of ``actual`` against ``expected`` when calls pair by name alone (k: the LCS of the names);
    batches are per-call batch numbers (None: its own turn)."""
    if expected_batches is not None and any(b is not None for b in expected_batches):
        expected = arrange_batches(expected, expected_batches, actual)
    if actual_batches is not None and any(b is not None for b in actual_batches):
        actual = arrange_batches(actual, actual_batches, expected)
    n, m = len(expected), len(actual)
    if n == m and list(expected) == list(actual):
        return EXACT
    if not n or not m:
        return OrderScore(0.0, 1.0, False)
    distances = _rapidfuzz()
    k = distances.LCSseq.similarity(expected, actual)
    distance = distances.Levenshtein.distance(expected, actual)
    return OrderScore(2.0 * k / (n + m), distance / max(n, m), False)


def pair_order_score(
    pairs: Sequence[tuple[int, int]],
    expected: Sequence[str],
    actual: Sequence[str],
    expected_batches: Sequence[int | None] | None = None,
    actual_batches: Sequence[int | None] | None = None,
) -> OrderScore:
    """Both scores of ``actual`` against ``expected`` over matched ``pairs`` (expected position, actual
    position), T-Eval's way (see the module docstring)."""
    n, m = len(expected), len(actual)
    if not n or not m:
        return EXACT if n == m else OrderScore(0.0, 1.0, False)
    e_turn = turn_index(n, expected_batches)
    a_turn = turn_index(m, actual_batches)
    k = ordered_length(pairs, e_turn, a_turn)
    if k == n == m:
        return EXACT
    e_names = arrange_batches(expected, expected_batches, actual) if expected_batches else expected
    a_names = arrange_batches(actual, actual_batches, expected) if actual_batches else actual
    distance = _rapidfuzz().Levenshtein.distance(e_names, a_names)
    return OrderScore(2.0 * k / (n + m), distance / max(n, m), False)


def ordered_length(pairs: Iterable[tuple[int, int]], e_turn: Sequence[int], a_turn: Sequence[int]) -> int:
    """k: the longest subsequence of ``pairs`` in order on both sides (turns, so a batch is a set)."""
    ordered = sorted((e_turn[i], a_turn[j]) for i, j in pairs)
    tails: list[int] = []  # longest non-decreasing subsequence of the actual turns (patience sorting)
    for _, t in ordered:
        at = bisect_right(tails, t)
        if at == len(tails):
            tails.append(t)
        else:
            tails[at] = t
    return len(tails)


def most_ordered(
    fixed: Sequence[tuple[int, int]],
    choices: Sequence[Sequence[Sequence[tuple[int, int]]]],
    e_turn: Sequence[int],
    a_turn: Sequence[int],
    goal: int,
    budget: int = 20_000,
) -> tuple[int, list[tuple[int, int]]] | None:
    """The order score's definition: among the maximum matchings, the one with the longest ordered subsequence.

    ``fixed``: the pairs every maximum matching has (a tool expected once and called once); ``choices``: per
    tool paired by assignment, its maximum matchings (``checks.pairing.optimal_assignments``). Returns (k, the
    chosen tools' pairs), stopping early at ``goal`` (the names' LCS, which k never exceeds); None when the
    combinations are more than ``budget`` (the caller keeps its tie-break towards an alignment of the names).
    """
    total = 1
    for options in choices:
        total *= len(options)
        if total > budget:
            return None
    best_k, best = -1, []
    for combo in itertools.product(*choices):
        chosen = [pair for pairs in combo for pair in pairs]
        k = ordered_length([*fixed, *chosen], e_turn, a_turn)
        if k > best_k:
            best_k, best = k, chosen
            if k >= goal:
                break
    return best_k, best


def aligned_pairs(
    expected: Sequence[str],
    actual: Sequence[str],
    expected_batches: Sequence[int | None] | None = None,
    actual_batches: Sequence[int | None] | None = None,
) -> set[tuple[int, int]]:
    """One longest ordered alignment of the names, as (expected position, actual position) pairs: what
    ``checks.pairing`` keeps where assignments tie."""
    e_order = arrangement(expected, expected_batches, actual) if expected_batches else list(range(len(expected)))
    a_order = arrangement(actual, actual_batches, expected) if actual_batches else list(range(len(actual)))
    e_names = [expected[i] for i in e_order]
    a_names = [actual[j] for j in a_order]
    out: set[tuple[int, int]] = set()
    for block in _rapidfuzz().LCSseq.editops(e_names, a_names).as_matching_blocks():
        for d in range(block.size):
            out.add((e_order[block.a + d], a_order[block.b + d]))
    return out


def turn_index(n: int, batches: Sequence[int | None] | None) -> list[int]:
    """Each call's turn: one per batch label, numbered in the order labels first appear; None a turn alone."""
    if batches is None:
        return list(range(n))
    out: list[int] = []
    seen: dict[int, int] = {}
    turn = -1
    for label in batches:
        if label is None:
            turn += 1
            out.append(turn)
            continue
        known = seen.get(label)
        if known is None:
            turn += 1
            known = seen[label] = turn
        out.append(known)
    return out


def arrange_batches(names: Sequence[str], batches: Sequence[int | None], other: Sequence[str]) -> list[str]:
    """``names`` with each batch's members sorted by where they occur in ``other`` (unknown ones last, stable).

    A batch sits where its first member was; members of a batch need not be adjacent.
    """
    return [names[i] for i in arrangement(names, batches, other)]


def turns(n: int, labels: Sequence[int | None] | None) -> list[list[int]]:
    """Call positions grouped into turns: one per batch label, in the order labels first appear; None alone."""
    if labels is None:
        return [[i] for i in range(n)]
    out: list[list[int]] = []
    by_label: dict[int, list[int]] = {}
    for i, label in enumerate(labels):
        if label is None:
            out.append([i])
            continue
        group = by_label.get(label)
        if group is None:
            group = by_label[label] = []
            out.append(group)
        group.append(i)
    return out


def arrangement(names: Sequence[str], batches: Sequence[int | None], other: Sequence[str]) -> list[int]:
    """The positions of ``names`` in the order ``arrange_batches`` puts them."""
    positions: dict[str, list[int]] = {}
    for i, name in enumerate(other):
        positions.setdefault(name, []).append(i)
    groups = turns(len(batches), batches)
    out: list[int] = []
    far = len(other)
    for group in groups:
        if len(group) == 1:
            out.append(group[0])
            continue
        seen: dict[str, int] = {}
        keyed = []
        for i in group:
            name = names[i]
            nth = seen.get(name, 0)
            seen[name] = nth + 1
            found = positions.get(name, ())
            keyed.append((found[nth] if nth < len(found) else far, i))
        keyed.sort(key=lambda item: item[0])
        out.extend(i for _, i in keyed)
    return out
