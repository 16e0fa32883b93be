"""Trajectory match modes, as LangSmith's agentevals defines them: one yes/no verdict per case over the calls.

``mode`` says how the actual calls must relate to the expected ones (agentevals' ``trajectory_match_mode``):

- ``strict``: the same turns in the same order, each turn the same calls (a turn's calls, one parallel batch,
  compared as a set: agentevals compares the tool calls of one assistant message in any order);
- ``unordered``: the same calls, in any order;
- ``subset``: every actual call is one of the expected calls (nothing beyond them; some may be missing);
- ``superset``: every expected call was made (extra calls allowed);
- ``in_order``: every expected turn was made, in the expected order, extra calls allowed before, between and
  after (agentevals-dev's and Google ADK's ``IN_ORDER``: the expected calls are a subsequence of the actual
  ones); a turn's calls, one parallel batch, in any order among themselves.

Two calls are "the same call" when they call the same tool and their arguments match under the tool's argument
mode (agentevals' ``tool_args_match_mode`` and its per-tool overrides), always seen from the actual call:

- ``exact``: the same keys, every value equal;
- ``ignore``: any arguments;
- ``subset``: every actual argument is an expected one with an equal value (actual keys within the expected);
- ``superset``: every expected argument is there with an equal value (extra actual keys allowed).

"Equal" is the offline argument normalisation (``arguments.*``: case, whitespace, dates, ID prefixes, numeric
strings, null vs absent; configure it all off for agentevals' plain ``==``). Per-argument alternatives count:
an ``arg_options`` key matches any of its values, an ``optional_args`` key may be absent, an ``exact_args`` key
compares without normalisation. Nested objects and arrays compare whole (agentevals compares each top-level
value with ``==``), as JSON values: ``{"a": true}`` is not ``{"a": 1}``, where Python's ``==`` says it is.
A call whose arguments did not parse matches only under ``ignore``.

Each call is used once: a mode holds when a matching exists (per tool, and per turn for ``strict``) that
covers what the mode requires, found as a maximum bipartite matching (``checks.pairing.assign``). agentevals
takes the first fitting call instead, so with a non-symmetric argument mode it can miss a matching that exists
and answer no where this answers yes; it also applies the argument mode the other way round in the second
pass of ``unordered`` and in ``subset``, which this does not (the direction its README documents, everywhere).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, Literal

from otel_toolcall_eval.checks.argument_match import ABSENT, Normalizer, under
from otel_toolcall_eval.checks.order import turns
from otel_toolcall_eval.checks.pairing import assign
from otel_toolcall_eval.checks.schema_at import SchemaAt

TrajectoryMode = Literal["strict", "unordered", "subset", "superset", "in_order"]
ArgsMode = Literal["exact", "ignore", "subset", "superset"]
TRAJECTORY_MODES: tuple[str, ...] = ("strict", "unordered", "subset", "superset", "in_order")
ARGS_MODES: tuple[str, ...] = ("exact", "ignore", "subset", "superset")


def arguments_match(
    mode: str,
    expected: Mapping[str, Any],
    actual: Mapping[str, Any] | None,
    normalizer: Normalizer,
    *,
    options: Mapping[str, Sequence[Any]] | None = None,
    optional: Collection[str] = (),
    exact_case: Collection[str] = (),
    exact: Collection[str] = (),
    schema: SchemaAt | Mapping[str, Any] | None = None,
) -> bool:
    """Do ``actual`` arguments match ``expected`` under an argument ``mode``? ``actual`` None: did not parse.
    ``schema``: the tool's parameters schema (where it says number, ``1`` is ``1.0``)."""
    if mode == "ignore":
        return True
    if actual is None:
        return False
    opts = options or {}
    top = schema if schema is None or isinstance(schema, SchemaAt) else SchemaAt.of(schema)

    def equal(key: str, want: Any, got: Any) -> bool:
        at = under(top, key, want, got)
        if key in exact:
            return normalizer.exact_equal(want, got, at)
        return normalizer.equal(want, got, False, key not in exact_case, at)

    if mode != "subset":  # exact, superset: every expected argument is there, equal
        for key, want in expected.items():
            got = actual.get(key, ABSENT)
            if key in optional and normalizer.absent(got):
                continue
            if not equal(key, want, got):
                return False
        for key, values in opts.items():
            got = actual.get(key, ABSENT)
            if key in optional and normalizer.absent(got):
                continue
            if not any(equal(key, v, got) for v in values):
                return False
    if mode != "superset":  # exact, subset: every actual argument is an expected one, equal
        for key, got in actual.items():
            if normalizer.absent(got):
                continue
            if key in expected:
                if mode == "subset" and not equal(key, expected[key], got):
                    return False
            elif key in opts:
                if mode == "subset" and not any(equal(key, v, got) for v in opts[key]):
                    return False
            else:
                return False
    return True


