"""Required-step-order check: tool X must have succeeded in an earlier turn before any of tools [Y, Z].

Parallel calls of one model turn are not a sequence, so a prerequisite issued in the same batch does not count.
"""

from __future__ import annotations

from collections.abc import Sequence

from otel_toolcall_eval.policy import RequiredStep
from otel_toolcall_eval.records import CallHistory


def succeeded_before(history: CallHistory, tool: str, batch: int | None) -> bool:
    """A success of ``tool`` in an earlier turn (or, turns unknown, any earlier success)."""
    batches = history.succeeded.get(tool)
    if not batches:
        return False
    if batch is None:
        return True
    for b in batches:  # noqa: SIM110 - a plain loop: no generator frame on the hot path
        if b is None or b < batch:
            return True
    return False


def missing_required_steps(
    history: CallHistory, name: str, batch: int | None, rules: Sequence[RequiredStep]
) -> list[str]:
    missing = []
    for rule in rules:
        if name in rule.before and not succeeded_before(history, rule.tool, batch):
            missing.append(f"missing_required_step:{rule.tool}")
    return missing
