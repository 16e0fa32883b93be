"""Replay throughput of recorded OTLP traces, against decoding the same file without scoring.

The recording: the processor figures' agent traces (root, two chat turns, five tool calls), captured from a real
TracerProvider and written as one OTLP protobuf ``TracesData`` file, as the Collector's file exporter does.
Baseline round: ``replay.read_file`` (decode to spans). Subject round: ``read_file`` then ``replay_spans``
(end order, the processor, the enriched copies). The target is on throughput: replaying keeps at least half the
decode-only rate, i.e. the cost ratio is at most 2.

Throughput floors for what a user may hand ``replay``, ``harvest`` and ``doctor`` (issue 29), each against decoding
the valid recording in the same run:

- ``replay.linear``: a recording 8x as large (32 messages against 4) costs at most 1.25x as much per byte (reading
  is linear in the input);
- ``replay.garbage.zeros``: a file of zeros as large as the larger recording (an endless run of empty length-prefixed
  messages) is refused at no more than that recording's decoding cost (it was 22 s for 530 bytes);
- ``replay.garbage.zstd_bomb``: 64 KiB of zstd inflating to 2 GiB of zeros is refused at no more than the larger
  recording's decoding cost (it never reached the decompression limit in 150 s).
"""

from __future__ import annotations

import importlib.util
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks.harness import Figure, Sizes, at_most, interleave, unavailable

TARGET = 2.0  # cost of decode + score / cost of decode: throughput >= 0.5x
LINEAR = 1.25  # cost per byte of an 8x recording / of the recording
GARBAGE = 1.0  # cost of refusing garbage / of decoding the valid recording


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
        floors = _floors(Path(tmp), path, min(sizes.rounds, 9))
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
        ),
        *floors,
    ]


def _floors(tmp: Path, path: Path, rounds: int) -> list[Figure]:
    """Reading garbage and a larger recording, each against decoding the recording (cost per byte)."""
    from otel_toolcall_eval.replay import ReplayInputError, read_file

    data = path.read_bytes()
    large = tmp / "large.otlp.pb"
    framed = len(data).to_bytes(4, "big") + data  # the Collector's framing: the same message 8 times
    large.write_bytes(framed * 32)
    single = tmp / "single.otlp.pb"
    single.write_bytes(framed * 4)  # past the sizes where a larger read is cheaper per byte (caches warming up)
    zeros = tmp / "zeros.bin"
    zeros.write_bytes(bytes(large.stat().st_size))
    figures: list[Figure] = []

    def per_byte(file: Path) -> Callable[[], float]:
        size = file.stat().st_size

        def read() -> float:
            t0 = time.perf_counter_ns()
            read_file(file)
            return (time.perf_counter_ns() - t0) / size

        return read

    def refused(file: Path) -> Callable[[], float]:
        def read() -> float:
            t0 = time.perf_counter_ns()
            try:
                read_file(file)
            except ReplayInputError:
                pass
            else:
                raise AssertionError(f"{file.name} was not refused")
            return float(time.perf_counter_ns() - t0)

        return read

    def whole(file: Path) -> Callable[[], float]:
        def read() -> float:
            t0 = time.perf_counter_ns()
            read_file(file)
            return float(time.perf_counter_ns() - t0)

        return read

    linear = interleave(per_byte(single), per_byte(large), rounds)
    figures.append(
        Figure(
            "replay.linear",
            "reading a recording 8x as large, cost per byte",
            f"{linear.subject_median:.2f} ns/byte ({large.stat().st_size:,} bytes)",
            f"{linear.baseline_median:.2f} ns/byte ({single.stat().st_size:,} bytes)",
            linear.ratio,
            f"<= {LINEAR}x",
            at_most(linear.ratio, LINEAR),
            note="length-prefixed OTLP protobuf",
            data={"unit": "ns/byte", **linear.as_json()},
        )
    )
    garbage = [("zeros", zeros, f"{zeros.stat().st_size:,} zero bytes (empty length-prefixed messages)")]
    if importlib.util.find_spec("zstandard") is not None:
        import zstandard

        bomb = tmp / "bomb.zst"
        bomb.write_bytes(zstandard.ZstdCompressor(level=3).compress(bytes(64 << 20)) * 32)
        garbage.append(("zstd_bomb", bomb, f"{bomb.stat().st_size:,} bytes of zstd inflating to 2 GiB of zeros"))
    for name, file, what in garbage:
        cmp = interleave(whole(large), refused(file), rounds)
        figures.append(
            Figure(
                f"replay.garbage.{name}",
                "refusing garbage, against decoding a recording as large",
                f"{cmp.subject_median / 1e6:.2f} ms to refuse",
                f"{cmp.baseline_median / 1e6:.2f} ms to decode {large.stat().st_size:,} bytes",
                cmp.ratio,
                f"<= {GARBAGE}x",
                at_most(cmp.ratio, GARBAGE),
                note=what,
                data={"unit": "ns", **cmp.as_json()},
            )
        )
    return figures
