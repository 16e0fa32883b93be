"""Repeated-failure check: the same call failed before in the same way, and the agent tried it again unchanged."""

from __future__ import annotations

from hashlib import blake2b

from otel_toolcall_eval.records import CallHistory, Outcome

_OUTCOME_TEXT: dict[Outcome, str] = {o: o.value for o in Outcome}  # ``Enum.value`` is a Python-level property


def failure_digest(call: bytes, outcome: Outcome, error_source: str | None, error_name: str | None) -> bytes | None:
    """What makes two failures the same: the normalised call (``call``: its ``records.call_digest``), the outcome,
    its evidence and the error's name, as 16 bytes; None for a success. Built on the call's digest, not its
    normalised text, so a failed call is hashed over a few dozen bytes whatever the size of its arguments."""
    if outcome is Outcome.SUCCESS:
        return None
    rest = f"\x00{_OUTCOME_TEXT[outcome]}\x00{error_source}\x00{error_name}".encode("utf-8", "surrogatepass")
    return blake2b(call + rest, digest_size=16).digest()


def is_repeated_failure(history: CallHistory, failure: bytes | None) -> bool:
    """``failure``: this call's ``failure_digest``; the history keeps those of earlier failures."""
    return failure is not None and failure in history.failures
