"""Spend per calendar period: the hard ceiling behind the pacing.

Every judge call reserves its worst-case cost before it is sent (its prompt's UTF-8 bytes as input tokens,
which no byte-level BPE tokenizer exceeds, plus a fixed overhead, and ``max_output_tokens``) and settles the
real cost afterwards. A call whose reservation does not fit under the period's budget is not sent, so the
ceiling holds even when the pacing's estimates are wrong. A provider that reports more than the reservation
(it ignored ``max_tokens``) fills the period up to the ceiling and no further: sampling stops for the rest of
the period, the excess is returned to the judge (which counts it), and the next period starts from zero.

With ``ledger_file`` the spend lives in a small JSON file updated under ``flock``, so processes on one host and
restarts share one ceiling; a process that dies mid-call leaves its reservation charged (conservative).
"""

from __future__ import annotations

import calendar
import contextlib
import fcntl
import json
import logging
import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

from otel_toolcall_eval import _fork
from otel_toolcall_eval.config.judge import Budget, Period

logger = logging.getLogger("otel_toolcall_eval.judge")


def period_bounds(now: float, period: Period) -> tuple[float, float]:
    """The UTC calendar period containing ``now`` (epoch seconds): [start, end)."""
    t = datetime.fromtimestamp(now, tz=timezone.utc)
    if period == "hour":
        start = t.replace(minute=0, second=0, microsecond=0)
        end = start + timedelta(hours=1)
    elif period == "day":
        start = t.replace(hour=0, minute=0, second=0, microsecond=0)
        end = start + timedelta(days=1)
    elif period == "week":
        start = (t - timedelta(days=t.weekday())).replace(hour=0, minute=0, second=0, microsecond=0)
        end = start + timedelta(days=7)
    else:
        start = t.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
        days = calendar.monthrange(start.year, start.month)[1]
        end = start + timedelta(days=days)
    return start.timestamp(), end.timestamp()


@dataclass(slots=True, frozen=True)
class Reservation:
    period_start: float
    amount: float


class Ledger:
    """Spend so far in the current period; thread-safe; optionally shared through a file."""

    def __init__(self, budget: Budget | None, clock: Callable[[], float]) -> None:
        self.budget = budget
        self._clock = clock
        self._lock = threading.Lock()
        self._period_start = float("-inf")
        self._spent = 0.0
        self._path: Path | None = budget.ledger_file if budget is not None else None
        _fork.reinit_after_fork(self)

    def _after_fork_in_child(self) -> None:
        """A lock the parent's worker held at the fork would stay held here (the spend so far stays)."""
        self._lock = threading.Lock()

    # --- reading -------------------------------------------------------------------------------
    def bounds(self, now: float | None = None) -> tuple[float, float]:
        period = self.budget.period if self.budget is not None else "month"
        return period_bounds(self._clock() if now is None else now, period)

    def spent(self, now: float | None = None) -> float:
        with self._session(now) as state:
            return state[1]

    def remaining(self, now: float | None = None) -> float:
        if self.budget is None:
            return float("inf")
        return max(0.0, self.budget.amount - self.spent(now))

    # --- writing -------------------------------------------------------------------------------
    def reserve(self, amount: float) -> Reservation | None:
        """Charge ``amount`` now if it fits under the ceiling; ``None`` when it does not."""
        with self._session(None, write=True) as state:
            start, spent = state
            if self.budget is not None and spent + amount > self.budget.amount:
                return None
            state[1] = spent + amount
            return Reservation(start, amount)

    def settle(self, reservation: Reservation, actual: float) -> float:
        """Replace a reservation by what the call really cost (charged to the current period if it rolled).

        Returns the over-report: what the provider reported beyond the reservation (a server that ignores
        ``max_tokens``). The recorded spend never passes the ceiling: reaching it stops every later call of the
        period, and a spend far past it would only make ledgers, files and pacing carry absurd numbers.
        """
        over = max(0.0, actual - reservation.amount)
        with self._session(None, write=True) as state:
            if state[0] == reservation.period_start:
                spent = state[1] - reservation.amount + actual
            else:
                spent = state[1] + actual
            if self.budget is not None:
                spent = min(spent, max(self.budget.amount, state[1]))
            state[1] = max(0.0, spent)
        return over

    # --- storage -------------------------------------------------------------------------------
    @contextlib.contextmanager
    def _session(self, now: float | None, write: bool = False) -> Iterator[list[float]]:
        """Yields ``[period_start, spent]`` for the current period, rolled over and persisted as needed."""
        start, _ = self.bounds(now)
        with self._lock:
            if self._path is None:
                state = [start, self._spent if self._period_start == start else 0.0]
                yield state
                if write:
                    self._period_start, self._spent = state
                return
            with _locked(self._path) as fh:
                state = _read(fh, start)
                before = list(state)
                yield state
                if write and state != before:
                    _write(fh, state)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[int]:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield fd
    finally:
        os.close(fd)  # closing releases the lock


def _read(fd: int, start: float) -> list[float]:
    os.lseek(fd, 0, os.SEEK_SET)
    raw = b""
    while chunk := os.read(fd, 65536):
        raw += chunk
    try:
        data = json.loads(raw) if raw.strip() else {}
        if float(data.get("period_start", start)) == start:
            return [start, max(0.0, float(data.get("spent", 0.0)))]
    except (ValueError, TypeError, AttributeError):
        # An unreadable ledger must not let the judge spend freely: treat the period as full.
        logger.warning("toolcall-eval judge: the ledger file is unreadable; no spend until it is fixed or removed")
        return [start, float("inf")]
    return [start, 0.0]


def _write(fd: int, state: list[float]) -> None:
    data = json.dumps({"period_start": state[0], "spent": state[1]}).encode()
    os.lseek(fd, 0, os.SEEK_SET)
    os.ftruncate(fd, 0)
    os.write(fd, data)