def trajectory_match(
    mode: str,
    expected_names: Sequence[str],
    actual_names: Sequence[str],
    same: Callable[[int, int], bool],
    expected_turns: Sequence[int | None] | None = None,
    actual_turns: Sequence[int | None] | None = None,
) -> bool:
    """Does the trajectory match under ``mode``? ``same(i, j)``: expected call i and actual call j (of the same
    tool) have matching arguments; turns are per-call batch labels (None: a turn of its own) for ``strict``."""
    if mode == "strict":
        e_turns = turns(len(expected_names), expected_turns)
        a_turns = turns(len(actual_names), actual_turns)
        if len(e_turns) != len(a_turns):
            return False
        return all(
            _covered(e, a, expected_names, actual_names, same, True, True)
            for e, a in zip(e_turns, a_turns, strict=True)
        )
    if mode == "in_order":
        return _in_order(turns(len(expected_names), expected_turns), expected_names, actual_names, same)
    rows, columns = range(len(expected_names)), range(len(actual_names))
    need_expected = mode in ("unordered", "superset")
    need_actual = mode in ("unordered", "subset")
    return _covered(rows, columns, expected_names, actual_names, same, need_expected, need_actual)


def _in_order(
    e_turns: list[list[int]],
    expected_names: Sequence[str],
    actual_names: Sequence[str],
    same: Callable[[int, int], bool],
) -> bool:
    """Is there an increasing placement of the expected turns among the actual calls: each turn covered by calls
    after every call used by the turn before? Greedy is exact: a turn placed in the shortest window that covers
    it leaves the longest rest for the turns after it (whatever the argument mode)."""
    start, n = 0, len(actual_names)
    for turn in e_turns:
        if len(turn) == 1:  # the usual turn, one call: the first fitting call after the turn before
            (i,) = turn
            name = expected_names[i]
            j = next((j for j in range(start, n) if actual_names[j] == name and same(i, j)), None)
            if j is None:
                return False
            start = j + 1
            continue
        need: dict[str, int] = {}
        for i in turn:
            need[expected_names[i]] = need.get(expected_names[i], 0) + 1
        seen: dict[str, int] = {}
        end = start
        while True:
            if end >= n:
                return False
            name = actual_names[end]
            end += 1
            if name not in need:
                continue
            seen[name] = seen.get(name, 0) + 1
            # the window can only cover the turn once it holds enough calls of each of its tools
            if all(seen.get(t, 0) >= k for t, k in need.items()) and _covered(
                turn, range(start, end), expected_names, actual_names, same, True, False
            ):
                break
        start = end
    return True


def _covered(
    rows: Sequence[int],
    columns: Sequence[int],
    expected_names: Sequence[str],
    actual_names: Sequence[str],
    same: Callable[[int, int], bool],
    need_expected: bool,
    need_actual: bool,
) -> bool:
    """Is there a one-to-one matching, within each tool, that covers every row (``need_expected``) and every
    column (``need_actual``)? Per tool, that is a maximum matching of that size."""
    by_tool_rows: dict[str, list[int]] = {}
    for i in rows:
        by_tool_rows.setdefault(expected_names[i], []).append(i)
    by_tool_columns: dict[str, list[int]] = {}
    for j in columns:
        by_tool_columns.setdefault(actual_names[j], []).append(j)
    if need_expected and any(t not in by_tool_columns for t in by_tool_rows):
        return False
    if need_actual and any(t not in by_tool_rows for t in by_tool_columns):
        return False
    for tool, tool_rows in by_tool_rows.items():
        tool_columns = by_tool_columns.get(tool)
        if tool_columns is None:
            continue
        if need_expected and len(tool_columns) < len(tool_rows):
            return False
        if need_actual and len(tool_rows) < len(tool_columns):
            return False

        def verdict(i: int, j: int, tool_rows: list[int] = tool_rows) -> bool:
            return same(tool_rows[i], j)

        pairs = assign(len(tool_rows), tool_columns, verdict, _weight)
        matched = sum(1 for _, _, ok in pairs if ok)
        if need_expected and matched < len(tool_rows):
            return False
        if need_actual and matched < len(tool_columns):
            return False
    return True


def _weight(ok: bool) -> tuple[bool, float]:
    return ok, 0.0
