"""Repeated-failure check: the same call failed before in the same way, and the agent tried it again unchanged."""

from __future__ import annotations

from otel_toolcall_eval.records import CallHistory, Outcome, call_digest


def failure_key(args_key: str, outcome: Outcome, error_source: str | None, error_name: str | None) -> str | None:
    """What makes two failures the same: the normalised call, the outcome, its evidence and the error's name."""
    if outcome is Outcome.SUCCESS:
        return None
    return f"{args_key}\x00{outcome.value}\x00{error_source}\x00{error_name}"


def failure_digest(args_key: str, outcome: Outcome, error_source: str | None, error_name: str | None) -> bytes | None:
    key = failure_key(args_key, outcome, error_source, error_name)
    return None if key is None else call_digest(key)


def is_repeated_failure(history: CallHistory, failure: bytes | None) -> bool:
    """``failure``: this call's ``failure_digest``; the history keeps those of earlier failures."""
    failures = history.failures
    return failure is not None and failures is not None and failure in failures
