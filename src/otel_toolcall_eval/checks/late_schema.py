"""Schemas that arrive late: calls scored before their tool's schema was known, validated when it arrives.

Some instrumentations record the tool definitions only on a span that ends after every tool span: Semantic Kernel's
root ``invoke_agent`` (its only definitions), google-genai's ``generate_content`` around its automatic-function-
calling loop. By then the tool spans went out without a schema verdict, though their arguments were recorded. So
such a call's arguments wait in the trace's state (``WaitingCall``; bounded in calls and in bytes of argument text
per trace, ``online.trace_state.WAITING_BYTES``: past it a call is not validated late) and are validated
when a span brings its tool's schema, against that schema, as the call would have been had the schema come first.
The verdicts go on the trace's root (``trace.late_schema.*``) and into its verdict: an invalid call fails
``trace.correct``, and counts as a ``schema_invalid`` violation of its tool.

Pure functions over plain records: the online trace state keeps the waiting calls, and replay, which runs the same
processor, gets the same verdicts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from otel_toolcall_eval.checks.schema import ValidatorCache, validate_with, validator_for
from otel_toolcall_eval.records import CallScore, LateSchemaVerdict, ToolDefinition


@dataclass(slots=True, frozen=True)
class WaitingCall:
    """A call whose arguments were recorded while no schema of its tool was known."""

    step: int
    name: str
    arguments: dict[str, Any]


def waits_for_schema(score: CallScore) -> bool:
    """The call recorded arguments (parsed to an object) but no schema was known for its tool, neither from the trace
    nor from the config; a tool known to be missing (``tool_known`` False) has none to wait for."""
    return score.arguments is not None and score.schema_source is None and score.tool_known is not False


def validate_waiting(
    waiting: list[WaitingCall],
    tools: Mapping[str, ToolDefinition],
    cache: ValidatorCache,
    verdict: LateSchemaVerdict | None,
    *,
    max_errors: int = 3,
    max_length: int = 256,
) -> tuple[list[WaitingCall], LateSchemaVerdict | None]:
    """Validate every waiting call whose tool now has a schema (a bare name, or a schema that does not compile, keeps
    it waiting); returns the calls still waiting and ``verdict`` with the new verdicts added in step order."""
    still: list[WaitingCall] = []
    checked: list[int] = []
    invalid: list[tuple[int, str, str]] = []
    for call in waiting:
        definition = tools.get(call.name)
        validator = validator_for(definition, cache) if definition is not None else None
        if validator is None:
            still.append(call)
            continue
        checked.append(call.step)
        result = validate_with(validator, call.arguments, max_errors, max_length)
        if not result.valid:
            first = result.errors[0] if result.errors else "invalid"
            invalid.append((call.step, call.name, f"{call.name}: {first}"[:max_length]))
    if not checked:
        return still, verdict
    before = verdict if verdict is not None else LateSchemaVerdict()
    rows = sorted([*zip(before.invalid_steps, before.invalid_tools, before.errors, strict=True), *invalid])
    return still, LateSchemaVerdict(
        tuple(sorted((*before.checked_steps, *checked))),
        tuple(step for step, _, _ in rows),
        tuple(tool for _, tool, _ in rows),
        tuple(error for _, _, error in rows),
    )
