"""Judge sampling: budget pacing over a simulated month, the hard ceiling, determinism, risk weighting."""

from __future__ import annotations

import json
import random
import threading
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.id_generator import IdGenerator

from otel_toolcall_eval import EvalConfig, ToolCallEvalProcessor
from otel_toolcall_eval import attributes as A
from otel_toolcall_eval.judge import Judge, JudgeConfig
from otel_toolcall_eval.judge.ledger import Ledger, period_bounds
from otel_toolcall_eval.judge.sampler import CLASSES, ONE, Sampler, solve_rate, trace_draw
from otel_toolcall_eval.records import CallScore, Outcome
from tests.helpers import tool_span

MARCH = datetime(2026, 3, 1, tzinfo=timezone.utc).timestamp()
CLEAN, FAILED = CLASSES.index("clean"), CLASSES.index("execution_failed")


@dataclass
class Clock:
    now: float = MARCH

    def __call__(self) -> float:
        return self.now


def config(**overrides: Any) -> JudgeConfig:
    data: dict[str, Any] = {
        "provider": "openai",
        "model": "judge-model",
        "price": {"input_per_million": 1.0, "output_per_million": 4.0},
        "budget": {"amount": 30.0, "period": "month"},
        "sampling": {"prior_input_tokens": 400, "prior_output_tokens": 40, "update_interval_seconds": 300},
    }
    data.update(overrides)
    return JudgeConfig.model_validate(data)


# --- the draw ---------------------------------------------------------------------------------------
def test_trace_draw_is_uniform_even_for_sequential_ids_and_stable_across_releases() -> None:
    draws = [trace_draw(i) for i in range(1, 20_001)]
    for p in (0.01, 0.1, 0.5):
        share = sum(d < p * ONE for d in draws) / len(draws)
        assert abs(share - p) < 0.01 + p * 0.1, (p, share)
    # Processes on different versions must agree on which traces are judged: the hash is part of the contract.
    assert trace_draw(0x4BF92F3577B34DA6A3CE929D0E0E4736) == 0x2A3DF7C98EBF99DE
    assert trace_draw(0x4BF92F3577B34DA6A3CE929D0E0E4736, seed=1) != trace_draw(0x4BF92F3577B34DA6A3CE929D0E0E4736)


# --- the rate equation ------------------------------------------------------------------------------
def test_solve_rate_is_evals_over_traffic_without_weights_and_exact_with_them() -> None:
    assert solve_rate([10.0, 0, 0, 0, 0], [1, 5, 5, 3, 5], 0.5) == pytest.approx(0.05)
    traffic, weights = [9.0, 0.5, 0.4, 0.1, 0.0], [1.0, 5.0, 50.0, 3.0, 5.0]
    for target in (0.05, 0.5, 2.0, 9.5):
        r = solve_rate(traffic, weights, target)
        assert r is not None
        assert sum(t * min(1.0, r * w) for t, w in zip(traffic, weights, strict=True)) == pytest.approx(target)
    assert solve_rate(traffic, weights, 11.0) == float("inf")  # more than every call: judge them all
    assert solve_rate([0.0] * 5, weights, 1.0) is None  # no traffic measured: keep the current rate


# --- a simulated month -----------------------------------------------------------------------------
@dataclass
class Month:
    spend_peak: float = 0.0
    spent: float = 0.0
    rates: list[float] = field(default_factory=list)
    judged: int = 0
    refused: int = 0
    tokens_in: float = 0.0


