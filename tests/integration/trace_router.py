"""A stand-in for the Collector gateway (collector-config/gateway.yaml), which cannot run here (no Collector
binary): a span exporter that spreads spans over several service replicas, either by trace id the way the
``load_balancing`` exporter does or, for contrast, round robin over small batches as a plain L4/L7 balancer
in front of the replicas would.

The ring follows the exporter's documented algorithm (consistent_hashing.go in opentelemetry-collector-contrib):
each endpoint takes 100 positions, ``crc32(endpoint + byte(i)) mod 36000`` (a position already taken is
skipped), and a trace goes to the first position at or after ``crc32(trace id bytes) mod 36000``, wrapping
around. Each replica is reached through the SDK's real OTLP/gRPC exporter.
"""

from __future__ import annotations

import bisect
import itertools
import zlib
from collections.abc import Sequence

from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

POSITIONS = 36_000
WEIGHT = 100


class HashRing:
    def __init__(self, endpoints: Sequence[str]) -> None:
        taken: dict[int, str] = {}
        for endpoint in endpoints:
            for i in range(WEIGHT):
                pos = zlib.crc32(endpoint.encode() + bytes([i])) % POSITIONS
                taken.setdefault(pos, endpoint)
        self._positions = sorted(taken)
        self._endpoints = [taken[p] for p in self._positions]

    def endpoint_for(self, trace_id: int) -> str:
        pos = zlib.crc32(trace_id.to_bytes(16, "big")) % POSITIONS
        at = bisect.bisect_left(self._positions, pos)
        return self._endpoints[at % len(self._endpoints)]


class RoutingExporter(SpanExporter):
    """``by_trace_id``: the gateway's routing; otherwise round robin, ``batch`` spans at a time."""

    def __init__(self, endpoints: Sequence[str], *, by_trace_id: bool, batch: int = 3) -> None:
        self.ring = HashRing(endpoints)
        self.by_trace_id = by_trace_id
        self.batch = batch
        self._exporters = {e: OTLPSpanExporter(endpoint=f"http://{e}", insecure=True) for e in endpoints}
        self._next = itertools.cycle(endpoints)
        self.sent: dict[str, set[int]] = {e: set() for e in endpoints}  # trace ids each replica got spans of

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        groups: list[tuple[str, list[ReadableSpan]]] = []
        if self.by_trace_id:
            routed: dict[str, list[ReadableSpan]] = {}
            for span in spans:
                assert span.context is not None
                routed.setdefault(self.ring.endpoint_for(span.context.trace_id), []).append(span)
            groups = list(routed.items())
        else:
            groups = [(next(self._next), list(spans[i : i + self.batch])) for i in range(0, len(spans), self.batch)]
        ok = True
        for endpoint, group in groups:
            self.sent[endpoint].update(s.context.trace_id for s in group if s.context is not None)
            ok = self._exporters[endpoint].export(group) is SpanExportResult.SUCCESS and ok
        return SpanExportResult.SUCCESS if ok else SpanExportResult.FAILURE

    def shutdown(self) -> None:
        for exporter in self._exporters.values():
            exporter.shutdown()
