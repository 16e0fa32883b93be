"""Budget-paced, deterministic, risk-weighted sampling of tool calls for the judge.

The pacing (recomputed off the application thread every ``update_interval_seconds``):

    spend rate s   = min(remaining budget / time left in the period, max_catchup x budget / period length)
    cost per eval  = tokens_in x price_in + tokens_out x price_out     (EWMA of real usage per judged call)
    evals / second = s / cost per eval
    base rate r    solves  sum over risk classes c of traffic_c x min(1, r x weight_c) = evals / second

which is ``rate = evals / traffic`` when every weight is 1. Traffic per class is an EWMA of calls per second.

The decision on the application thread is one comparison: a call is judged when the trace's draw (a 64-bit
hash of the trace id, the same in every process and after restarts) is below its class's precomputed
threshold ``min(1, r x weight) x 2**64``. Thresholds are replaced as a whole tuple, counters are
``itertools.count`` objects (atomic under the GIL), so the decision takes no lock. Lower rates select subsets
of the traces higher rates select, so processes that measured slightly different rates still agree on most.
"""

from __future__ import annotations

import itertools
import math
import threading
from collections.abc import Callable, Sequence
from typing import Final

from otel_toolcall_eval import _fork
from otel_toolcall_eval.config.judge import JudgeConfig, RiskWeights
from otel_toolcall_eval.judge.ledger import Ledger
from otel_toolcall_eval.records import CallScore, Outcome

M64: Final = (1 << 64) - 1
ONE: Final = 1 << 64
_GOLDEN: Final = 0x9E3779B97F4A7C15

# Risk classes, in the order of ``RiskWeights``' fields.
CLASSES: Final = ("clean", "malformed_call", "execution_failed", "empty_result", "violation")
_OUTCOME_CLASS: Final = {
    Outcome.SUCCESS: 0,
    Outcome.MALFORMED_CALL: 1,
    Outcome.EXECUTION_FAILED: 2,
    Outcome.EMPTY_RESULT: 3,
}
_VIOLATION: Final = 4


def trace_draw(trace_id: int, seed: int = 0) -> int:
    """A uniform 64-bit value per trace: fold the 128-bit id, then a multiplicative hash with xor-shifts."""
    x = (trace_id ^ (trace_id >> 64) ^ seed) & M64
    x = ((x ^ (x >> 32)) * _GOLDEN) & M64
    return x ^ (x >> 29)


def weights_of(risk: RiskWeights) -> tuple[float, ...]:
    return tuple(float(getattr(risk, name)) for name in CLASSES)


def solve_rate(traffic: Sequence[float], weights: Sequence[float], evals_per_second: float) -> float | None:
    """The base rate r with sum_c traffic_c x min(1, r x w_c) = evals_per_second; ``None`` without traffic.

    The left side is piecewise linear and non-decreasing in r, with a kink where each class saturates
    (r = 1 / w_c), so walking the kinks in order finds r exactly. ``inf`` when even r -> inf cannot spend it.
    """
    active = sorted((1.0 / w, t, w) for t, w in zip(traffic, weights, strict=True) if t > 0 and w > 0)
    if not active:
        return None
    saturated = 0.0  # evals per second from classes already at probability 1
    slope = sum(t * w for _, t, w in active)
    for kink, t, w in active:
        if saturated + slope * kink >= evals_per_second:
            return max(0.0, (evals_per_second - saturated) / slope)
        saturated += t
        slope -= t * w
    return math.inf


class _Counter:
    """A lock-free counter: ``next()`` on ``itertools.count`` is atomic; reading it costs one increment."""

    __slots__ = ("_count", "_reads")

    def __init__(self) -> None:
        self._count = itertools.count()
        self._reads = 0

    def add(self) -> None:
        next(self._count)

    def value(self) -> int:  # only the controller reads (one thread)
        value = next(self._count) - self._reads
        self._reads += 1
        return value


