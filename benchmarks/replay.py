"""Replay throughput of recorded OTLP traces, against decoding the same file without scoring.

The recording: the processor figures' agent traces (root, two chat turns, five tool calls), captured from a real
TracerProvider and written as one OTLP protobuf ``TracesData`` file, as the Collector's file exporter does.
Baseline round: ``replay.read_file`` (decode to spans). Subject round: ``read_file`` then ``replay_spans``
(end order, the processor, the enriched copies). The target is on throughput: replaying keeps at least half the
decode-only rate, i.e. the cost ratio is at most 2.
"""

from __future__ import annotations

import importlib.util
import tempfile
import time
from pathlib import Path

from benchmarks.harness import Figure, Sizes, at_most, interleave, unavailable

TARGET = 2.0  # cost of decode + score / cost of decode: throughput >= 0.5x


def record(path: Path, traces: int) -> int:
    """Write ``traces`` agent traces as OTLP protobuf; returns the number of spans."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from benchmarks.processor_cost import tool_round
    from benchmarks.workload import agent_traces

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tool_round(provider.get_tracer("recorded-agent"), agent_traces(traces, fields=5, valid=True))()
    provider.shutdown()
    spans = exporter.get_finished_spans()
    path.write_bytes(encode_spans(spans).SerializeToString())
    return len(spans)


def run(sizes: Sizes) -> list[Figure]:
    title = "replay of recorded OTLP traces, throughput against decoding only"
    target = f"<= {TARGET}x cost (throughput >= 0.5x)"
    if importlib.util.find_spec("otel_toolcall_eval.replay") is None:
        return [unavailable("replay.throughput", title, target, "otel_toolcall_eval.replay not available yet")]
    from benchmarks.workload import SCHEMA_5, policy_config
    from otel_toolcall_eval.replay import read_file, replay_spans

    config = policy_config(SCHEMA_5)
    with tempfile.TemporaryDirectory(prefix="bench-replay-") as tmp:
        path = Path(tmp) / "recorded.otlp.pb"
        spans = record(path, sizes.tool_traces * 2)

        def decode() -> float:
            t0 = time.perf_counter_ns()
            report = read_file(path)
            elapsed = time.perf_counter_ns() - t0
            assert len(report.spans) == spans
            return elapsed / spans

        def replay() -> float:
            t0 = time.perf_counter_ns()
            result = replay_spans(read_file(path).spans, config)
            elapsed = time.perf_counter_ns() - t0
            assert len(result.spans) == spans
            return elapsed / spans

        cmp = interleave(decode, replay, min(sizes.rounds, 9))
    return [
        Figure(
            "replay.throughput",
            title,
            f"{1e9 / cmp.subject_median:,.0f} spans/s decoded and scored",
            f"{1e9 / cmp.baseline_median:,.0f} spans/s decoded only",
            cmp.ratio,
            target,
            at_most(cmp.ratio, TARGET),
            note=f"{spans:,} spans per round, OTLP protobuf file",
            data={"unit": "ns/span", "spans": spans, **cmp.as_json()},
        )
    ]
