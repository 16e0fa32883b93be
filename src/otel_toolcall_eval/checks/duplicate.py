"""Duplicate-call check: an earlier call in the trace was the same tool with the same normalised arguments.

A retry that corrected its arguments has a different key and is not a duplicate.
"""

from __future__ import annotations

from otel_toolcall_eval.records import CallHistory


def is_duplicate(history: CallHistory, args_key: str) -> bool:
    return args_key in history.seen_calls
