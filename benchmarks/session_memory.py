"""Peak memory over many conversations that never go idle: the session state is bounded, and flat past the limit.

Each trace is one turn: a tool call (every fourth one failing, so the session remembers failing calls) under a
root span that carries ``gen_ai.conversation.id``; the turns go round-robin over ``--sessions`` conversations,
far more than ``limits.max_sessions``, and ``limits.session_idle_seconds`` is longer than the run, so no session
ever goes idle: only the LRU bound drops them (each drop emits its verdict, to an SDK LoggerProvider without
processors). Measured as ``benchmarks.memory`` measures trace state: RSS of a child process against its own RSS
before the first span, sampled as the spans go; "flat" compares the RSS once the session limit has held for as
long again as it took to reach it with the RSS at the end.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.harness import Figure, Sizes, run_child
from benchmarks.memory import child_result, growth_figure, rss_bytes


def measure(spans: int, sessions: int, max_sessions: int | None, sample_every: int) -> dict[str, Any]:
    """The child's side: ``spans`` spans (a tool span and its root per turn), RSS samples, the session count."""
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.trace import SpanContext, Status, StatusCode, TraceFlags

    from benchmarks.workload import pipeline
    from otel_toolcall_eval import EvalConfig

    limits: dict[str, Any] = {"session_idle_seconds": 86_400.0}  # never idle during the run
    if max_sessions is not None:
        limits["max_sessions"] = max_sessions
    config = EvalConfig.from_dict({"limits": limits})
    limit = config.limits.max_sessions
    pipe = pipeline(config, with_processor=True, logger_provider=LoggerProvider())
    processor = pipe.processor
    assert processor is not None
    rollup = processor._pipeline.sessions
    assert rollup is not None
    rng = random.Random(18)
    resource = Resource.create({"service.name": "session-memory-benchmark"})
    sampled = TraceFlags(1)
    failed = Status(StatusCode.ERROR, "no such record")

    gc.collect()
    baseline = rss_bytes()
    samples: list[tuple[int, int, int]] = []  # (spans sent, RSS, sessions open)
    limit_reached_at: int | None = None
    sent = 0
    turn = 0
    started = time.perf_counter()
    while sent < spans:
        trace_id = rng.getrandbits(128)
        root_id, tool_id = rng.getrandbits(64), rng.getrandbits(64)
        root = SpanContext(trace_id, root_id, False, sampled)
        now = time.time_ns()
        attrs = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "search_records",
            "gen_ai.tool.call.arguments": f'{{"query": "invoices {turn % 97}"}}',
            "gen_ai.tool.call.result": '{"count": 1}',
        }
        tool = ReadableSpan(
            "execute_tool",
            SpanContext(trace_id, tool_id, False, sampled),
            root,
            resource,
            attrs,
            status=failed if turn % 4 == 0 else Status(StatusCode.UNSET),
            start_time=now,
            end_time=now,
        )
        processor.on_end(tool)
        conversation = {"gen_ai.conversation.id": f"conversation-{turn % sessions}"}
        processor.on_end(ReadableSpan("invoke_agent", root, None, resource, conversation, start_time=now, end_time=now))
        sent += 2
        turn += 1
        if sent % sample_every < 2:
            open_sessions = len(rollup)
            if limit_reached_at is None and open_sessions >= limit:
                limit_reached_at = sent
            samples.append((sent, rss_bytes(), open_sessions))
    return child_result(
        pipe, baseline, samples, limit, limit_reached_at, started, spans=sent, turns=turn, sessions=sessions
    )


def run(sizes: Sizes) -> list[Figure]:
    args = ["--spans", str(sizes.session_spans), "--sessions", str(sizes.session_count)]
    if sizes.session_max is not None:
        args += ["--max-sessions", str(sizes.session_max)]
    result = run_child("benchmarks.session_memory", args, timeout=sizes.child_timeout)
    limits = "default limits" if sizes.session_max is None else f"max_sessions={sizes.session_max}"
    what = (
        f"{result['spans']:,} spans, {result['turns']:,} turns over {result['sessions']:,} conversations that "
        f"never go idle, {limits}"
    )
    title = "peak memory, turns of conversations that never go idle"
    return [growth_figure("memory.sessions", title, result, what, "session")]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.session_memory", description=__doc__)
    parser.add_argument("--spans", type=int, required=True)
    parser.add_argument("--sessions", type=int, required=True, help="conversations the turns go round-robin over")
    parser.add_argument("--max-sessions", type=int, help="limits.max_sessions (default: the config default)")
    parser.add_argument("--sample-every", type=int, default=10_000, help="spans between RSS samples")
    parser.add_argument("--json", type=Path, required=True)
    args = parser.parse_args(argv)
    sample_every = max(2, min(args.sample_every, args.spans // 50))
    result = measure(args.spans, args.sessions, args.max_sessions, sample_every)
    args.json.write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
