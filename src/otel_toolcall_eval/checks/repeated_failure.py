"""Repeated-failure check: the same call failed before in the same way, and the agent tried it again unchanged."""

from __future__ import annotations

from otel_toolcall_eval.records import CallHistory, Outcome


def failure_key(args_key: str, outcome: Outcome, error_source: str | None, error_name: str | None) -> str | None:
    if outcome is Outcome.SUCCESS:
        return None
    return f"{args_key}\x00{outcome.value}\x00{error_source}\x00{error_name}"


def is_repeated_failure(history: CallHistory, key: str | None) -> bool:
    return key is not None and key in history.failures
