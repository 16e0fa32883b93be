"""Whether to call a tool at all: unnecessary calls, reported as a pair with missed calls.

Per case, with TP the multiset overlap of expected and actual names (``checks.selection``):

    unnecessary calls      = |A| - TP              (calls that match no expected call)

Over cases (each a rate of cases, so one chatty case cannot outweigh many quiet ones):

    unnecessary-call rate  = #(no-tool cases with |A| > 0) / #(no-tool cases)
    missed-call rate       = #(tool cases with |A| = 0)    / #(tool cases)

A no-tool case is one marked ``expected_no_tool``. The two rates are the two errors of one decision: an agent
that never calls a tool scores a perfect unnecessary-call rate, which is why the rate is never shown alone.
"""

from __future__ import annotations


def unnecessary_calls(actual: int, true_positives: int) -> int:
    return actual - true_positives


def made_unnecessary_call(expected_no_tool: bool, actual: int) -> bool:
    """A call where the right behaviour was none."""
    return expected_no_tool and actual > 0


def missed_all_calls(expected_no_tool: bool, actual: int) -> bool:
    """No call where at least one was needed."""
    return not expected_no_tool and actual == 0


def rate(hits: int, cases: int) -> float | None:
    """None when there are no cases to measure, never a vacuous 0.0."""
    return hits / cases if cases else None