def simulate(
    traffic: float,
    *,
    judge: JudgeConfig,
    tokens: tuple[int, int] = (1500, 150),
    failed_share: float = 0.1,
    spike: tuple[float, float, float] | None = None,
    seed: int = 1,
) -> Month:
    """Every tool call of a month through the real decision; judged calls cost real-looking token counts.

    ``spike`` = (from day, to day, factor). Evaluations settle at once; the rate is updated every 5 minutes.
    """
    clock = Clock()
    ledger = Ledger(judge.budget, clock)
    sampler = Sampler(judge, ledger, clock)
    rng = random.Random(seed)
    price = judge.price
    start, end = period_bounds(clock.now, "month")
    month = Month()
    step = 60.0
    sampler.update()
    while clock.now < end:
        day = (clock.now - start) / 86400
        rate = traffic * (spike[2] if spike and spike[0] <= day < spike[1] else 1.0)
        mean = rate * step
        calls = int(mean) + (rng.random() < mean - int(mean))
        for _ in range(calls):
            cls = FAILED if rng.random() < failed_share else CLEAN
            if not sampler.decide(trace_draw(rng.getrandbits(128)), cls):
                continue
            t_in = rng.randint(tokens[0] // 2, tokens[0] * 3 // 2)
            t_out = rng.randint(tokens[1] // 2, tokens[1] * 3 // 2)
            reservation = ledger.reserve(price.cost(4 * tokens[0], 300))  # the worst case, as the judge reserves
            if reservation is None:
                month.refused += 1
                continue
            ledger.settle(reservation, price.cost(t_in, t_out))
            sampler.record_eval(t_in, t_out)
            month.judged += 1
        month.spent = ledger.spent()
        month.spend_peak = max(month.spend_peak, month.spent)
        clock.now += step
        if int(clock.now - start) % 300 == 0:
            month.rates.append(sampler.update())
    month.tokens_in = sampler.tokens_in
    return month


def equilibrium_rate(judge: JudgeConfig, traffic: float, tokens: tuple[int, int], failed_share: float) -> float:
    assert judge.budget is not None
    start, end = period_bounds(MARCH, "month")
    evals_per_second = judge.budget.amount / (end - start) / judge.price.cost(*tokens)
    weights = judge.sampling.risk_weights
    weighted_traffic = traffic * ((1 - failed_share) * weights.clean + failed_share * weights.execution_failed)
    return evals_per_second / weighted_traffic


@pytest.mark.parametrize("traffic", [0.02, 0.2, 1.0])
def test_a_month_of_traffic_never_exceeds_the_ceiling_and_the_rate_converges(traffic: float) -> None:
    judge = config()
    month = simulate(traffic, judge=judge)
    assert month.spend_peak <= 30.0 and month.spent <= 30.0
    assert month.spent >= 0.9 * 30.0, "the budget is used, not hoarded"
    target = equilibrium_rate(judge, traffic, (1500, 150), 0.1)
    last_week = month.rates[-7 * 288 :]
    assert sum(last_week) / len(last_week) == pytest.approx(target, rel=0.15)
    # The priors (400/40 tokens) were far below the real usage (1500/150): measured usage took over.
    assert month.tokens_in == pytest.approx(1500, rel=0.15)


def test_a_traffic_spike_late_in_the_month_cannot_break_the_ceiling() -> None:
    judge = config(budget={"amount": 10.0})
    month = simulate(0.1, judge=judge, spike=(24.0, 27.0, 20.0))
    assert month.spend_peak <= 10.0
    assert month.spent >= 0.85 * 10.0
    # during the spike the rate dropped by about the spike's factor
    day = 288
    before, during = month.rates[20 * day : 23 * day], month.rates[int(24.5 * day) : 27 * day]
    assert sum(during) / len(during) < sum(before) / len(before) / 8


def test_the_ceiling_holds_even_when_pacing_is_blind() -> None:
    """Max rate, no measurements, a tiny budget: the ledger refuses what does not fit."""
    judge = config(budget={"amount": 0.05}, sampling={"initial_rate": 1.0, "update_interval_seconds": 1e9})
    month = simulate(0.05, judge=judge, tokens=(3000, 300))
    assert month.refused > 0
    assert month.spend_peak <= 0.05


# --- the ledger -------------------------------------------------------------------------------------
def test_period_bounds_are_utc_calendar_periods() -> None:
    t = datetime(2026, 2, 18, 13, 45, tzinfo=timezone.utc).timestamp()  # a Wednesday

    def utc(*args: int) -> float:
        return datetime(*args, tzinfo=timezone.utc).timestamp()  # type: ignore[misc]

    assert period_bounds(t, "hour") == (utc(2026, 2, 18, 13), utc(2026, 2, 18, 14))
    assert period_bounds(t, "day") == (utc(2026, 2, 18), utc(2026, 2, 19))
    assert period_bounds(t, "week") == (utc(2026, 2, 16), utc(2026, 2, 23))
    assert period_bounds(t, "month") == (utc(2026, 2, 1), utc(2026, 3, 1))
    assert period_bounds(utc(2026, 12, 31, 23), "month") == (utc(2026, 12, 1), utc(2027, 1, 1))


def test_ledger_reserves_settles_refuses_and_rolls_over() -> None:
    clock = Clock()
    ledger = Ledger(config(budget={"amount": 1.0}).budget, clock)
    first = ledger.reserve(0.6)
    assert first is not None and ledger.spent() == pytest.approx(0.6)
    assert ledger.reserve(0.5) is None  # 1.1 would exceed the ceiling
    ledger.settle(first, 0.2)  # the call cost less than its worst case
    assert ledger.spent() == pytest.approx(0.2) and ledger.remaining() == pytest.approx(0.8)
    assert ledger.reserve(0.5) is not None
    clock.now = datetime(2026, 4, 1, tzinfo=timezone.utc).timestamp()
    assert ledger.spent() == 0.0  # a new month


def test_ledger_file_is_shared_by_processes_and_survives_restarts(tmp_path: Path) -> None:
    clock = Clock()
    budget = config(budget={"amount": 1.0, "ledger_file": str(tmp_path / "ledger.json")}).budget
    a, b = Ledger(budget, clock), Ledger(budget, clock)
    reservation = a.reserve(0.7)
    assert reservation is not None
    assert b.reserve(0.4) is None  # b sees a's reservation
    a.settle(reservation, 0.5)
    assert Ledger(budget, clock).spent() == pytest.approx(0.5)  # a restart reads the spend back
    granted: list[object] = []
    threads = [threading.Thread(target=lambda: granted.extend(b.reserve(1 / 64) for _ in range(20))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(g is not None for g in granted) == 32  # 80 concurrent tries of 1/64: exactly the 0.5 left
    assert a.spent() == 1.0
    (tmp_path / "ledger.json").write_text("{not json")
    assert Ledger(budget, clock).reserve(0.01) is None  # an unreadable ledger spends nothing


# --- through the processor: determinism and risk weighting -------------------------------------------
class SeededIds(IdGenerator):
    """The same trace and span ids in every run: two processes seeing the same traffic."""

    def __init__(self, seed: int) -> None:
        self._rng = random.Random(seed)

    def generate_span_id(self) -> int:
        return self._rng.getrandbits(64)

    def generate_trace_id(self) -> int:
        return self._rng.getrandbits(128)


def _answer(request: httpx.Request) -> httpx.Response:
    system = json.loads(request.content)["messages"][0]["content"]
    label = system.split('is one of "')[1].split('"')[0]
    content = json.dumps({"label": label, "explanation": "ok"})
    usage = {"prompt_tokens": 300, "completion_tokens": 20}
    return httpx.Response(
        200, json={"id": "x", "model": "m", "choices": [{"message": {"content": content}}], "usage": usage}
    )


ONE_QUESTION = {
    "name": "tool_choice",
    "prompt": "Was this the right tool?",
    "fields": ["tool_name"],
    "scale": [{"label": "yes", "score": 1}, {"label": "no", "score": 0}],
}


def run_traffic(judge_section: dict[str, Any], traces: int, failed_every: int = 0, seed: int = 7) -> dict[int, bool]:
    """Traces of one tool call each through a fresh processor; returns trace id -> judge.sampled."""
    eval_config = EvalConfig.from_dict({"judge": judge_section})
    assert eval_config.judge is not None
    judge = Judge(eval_config.judge, transport=httpx.MockTransport(_answer))
    exporter = InMemorySpanExporter()
    provider = TracerProvider(id_generator=SeededIds(seed))
    processor = ToolCallEvalProcessor(SimpleSpanProcessor(exporter), eval_config, judge=judge)
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("t")
    for i in range(traces):
        with tracer.start_as_current_span("agent"):
            failed = failed_every and i % failed_every == 0
            tool_span(tracer, "lookup", {"q": str(i)}, error=RuntimeError("down") if failed else None)
    assert processor.force_flush(10_000)
    provider.shutdown()
    return {
        s.context.trace_id: bool((s.attributes or {})[A.JUDGE_SAMPLED])
        for s in exporter.get_finished_spans()
        if s.name == "execute_tool lookup"
    }


JUDGE_SECTION: dict[str, Any] = {
    "provider": "openai",
    "model": "m",
    "base_url": "http://judge.invalid/v1",
    "price": {"input_per_million": 1, "output_per_million": 4},
    "budget": {"amount": 100},
    "sampling": {"initial_rate": 0.2, "update_interval_seconds": 3600},
    "questions": [ONE_QUESTION],
}


def test_two_processors_and_a_restart_judge_the_same_traces() -> None:
    first = run_traffic(JUDGE_SECTION, 400)
    second = run_traffic(JUDGE_SECTION, 400)  # another processor (another process, or after a restart)
    assert first == second
    sampled = sum(first.values())
    assert 50 <= sampled <= 110  # about 20% of 400: a real selection, not all or nothing
    other_seed = run_traffic({**JUDGE_SECTION, "sampling": {**JUDGE_SECTION["sampling"], "seed": 99}}, 400)
    assert other_seed != first and set(other_seed) == set(first)
    # a lower rate picks a subset of what a higher one picks, so processes with slightly different rates agree
    lower = run_traffic({**JUDGE_SECTION, "sampling": {**JUDGE_SECTION["sampling"], "initial_rate": 0.1}}, 400)
    assert {t for t, s in lower.items() if s} < {t for t, s in first.items() if s}


def test_calls_flagged_by_the_checks_are_judged_more_often() -> None:
    section = {
        **JUDGE_SECTION,
        "sampling": {"initial_rate": 0.04, "update_interval_seconds": 3600, "risk_weights": {"execution_failed": 10}},
    }
    sampled = run_traffic(section, 1000, failed_every=5)
    ordered = list(sampled.values())  # traces in order of completion: every fifth one failed
    failed = [s for i, s in enumerate(ordered) if i % 5 == 0]
    clean = [s for i, s in enumerate(ordered) if i % 5 != 0]
    failed_share, clean_share = sum(failed) / len(failed), sum(clean) / len(clean)
    assert 0.02 <= clean_share <= 0.07  # about the base rate 0.04
    assert 0.3 <= failed_share <= 0.5  # about 10 x 0.04
    assert failed_share > 5 * clean_share


def test_the_decision_takes_no_lock_and_counts_traffic() -> None:
    judge = Judge(JudgeConfig.model_validate({**JUDGE_SECTION, "sampling": {"initial_rate": 0.0}}))
    score = CallScore(name="lookup", step=1, outcome=Outcome.SUCCESS)
    record: Any = type("R", (), {"trace_id": "4bf92f3577b34da6a3ce929d0e0e4736", "name": "lookup"})()
    trace_id = 0x4BF92F3577B34DA6A3CE929D0E0E4736
    results: list[bool] = []
    with judge._traces.lock:  # another thread holds the judge's trace lock: an unsampled decision must not wait
        t = threading.Thread(
            target=lambda: results.extend(judge.offer(trace_id, record, score, None) for _ in range(1000))
        )
        t.start()
        t.join(10)
        assert not t.is_alive()
    assert results == [False] * 1000
    assert len(judge._traces) == 0  # an unsampled call leaves no per-trace state behind
    judge.sampler.update(0.0)
    judge.sampler.update(10.0)
    assert judge.sampler.traffic is not None and judge.sampler.traffic[CLEAN] == pytest.approx(0.0)
    for _ in range(50):
        judge.offer(trace_id, record, score, None)
    judge.sampler.update(20.0)
    assert judge.sampler.traffic[CLEAN] > 0  # 50 calls in 10 s, smoothed
    judge.shutdown()


def test_pacing_raises_the_rate_when_traffic_falls_and_zero_price_samples_at_max_rate() -> None:
    clock = Clock()
    judge = config()
    sampler = Sampler(judge, Ledger(judge.budget, clock), clock)
    sampler.update()
    for minute in range(1, 200):
        for _ in range(600 if minute < 100 else 60):  # 10 calls/s, then 1 call/s
            sampler.decide(ONE, CLEAN)  # draw at the top: never sampled, only counted
        clock.now += 60
        sampler.update()
        if minute == 99:
            busy = sampler.rate
    assert sampler.rate == pytest.approx(busy * 10, rel=0.05)
    free = config(price={"input_per_million": 0, "output_per_million": 0}, budget=None, sampling={"max_rate": 0.3})
    free_sampler = Sampler(free, Ledger(None, clock), clock)
    free_sampler.update()
    clock.now += 60
    free_sampler.decide(0, CLEAN)
    assert free_sampler.update() == 0.3 and free_sampler.probability(CLEAN) == pytest.approx(0.3)
