"""Must-not-call check: hard-fail semantics, one call of a forbidden tool fails the whole trace."""

from __future__ import annotations

from collections.abc import Collection

VIOLATION = "must_not_call"


def must_not_call_violation(name: str, forbidden: Collection[str]) -> str | None:
    return VIOLATION if name in forbidden else None
