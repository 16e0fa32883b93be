"""Containment: nothing the online side does may raise into the application, and no broken span shape may flood
the logs. Every stage's failure goes through one ``Contained``: counted in ``toolcall_eval.internal_errors`` by
where it happened, logged at most once a minute per place."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

logger = logging.getLogger("otel_toolcall_eval")


class RateLimitedLog:
    """Log each kind of failure at most once per interval, so a broken span shape cannot flood the logs."""

    def __init__(self, interval: float = 60.0) -> None:
        self._interval = interval
        self._last: dict[str, float] = {}

    def error(self, key: str, msg: str, *args: Any) -> None:
        now = time.monotonic()
        if now - self._last.get(key, -self._interval) >= self._interval:
            self._last[key] = now
            logger.warning(msg, *args, exc_info=True)


class Contained:
    """A failure of one stage or feature, counted (``record_error``: the metrics' counter) and logged; ``safe``
    runs a callable that must not raise into the caller."""

    def __init__(self, record_error: Callable[[str], None], log: RateLimitedLog | None = None) -> None:
        self._record_error = record_error
        self.log = log or RateLimitedLog()

    def failed(self, key: str) -> None:
        self._record_error(key)
        self.log.error(key, "toolcall-eval: %s failed", key)

    def safe(self, fn: Callable[[], Any], key: str) -> Any:
        try:
            return fn()
        except Exception:  # noqa: BLE001
            self.failed(key)
            return False
