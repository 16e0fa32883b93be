"""Duplicate-call check: an earlier call in the trace was the same tool with the same normalised arguments.

A retry that corrected its arguments has a different key and is not a duplicate.
"""

from __future__ import annotations

from otel_toolcall_eval.records import CallHistory


def is_duplicate(history: CallHistory, call: bytes) -> bool:
    """``call``: the digest (``records.call_digest``) of this call's ``checks.normalize.arguments_key``."""
    return call in history.seen_calls
