"""The judge's sampling decision on the application thread, as a fraction of one SDK span's cost.

Subject: ``Judge.offer(trace_id, record, score, tools)`` for scored calls that are not sampled (the common case;
the rate is 0, so nothing is queued and no judge call is made), four calls per trace, as the processor makes
them (the trace's draw is a few integer operations on the trace id, computed per call). Baseline: one non-tool
span started and ended through a BatchSpanProcessor with a no-op exporter, measured in the same rounds.
"""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Callable
from typing import Any

from benchmarks.harness import Figure, Sizes, at_most, interleave, unavailable, us
from benchmarks.processor_cost import plain_round
from benchmarks.workload import SCHEMA_5, TOOL, pipeline, policy_config, valid_arguments

TARGET = 0.05
CALLS_PER_TRACE = 4


def _offers(count: int) -> list[tuple[int, Any, Any]]:
    """``(trace_id, record, score)`` as the processor hands them to the judge, really scored."""
    import orjson

    from otel_toolcall_eval.engine import Scorer
    from otel_toolcall_eval.records import CallHistory, ToolCallRecord

    scorer = Scorer(policy_config(SCHEMA_5).policy())
    out = []
    history = CallHistory()
    for i in range(count):
        if i % CALLS_PER_TRACE == 0:
            history = CallHistory()
        trace_id = ((i // CALLS_PER_TRACE) * 0x9E3779B97F4A7C15 + 1) & ((1 << 128) - 1)
        record = ToolCallRecord(
            name=TOOL,
            raw_arguments=orjson.dumps(valid_arguments(5, i)).decode(),
            result='{"count": 3}',
            result_recorded=True,
            convention="genai",
            trace_id=f"{trace_id:032x}",
            span_id=f"{i + 1:016x}",
        )
        out.append((trace_id, record, scorer.score(record, history)))
    return out


def decision_round(judge: Any, offers: list[tuple[int, Any, Any]]) -> Callable[[], float]:
    def run() -> float:
        clock = time.perf_counter_ns
        total = 0
        for trace_id, record, score in offers:
            t0 = clock()
            judge.offer(trace_id, record, score, None)
            total += clock() - t0
        return total / len(offers)

    return run


def run(sizes: Sizes) -> list[Figure]:
    title = "judge sampling decision on the app thread (not sampled)"
    if importlib.util.find_spec("otel_toolcall_eval.judge") is None:
        return [unavailable("judge.decision", title, f"<= {TARGET}x", "otel_toolcall_eval.judge not available yet")]
    from otel_toolcall_eval.judge import Judge, JudgeConfig

    config = JudgeConfig.model_validate(
        {
            "provider": "openai",
            "model": "judge-model",
            "base_url": "http://127.0.0.1:9",  # never contacted: nothing is sampled at rate 0
            "price": {"input_per_million": 0, "output_per_million": 0},
            "sampling": {"initial_rate": 0.0},
        }
    )
    judge = Judge(config)
    offers = _offers(sizes.judge_decisions)
    base = pipeline(None, with_processor=False)
    try:
        cmp = interleave(plain_round(base.tracer, sizes.plain_spans), decision_round(judge, offers), sizes.rounds)
    finally:
        base.close()
        judge.shutdown()
    return [
        Figure(
            "judge.decision",
            title,
            us(cmp.subject_median),
            us(cmp.baseline_median) + " (one SDK span)",
            cmp.ratio,
            f"<= {TARGET}x",
            at_most(cmp.ratio, TARGET),
            data={"unit": "ns/decision", "decisions_per_round": len(offers), **cmp.as_json()},
        )
    ]
