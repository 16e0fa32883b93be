"""Peak memory over many tool spans in traces whose roots never end: bounded, and flat once the limits hold.

Each trace is a chat turn that offers four tools and requests the calls, then its tool calls, under a local
parent span that never ends. Runs in a child process so the baseline is a known start: the child's resident set
size (RSS, from ``/proc/self/statm``) after imports and pipeline set-up, before the first span. RSS, not
tracemalloc, because it is what an operator sees and it includes what tracemalloc cannot: jsonschema-rs
validators (Rust heap) and allocator fragmentation; tracemalloc would also slow 1M spans several-fold. Sampled
every ``--sample-every`` tool spans; "flat" compares the RSS once the trace limit has held for as long again as it
took to reach it with the RSS at the end.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import resource
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.harness import Figure, Sizes, mib, run_child

GROWTH_LIMIT = 64 * 2**20
FLAT_TOLERANCE = 4 * 2**20  # allocator noise: a leak of even 40 bytes per span would exceed this over 1M spans


def rss_bytes() -> int:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:  # not Linux: the peak so far is the best available
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def measure(traces: int, calls: int, max_traces: int | None, sample_every: int) -> dict[str, Any]:
    """The child's side: send the spans, sample RSS, return the samples.

    Spans go straight to the processor's ``on_end`` as the ended ``ReadableSpan`` the SDK would hand it
    (downstream: a BatchSpanProcessor with a no-op exporter): the figure is about what the processor keeps,
    and skipping the SDK's span start/end halves the run time of 1.2M spans.
    """
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.trace import SpanContext, TraceFlags

    from benchmarks.workload import SCHEMA_5, definitions, pipeline
    from otel_toolcall_eval import EvalConfig

    config = EvalConfig() if max_traces is None else EvalConfig.from_dict({"limits": {"max_traces": max_traces}})
    limit = config.limits.max_traces
    pipe = pipeline(config, with_processor=True)
    processor = pipe.processor
    assert processor is not None
    defs = definitions(SCHEMA_5)
    rng = random.Random(8)
    tools = ("search_records", "authenticate", "delete_records", "confirm_action")
    resource = Resource.create({"service.name": "memory-benchmark"})
    sampled = TraceFlags(1)

    gc.collect()
    baseline = rss_bytes()
    samples: list[tuple[int, int, int]] = []  # (tool spans sent, RSS, traces in flight)
    limit_reached_at: int | None = None
    sent = 0
    span_id = 0
    started = time.perf_counter()
    for t in range(traces):
        trace_id = rng.getrandbits(128)
        # a local parent that never ends: the trace stays open until the limits drop it
        root = SpanContext(trace_id, rng.getrandbits(64), False, sampled)
        ids = [f"c{t}_{k}" for k in range(calls)]
        parts = ",".join(f'{{"type":"tool_call","id":"{i}","name":"search_records","arguments":{{}}}}' for i in ids)
        chat = {
            "gen_ai.operation.name": "chat",
            "gen_ai.tool.definitions": defs,
            "gen_ai.output.messages": f'[{{"role":"assistant","parts":[{parts}]}}]',
        }
        span_id += 1
        now = time.time_ns()
        processor.on_end(
            ReadableSpan(
                "chat",
                SpanContext(trace_id, span_id, False, sampled),
                root,
                resource,
                chat,
                start_time=now,
                end_time=now,
            )
        )
        for k, call_id in enumerate(ids):
            attrs = {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": tools[k % len(tools)] if k else "search_records",
                "gen_ai.tool.call.id": call_id,
                "gen_ai.tool.call.arguments": f'{{"query": "invoices {t}-{k}", "limit": {k + 1}}}',
                "gen_ai.tool.call.result": '{"count": 1}',
            }
            span_id += 1
            context = SpanContext(trace_id, span_id, False, sampled)
            processor.on_end(ReadableSpan("execute_tool", context, root, resource, attrs, start_time=now, end_time=now))
            sent += 1
            if sent % sample_every == 0:
                in_flight = processor.traces_in_flight
                if limit_reached_at is None and in_flight >= limit:
                    limit_reached_at = sent
                samples.append((sent, rss_bytes(), in_flight))
    return child_result(pipe, baseline, samples, limit, limit_reached_at, started, tool_spans=sent, traces=traces)


def child_result(
    pipe: Any,
    baseline: int,
    samples: list[tuple[int, int, int]],
    limit: int,
    limit_reached_at: int | None,
    started: float,
    **counts: int,
) -> dict[str, Any]:
    """What a memory child reports once its spans are sent: RSS after a full collection (the pipeline closed
    after it is measured), the peak over the samples, and when the state limit was reached."""
    elapsed = time.perf_counter() - started
    gc.collect()
    final = rss_bytes()
    pipe.close()
    return {
        "baseline_rss": baseline,
        "final_rss": final,
        "peak_rss": max([final, *(s[1] for s in samples)]),
        "samples": samples,
        "limit": limit,
        "limit_reached_at": limit_reached_at,
        **counts,
        "seconds": round(elapsed, 1),
    }


def judge(result: dict[str, Any], limit: str = "trace") -> tuple[bool, int | None, str]:
    """Growth within the limit, and flat: RSS at the end minus RSS once the ``limit`` limit has held a while."""
    growth = result["peak_rss"] - result["baseline_rss"]
    reached = result["limit_reached_at"]
    if reached is None:
        return False, None, f"the {limit} limit was never reached: flatness not shown"
    settled = [s for s in result["samples"] if s[0] >= 2 * reached]
    if len(settled) < 2:
        return False, None, "too few samples after the limit was reached"
    drift = result["final_rss"] - settled[0][1]
    ok = growth <= GROWTH_LIMIT and drift <= FLAT_TOLERANCE
    return ok, drift, ""


def growth_figure(fid: str, title: str, result: dict[str, Any], what: str, limit: str) -> Figure:
    """The figure of one bounded-memory child run (``what``: the workload, for the note; ``limit``: its name)."""
    ok, drift, why = judge(result, limit)
    growth = result["peak_rss"] - result["baseline_rss"]
    note = (
        f"RSS; {what} (limit {result['limit']:,} reached after {result['limit_reached_at'] or 0:,} spans); "
        + (f"drift after the limit {mib(drift)}" if drift is not None else why)
        + f"; {result['seconds']} s"
    )
    return Figure(
        fid,
        title,
        f"{mib(result['peak_rss'])} peak (+{mib(growth)})",
        mib(result["baseline_rss"]) + " (process before the run)",
        result["peak_rss"] / result["baseline_rss"],
        f"growth <= {mib(GROWTH_LIMIT)}, flat (<= {mib(FLAT_TOLERANCE)}) after the limit",
        "met" if ok else "missed",
        note=note,
        data={"unit": "bytes", "growth": growth, "drift_after_limit": drift, **result},
    )


def run(sizes: Sizes) -> list[Figure]:
    args = ["--traces", str(sizes.memory_traces), "--calls", str(sizes.memory_calls_per_trace)]
    if sizes.memory_max_traces is not None:
        args += ["--max-traces", str(sizes.memory_max_traces)]
    result = run_child("benchmarks.memory", args, timeout=sizes.child_timeout)
    limits = "default limits" if sizes.memory_max_traces is None else f"max_traces={sizes.memory_max_traces}"
    what = f"{result['tool_spans']:,} tool spans in {result['traces']:,} traces, {limits}"
    title = "peak memory, tool spans in traces whose roots never end"
    return [growth_figure("memory.growth", title, result, what, "trace")]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.memory", description=__doc__)
    parser.add_argument("--traces", type=int, required=True)
    parser.add_argument("--calls", type=int, default=5, help="tool calls per trace")
    parser.add_argument("--max-traces", type=int, help="limits.max_traces (default: the config default)")
    parser.add_argument("--sample-every", type=int, default=5_000, help="tool spans between RSS samples")
    parser.add_argument("--json", type=Path, required=True)
    args = parser.parse_args(argv)
    sample_every = min(args.sample_every, max(1, args.traces * args.calls // 50))
    result = measure(args.traces, args.calls, args.max_traces, sample_every)
    args.json.write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
