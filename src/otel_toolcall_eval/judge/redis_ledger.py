"""One judge budget for a fleet: the spend ledger kept in Redis, reserved and settled by atomic Lua scripts.

N replicas of the scoring service (or of an application with the processor) each run their own judge; with a
file ledger each host would spend the whole budget. Here every replica reserves from one Redis key per
calendar period. A reservation is one script run, so the test "does it fit under the ceiling" and the charge are
atomic across replicas: however the calls interleave, the granted reservations of a period never add up past
the budget. Settling replaces the reservation by the real cost with the same rules as ``Ledger.settle``.

Fail closed: when Redis cannot be reached, answers an error, or holds a value that is not a number, a
reservation is refused (no judge call is sent) and the period counts as spent (the pacing stops sampling).
A settle that fails leaves its reservation charged: the worst case, never an undercount.

Keys: ``{key_prefix}:{period}:{period start, epoch seconds}``, each expiring a day after its period ends, so a
fleet leaves no unbounded keys behind.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from otel_toolcall_eval.config import ConfigError
from otel_toolcall_eval.config.judge import Budget
from otel_toolcall_eval.judge.ledger import Ledger, Reservation

if TYPE_CHECKING:
    import redis

logger = logging.getLogger("otel_toolcall_eval.judge")

_KEEP_AFTER_PERIOD: Final = 86_400  # seconds a period's key outlives its period (late settles, inspection)

# KEYS[1] the period's key. ARGV: amount, budget, ttl seconds. Returns the new spend, or false when it does not fit.
# INCRBYFLOAT keeps 17 significant digits; Lua's tostring would keep 14.
_RESERVE: Final = """
local spent = tonumber(redis.call('GET', KEYS[1]) or '0')
if spent == nil then return redis.error_reply('ledger value is not a number') end
if spent + tonumber(ARGV[1]) > tonumber(ARGV[2]) then return false end
local new = redis.call('INCRBYFLOAT', KEYS[1], ARGV[1])
redis.call('EXPIRE', KEYS[1], ARGV[3])
return new
"""

# KEYS[1] the reservation's period key, KEYS[2] the current period's key. ARGV: reserved, actual, budget, ttl of
# the current key. The same rules as ``Ledger.settle``: the reservation is replaced by the actual cost in its own
# period, or the actual cost is charged to the current one if the period rolled; never past the ceiling.
_SETTLE: Final = """
local current = tonumber(redis.call('GET', KEYS[2]) or '0')
if current == nil then return redis.error_reply('ledger value is not a number') end
local reserved, actual, budget = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local spent
if KEYS[1] == KEYS[2] then spent = current - reserved + actual else spent = current + actual end
spent = math.min(spent, math.max(budget, current))
spent = math.max(0, spent)
local text = string.format('%.17g', spent)
redis.call('SET', KEYS[2], text, 'EX', ARGV[4])
return text
"""


class RedisLedger(Ledger):
    """``Ledger`` whose spend lives in Redis, shared by every process that names the same URL and prefix."""

    def __init__(self, budget: Budget, clock: Callable[[], float], client: redis.Redis) -> None:
        super().__init__(budget, clock)
        self._budget = budget
        self._client = client
        self._prefix = budget.ledger_redis_key_prefix
        self._reserve = client.register_script(_RESERVE)
        self._settle = client.register_script(_SETTLE)
        # A forked child does not reuse the parent's sockets: redis-py's pool checks its pid on every use.
        self._warned = threading.Event()

    def key(self, now: float | None = None) -> str:
        start, _ = self.bounds(now)
        return f"{self._prefix}:{self._budget.period}:{int(start)}"

    def _ttl(self, now: float) -> int:
        _, end = self.bounds(now)
        return max(1, int(end - now)) + _KEEP_AFTER_PERIOD

    def spent(self, now: float | None = None) -> float:
        try:
            raw = self._client.get(self.key(now))
            return 0.0 if raw is None else max(0.0, float(raw))
        except Exception as exc:  # noqa: BLE001 - any failure: the period counts as spent (fail closed)
            self._unavailable(exc)
            return float("inf")

    def reserve(self, amount: float) -> Reservation | None:
        now = self._clock()
        start, _ = self.bounds(now)
        try:
            granted = self._reserve(
                keys=[self.key(now)], args=[repr(amount), repr(self._budget.amount), self._ttl(now)]
            )
        except Exception as exc:  # noqa: BLE001 - fail closed: no reservation, no judge call
            self._unavailable(exc)
            return None
        self._warned.clear()
        return None if granted is None else Reservation(start, amount)

    def settle(self, reservation: Reservation, actual: float) -> float:
        over = max(0.0, actual - reservation.amount)
        now = self._clock()
        reserved_key = f"{self._prefix}:{self._budget.period}:{int(reservation.period_start)}"
        try:
            self._settle(
                keys=[reserved_key, self.key(now)],
                args=[repr(reservation.amount), repr(actual), repr(self._budget.amount), self._ttl(now)],
            )
        except Exception as exc:  # noqa: BLE001 - the reservation stays charged: the worst case
            self._unavailable(exc)
        return over

    def _unavailable(self, exc: Exception) -> None:
        if not self._warned.is_set():
            self._warned.set()
            logger.warning(
                "toolcall-eval judge: the Redis ledger is unavailable (%s); no judge calls until it answers",
                type(exc).__name__,
            )


def redis_client(budget: Budget) -> Any:
    """A redis-py client for ``budget.ledger_redis_url_env`` (connects lazily; short timeouts: a judge call
    waits for its reservation, and an unreachable Redis must refuse quickly, not hang the judge's worker)."""
    name = budget.ledger_redis_url_env
    assert name is not None
    url = os.environ.get(name)
    if not url:
        raise ConfigError(f"judge.budget.ledger_redis_url_env: the environment variable {name} is not set")
    try:
        import redis
    except ImportError:
        raise ConfigError(
            "judge.budget.ledger_redis_url_env: the Redis ledger needs redis-py "
            "(pip install 'otel-toolcall-eval[redis]')"
        ) from None
    timeout = budget.ledger_redis_timeout_seconds
    try:
        return redis.Redis.from_url(url, socket_timeout=timeout, socket_connect_timeout=timeout)
    except ValueError as exc:
        raise ConfigError(f"judge.budget.ledger_redis_url_env: {name} is not a Redis URL ({exc})") from None


def make_ledger(budget: Budget | None, clock: Callable[[], float] = time.time) -> Ledger:
    """The ledger the budget asks for: Redis (a fleet), a file (one host), or in-process."""
    if budget is not None and budget.ledger_redis_url_env is not None:
        return RedisLedger(budget, clock, redis_client(budget))
    return Ledger(budget, clock)
