"""Required-step-order check: tool X must have succeeded in an earlier turn before any of tools [Y, Z].

Parallel calls of one model turn are not a sequence, so a prerequisite issued in the same batch does not count.
"""

from __future__ import annotations

from collections.abc import Sequence

from otel_toolcall_eval.policy import RequiredStep
from otel_toolcall_eval.records import CallHistory


def succeeded_before(history: CallHistory, tool: str, batch: int | None) -> bool:
    """A success of ``tool`` in an earlier turn (or, turns unknown, any earlier success)."""
    succeeded = history.succeeded
    if tool not in succeeded:
        return False
    earliest = succeeded[tool]  # the earliest turn it succeeded in (``CallHistory.succeeded``)
    return batch is None or earliest is None or earliest < batch


def missing_required_steps(
    history: CallHistory, name: str, batch: int | None, rules: Sequence[RequiredStep]
) -> list[str]:
    missing = []
    for rule in rules:
        if name in rule.before and not succeeded_before(history, rule.tool, batch):
            missing.append(f"missing_required_step:{rule.tool}")
    return missing
