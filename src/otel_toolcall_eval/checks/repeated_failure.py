"""Repeated-failure check: the same call failed before in the same way, and the agent tried it again unchanged."""

from __future__ import annotations

from otel_toolcall_eval.records import CallHistory, CallScore, Outcome, call_digest


def failure_key(score: CallScore, args_key: str) -> str | None:
    """What makes two failures the same: the normalised call, the outcome, its evidence and the error's name."""
    if score.outcome is Outcome.SUCCESS:
        return None
    return f"{args_key}\x00{score.outcome.value}\x00{score.error_source}\x00{score.error_name}"


def failure_digest(score: CallScore, args_key: str) -> bytes | None:
    key = failure_key(score, args_key)
    return None if key is None else call_digest(key)


def is_repeated_failure(history: CallHistory, failure: bytes | None) -> bool:
    """``failure``: this call's ``failure_digest``; the history keeps those of earlier failures."""
    return failure is not None and failure in history.failures