class Sampler:
    def __init__(self, config: JudgeConfig, ledger: Ledger, clock: Callable[[], float]) -> None:
        s = config.sampling
        self._config = config
        self._price = config.price
        self._ledger = ledger
        self._clock = clock
        self._weights = weights_of(s.risk_weights)
        self.seed = s.seed
        self._counters = tuple(_Counter() for _ in CLASSES)
        self._no_question = _Counter()
        self._lock = threading.Lock()  # controller state: worker thread and tests only, never the app thread
        self._last_counts = [0] * len(CLASSES)
        self._last_zeros = 0
        self._last_time: float | None = None
        self.traffic: list[float] | None = None  # EWMA calls per second, per class
        self.tokens_in = float(s.prior_input_tokens)
        self.tokens_out = float(s.prior_output_tokens)
        self.evals_measured = 0
        self.rate = s.initial_rate
        self._thresholds = self._thresholds_for(self.rate)
        _fork.reinit_after_fork(self)

    def _after_fork_in_child(self) -> None:
        """A lock the parent's worker held at the fork would stay held here (the measured traffic stays)."""
        self._lock = threading.Lock()

    # --- application thread ------------------------------------------------------------------
    def risk_class(self, score: CallScore) -> int:
        cls = _OUTCOME_CLASS[score.outcome]
        if score.violations or score.duplicate or score.repeated_failure or score.over_budget:
            w = self._weights
            if w[_VIOLATION] > w[cls]:
                return _VIOLATION
        return cls

    def decide(self, draw: int, cls: int) -> bool:
        """Count the call as traffic and say whether it is judged. No lock, no I/O."""
        self._counters[cls].add()
        return draw < self._thresholds[cls]

    def no_question(self) -> None:
        """A sampled call none of the questions applied to: an evaluation that cost nothing."""
        self._no_question.add()

    # --- worker thread -------------------------------------------------------------------------
    def record_eval(self, input_tokens: int, output_tokens: int, alpha: float = 0.05) -> None:
        """Real usage of one judged call (all its questions): feeds the tokens-per-evaluation EWMA."""
        with self._lock:
            self._observe(float(input_tokens), float(output_tokens), alpha)

    def _observe(self, tokens_in: float, tokens_out: float, alpha: float) -> None:
        # Faster start: average the first measurements, then a fixed-weight EWMA.
        self.evals_measured += 1
        a = max(alpha, 1.0 / self.evals_measured)
        self.tokens_in += a * (tokens_in - self.tokens_in)
        self.tokens_out += a * (tokens_out - self.tokens_out)

    @property
    def cost_per_eval(self) -> float:
        return self._price.cost(self.tokens_in, self.tokens_out)

    def update(self, now: float | None = None) -> float:
        """Re-measure traffic and recompute the base rate and thresholds; returns the base rate."""
        now = self._clock() if now is None else now
        with self._lock:
            counts = [c.value() for c in self._counters]
            zeros = self._no_question.value()
            if self._last_time is None:
                self._last_time, self._last_counts, self._last_zeros = now, counts, zeros
                return self.rate
            dt = now - self._last_time
            if dt <= 0:
                return self.rate
            measured = [(c - p) / dt for c, p in zip(counts, self._last_counts, strict=True)]
            for _ in range(min(zeros - self._last_zeros, 1000)):
                self._observe(0.0, 0.0, 0.05)
            self._last_time, self._last_counts, self._last_zeros = now, counts, zeros
            if self.traffic is None:
                self.traffic = measured
            else:
                a = 1.0 - 0.5 ** (dt / self._config.sampling.traffic_half_life_seconds)
                self.traffic = [t + a * (m - t) for t, m in zip(self.traffic, measured, strict=True)]
            rate = self._paced_rate(now, self.traffic)
            if rate is not None:
                self.rate = rate
                self._thresholds = self._thresholds_for(rate)
            return self.rate

    def target_evals_per_second(self, now: float) -> float:
        budget = self._config.budget
        cost = self.cost_per_eval
        if budget is None or cost <= 0:
            return math.inf
        start, end = self._ledger.bounds(now)
        even = budget.amount / (end - start)
        spend_rate = min(self._ledger.remaining(now) / max(end - now, 1.0), self._config.sampling.max_catchup * even)
        return spend_rate / cost

    def _paced_rate(self, now: float, traffic: Sequence[float]) -> float | None:
        rate = solve_rate(traffic, self._weights, self.target_evals_per_second(now))
        if rate is None:
            return None
        return min(rate, self._config.sampling.max_rate)

    def _thresholds_for(self, rate: float) -> tuple[int, ...]:
        return tuple(min(ONE, int(rate * w * ONE)) for w in self._weights)

    def probability(self, cls: int) -> float:
        return self._thresholds[cls] / ONE
