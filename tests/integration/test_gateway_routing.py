"""Why the gateway routes by trace id: two scoring-service replicas behind a router (``trace_router``, the
stand-in for the Collector's ``load_balancing`` exporter, whose binary cannot run here).

Routed by trace id, every trace lands whole on one replica and the spans at the next hop equal, byte for byte,
what the in-process processor writes. Spread round robin (what a plain load balancer does), a trace's spans are
scored by two replicas that each see part of it: the replica with the root writes a verdict from the calls it
saw, and verdicts come out wrong. Trace ids come from a seeded generator, so the routes are the same every run.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor, SpanExporter
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.id_generator import IdGenerator

from otel_toolcall_eval import ToolCallEvalProcessor
from otel_toolcall_eval import attributes as A
from otel_toolcall_eval.config import EvalConfig
from otel_toolcall_eval.demo.agent import ScriptedAgent
from otel_toolcall_eval.serve import Service
from otel_toolcall_eval.serve.metrics import RECEIVED
from tests.helpers import FAILURES, config_for, wait_until

from .otlp_receiver import GrpcTraceReceiver, WireSpan, assert_same, attributes, wire
from .trace_router import HashRing, RoutingExporter

pytestmark = pytest.mark.integration

TRACES = 12


class SeededIds(IdGenerator):
    def __init__(self, seed: int) -> None:
        self._rng = random.Random(seed)

    def generate_span_id(self) -> int:
        return self._rng.getrandbits(64) or 1

    def generate_trace_id(self) -> int:
        return self._rng.getrandbits(128) or 1


def run_agent(exporter: SpanExporter, config: EvalConfig) -> list[ReadableSpan]:
    """The scripted agent's raw spans to ``exporter`` (batches of up to 8 spans, so a trace spans several export
    calls); returns what the in-process processor scores for the same spans (the reference)."""
    reference = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource({"service.name": "agent"}), id_generator=SeededIds(16))
    provider.add_span_processor(BatchSpanProcessor(exporter, max_export_batch_size=8, schedule_delay_millis=20))
    provider.add_span_processor(ToolCallEvalProcessor(SimpleSpanProcessor(reference), config))
    agent = ScriptedAgent(provider.get_tracer("agent.scripted"), seed=16)
    for _ in range(TRACES):
        agent.run(FAILURES)
    provider.force_flush()
    provider.shutdown()
    return list(reference.get_finished_spans())


@pytest.fixture
def replicas(receiver: GrpcTraceReceiver) -> Iterator[list[Service]]:
    services = [Service(config_for(receiver)) for _ in range(2)]
    for svc in services:
        svc.start()
    yield services
    for svc in services:
        svc.stop(timeout=10)


def endpoints(replicas: list[Service]) -> list[str]:
    return [f"127.0.0.1:{svc.grpc_port}" for svc in replicas]


def root_verdicts(spans: list[WireSpan]) -> dict[bytes, dict[str, object]]:
    out = {}
    for s in spans:
        attrs = attributes(s.span.attributes)
        if A.TRACE_CORRECT in attrs:
            assert s.span.trace_id not in out, "two verdicts for one trace"
            out[s.span.trace_id] = {k: v for k, v in attrs.items() if k.startswith("toolcall_eval.trace.")}
    return out


def test_the_ring_spreads_traces_and_keeps_each_on_one_endpoint() -> None:
    ring = HashRing(["10.0.0.1:4317", "10.0.0.2:4317", "10.0.0.3:4317"])  # names only: nothing is contacted
    rng = random.Random(3)
    counts: dict[str, int] = {}
    for _ in range(3000):
        trace_id = rng.getrandbits(128)
        assert ring.endpoint_for(trace_id) == ring.endpoint_for(trace_id)
        counts[ring.endpoint_for(trace_id)] = counts.get(ring.endpoint_for(trace_id), 0) + 1
    assert len(counts) == 3 and min(counts.values()) > 600  # roughly even (1000 each)


def test_routed_by_trace_id_every_verdict_equals_the_in_process_one(
    receiver: GrpcTraceReceiver, replicas: list[Service]
) -> None:
    router = RoutingExporter(endpoints(replicas), by_trace_id=True)
    reference = run_agent(router, replicas[0].processor.config)
    got = receiver.wait_for_spans(len(reference), timeout=30)
    assert_same(got, wire(reference))  # scores, ids, parents, events, resources: as in-process
    assert all(svc.metrics.total(RECEIVED) > 0 for svc in replicas)  # both replicas scored traces
    assert not set.intersection(*router.sent.values())  # and no trace reached both


def test_spread_round_robin_a_split_trace_gets_a_wrong_verdict(
    receiver: GrpcTraceReceiver, replicas: list[Service]
) -> None:
    router = RoutingExporter(endpoints(replicas), by_trace_id=False)
    reference = run_agent(router, replicas[0].processor.config)
    split = set.intersection(*router.sent.values())
    assert split  # some traces reached both replicas
    wait_until(lambda: len(receiver.spans()) >= len(reference), "every span at the next hop", timeout=30)
    for svc in replicas:  # the part without its root is finalized at shutdown, without a verdict of its own
        svc.stop(timeout=10)
    expected = root_verdicts(wire(reference))
    got = root_verdicts(receiver.spans())
    wrong = {tid for tid in expected if got.get(tid) != expected[tid]}
    assert wrong and {int.from_bytes(t, "big") for t in wrong} <= split  # only split traces, and some of them
    whole = [tid for tid in expected if int.from_bytes(tid, "big") not in split]
    assert all(got[tid] == expected[tid] for tid in whole)
