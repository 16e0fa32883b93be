"""Step-budget check: the trace made more tool calls than the configured budget."""

from __future__ import annotations


def over_budget(step: int, budget: int | None) -> bool | None:
    """None when no budget is configured."""
    if budget is None:
        return None
    return step > budget
