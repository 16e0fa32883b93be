"""Error classification: ``malformed_call`` (a model or prompt bug) versus ``execution_failed`` (infrastructure).

Evidence is read in order of how directly it blames the call: the arguments themselves (parse, unknown
tool, schema), then a tool that rejected its input, then any recorded failure, then an empty result.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from otel_toolcall_eval.records import ErrorEvidence, Outcome


def _short(type_name: str) -> str:
    return type_name.rsplit(".", 1)[-1]


def classify_outcome(
    *,
    parse_ok: bool | None,
    tool_known: bool | None,
    schema_valid: bool | None,
    error: ErrorEvidence,
    result: Any,
    result_recorded: bool,
    input_error_types: Collection[str],
    empty_results: Collection[str],
) -> tuple[Outcome, str | None]:
    """Return the outcome and the evidence that decided it (None for success)."""
    if parse_ok is False:
        return Outcome.MALFORMED_CALL, "parse"
    if tool_known is False:
        return Outcome.MALFORMED_CALL, "unknown_tool"
    if schema_valid is False:
        return Outcome.MALFORMED_CALL, "schema"
    if error.retry_cause is not None:
        return Outcome.MALFORMED_CALL, "input_rejected"
    for name in (error.exception_type, error.error_type):
        if name and _short(name) in input_error_types:
            return Outcome.MALFORMED_CALL, "input_rejected"
    if error.exception_type:
        return Outcome.EXECUTION_FAILED, "exception"
    if error.error_type:
        return Outcome.EXECUTION_FAILED, "error.type"
    if error.status_error:
        return Outcome.EXECUTION_FAILED, "status"
    if result_recorded and _is_empty(result, empty_results):
        return Outcome.EMPTY_RESULT, "result_text"
    return Outcome.SUCCESS, None


def _is_empty(result: Any, empty_results: Collection[str]) -> bool:
    if result is None:
        return True
    if isinstance(result, str):
        return result.strip() in empty_results
    if isinstance(result, (list, tuple, dict)):
        return len(result) == 0
    return False
