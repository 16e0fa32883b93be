"""One deadline for ``force_flush(T)`` and ``shutdown(T)``, shared by every stage they wait for.

The queue, the judge and the downstream processors each used to receive the whole timeout, so
``force_flush(3000)`` could take 6 s. A ``Deadline`` is computed once, from ``time.monotonic()`` (one timeout
unit inside the project: seconds), and each stage waits for what is left of it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Deadline:
    at: float  # ``time.monotonic()`` seconds

    @classmethod
    def after_millis(cls, timeout_millis: float) -> Deadline:
        """The SDK's unit at the public boundary (``force_flush(timeout_millis)``)."""
        return cls(time.monotonic() + max(0.0, float(timeout_millis)) / 1000)

    @classmethod
    def after_seconds(cls, timeout_seconds: float) -> Deadline:
        return cls(time.monotonic() + max(0.0, float(timeout_seconds)))

    def remaining(self) -> float:
        """Seconds left, never negative."""
        return max(0.0, self.at - time.monotonic())

    def remaining_millis(self) -> int:
        """What is left in the unit the SDK's processors take (a downstream ``force_flush``)."""
        return int(self.remaining() * 1000)

    @property
    def expired(self) -> bool:
        return time.monotonic() >= self.at
