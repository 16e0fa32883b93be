"""The config's trajectory policies on a run line, as reasons for the report and the gate.

The engine (``engine.Scorer.score``) judges them, call by call, exactly as it does for a trace: the runner feeds
the line's calls through it (a ``batch`` label is a model turn, in the order labels first appear; a recorded
``error`` is error evidence on every call, so none counts as succeeded). This module only reads the violations
off the calls' scores and words them. ``must_not_call`` stays apart (``score.py``): its own count and gate check.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from otel_toolcall_eval.checks.destructive import VIOLATION as DESTRUCTIVE
from otel_toolcall_eval.checks.must_not_call import VIOLATION as MUST_NOT_CALL
from otel_toolcall_eval.records import CallScore

OVER_BUDGET = "over_budget"
REQUIRED_STEP = "missing_required_step:"  # the prefix ``checks.required_steps`` words its violations with
MAX_CALLS_LISTED = 5  # per reason
_RUN_FAILED = "; the run recorded an error, so no call counts as succeeded"


class PolicyViolation(NamedTuple):
    """One broken policy: the violation as online (``missing_required_step:<tool>``, ``unconfirmed_destructive``,
    an argument rule's name, ``over_budget``), the call that broke it (1-based) and, for the budget, the budget."""

    violation: str
    tool: str | None  # None for over_budget: the case broke it, not one call
    call: int  # the call's position; for over_budget, the number of calls
    budget: int | None = None


def policy_reasons(violations: Sequence[PolicyViolation], *, run_failed: bool = False) -> list[str]:
    """One reason per (violation, tool), naming its calls: ``policy: missing_required_step:authenticate
    (send_email, call 2)``; a tool that broke the same rule on many calls lists the first few. After a run
    error an ordering rule says why its prerequisite did not count."""
    calls: dict[tuple[str, str | None], list[int]] = {}
    budget: dict[tuple[str, str | None], int | None] = {}
    for v in violations:
        key = (v.violation, v.tool)
        calls.setdefault(key, []).append(v.call)
        budget[key] = v.budget
    out = []
    for (violation, tool), positions in calls.items():
        if tool is None:
            out.append(f"policy: {violation} ({positions[0]} calls, budget {budget[(violation, tool)]})")
            continue
        listed = ", ".join(str(p) for p in positions[:MAX_CALLS_LISTED])
        more = f" and {len(positions) - MAX_CALLS_LISTED} more" if len(positions) > MAX_CALLS_LISTED else ""
        why = _RUN_FAILED if run_failed and _is_ordering(violation) else ""
        out.append(f"policy: {violation} ({tool}, call{'s' if len(positions) > 1 else ''} {listed}{more}{why})")
    return out


def policy_violations_of(scores: Sequence[CallScore], step_budget: int | None) -> list[PolicyViolation]:
    """Every policy violation of one run line's scored calls, in call order (the budget last)."""
    out: list[PolicyViolation] = []
    for score in scores:
        for v in score.violations:
            if v != MUST_NOT_CALL:
                out.append(PolicyViolation(v, score.name, score.step))
    if step_budget is not None and any(s.over_budget for s in scores):  # the trace's verdict online (engine)
        out.append(PolicyViolation(OVER_BUDGET, None, len(scores), step_budget))
    return out


def _is_ordering(violation: str) -> bool:
    """A rule that needs an earlier success (``checks.required_steps``, ``checks.destructive``)."""
    return violation == DESTRUCTIVE or violation.startswith(REQUIRED_STEP)
