"""The scoring service end to end: agent-shaped OTLP over real gRPC into ``serve``, scored, exported to a local sink.

Two service processes run side by side, each with its own receivers, queue, end order, export window and OTLP/gRPC
exporter: the subject scores (``Service(config)``, the replay figure's config: every check runs), the baseline is the
pass-through (``Service(config, scoring=False)``: the same path without the processor). This process is the
senders (four threads, like four agents, raw pre-encoded ``ExportTraceServiceRequest`` bytes over one gRPC channel
each) and the sink (a real gRPC ``TraceService`` on 127.0.0.1 that records what arrives and when).

Cost: a round sends the same traffic (fresh trace ids per round, so no trace is seen twice) to one service and
stops when the sink holds every span; the figure is the **service process's CPU time** (every thread:
receivers, scoring, export) per span, read by the service itself (``time.process_time_ns``) at the start and
the end of the round, so the senders' and the sink's CPU, and other load on the machine, are not in it. Rounds
alternate ABBA; spans per second per core is 1 / (CPU seconds per span). Latency: a paced, open-loop load (a
trace of eight spans per request at a stated rate) to each service in turn; per span, the time from the start
of its request to its arrival at the sink, p50 and p99, with the export's batching delay (``schedule_delay_millis``)
in both.

Instructions (``serve.instructions``, not in ``--quick``, needs ``valgrind``): the same service children under
callgrind, the same traffic over gRPC; for each side one child takes a warm-up round and another takes two more,
and the difference per span is the work of receiving, scoring and exporting a span (every thread, start-up and
warm-up cancelled out). Shown beside the CPU-time figure, not as its target: under callgrind the threads run one at
a time, so what the shared cores add to the time (cache misses, the GIL passed between the receiving threads and the
scoring thread) is not in it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent import futures
from dataclasses import dataclass
from typing import IO, Any

from benchmarks.harness import REPO_ROOT, Figure, Sizes, at_most, interleave, part, unavailable
from benchmarks.instructions import COLLECTED

TARGET = 2.0  # CPU per span, scoring service / pass-through
SENDERS = 4
TRACES_PER_REQUEST = 8  # 64 spans per request: a busy agent's BatchSpanProcessor batch
SCHEDULE_DELAY_MS = 50  # the service's export batching delay, in both sides' latency
EXPORT_METHOD = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
# Waiting for a round's spans to be exported: as long as the service makes progress, however slowly (callgrind on a
# loaded machine runs it a hundred times slower and more); a span refused or whose export failed or went unanswered
# fails the round at once; a service none of whose counters moved for STALL_SECONDS has lost a span without counting
# it (under callgrind CALLGRIND_STALL_SECONDS). The child reports its counts every HEARTBEAT_SECONDS meanwhile.
STALL_SECONDS = 120.0
CALLGRIND_STALL_SECONDS = 600.0
HEARTBEAT_SECONDS = 20.0
LOST = ("export_failed", "export_timed_out", "rejected")  # counters of spans that will never reach the sink


# --- the service process ---------------------------------------------------------------------------------


def _child(mode: str, sink_port: int, slow: bool) -> None:
    """One service on free ports, driven over stdin: ``cpu`` -> its process CPU time (ns), ``exported N STALL`` ->
    waits for N spans exported (``wait_exported``), ``stop`` -> the stop report. Answers are JSON lines on stdout.
    ``slow`` (under callgrind): the export's timeout and the stop's at their longest, the wait polling at 20 Hz
    (its instructions are counted too, and their number follows the wall clock)."""
    from benchmarks.workload import SCHEMA_5, policy_config
    from otel_toolcall_eval.serve import Service

    base = policy_config(SCHEMA_5)
    serve = base.serve.model_validate(
        {
            "http_port": None,
            "grpc_port": 0,
            "max_queue_spans": 100_000,
            "max_concurrent_requests": 64,
            # no root grace window: the latency figure is the scoring's; the window holds each root back by design
            # (serve.root_grace_seconds, docs/serve.md), one span in eight of these traces
            "root_grace_seconds": 0,
            "export": {
                "endpoint": f"http://127.0.0.1:{sink_port}",
                "protocol": "grpc",
                "max_queue_spans": 8192,
                "schedule_delay_millis": SCHEDULE_DELAY_MS,
                **({"timeout_seconds": 600} if slow else {}),
            },
        }
    )
    service = Service(base.model_copy(update={"serve": serve}), scoring=mode == "score")
    service.start()
    _answer({"grpc_port": service.grpc_port})
    for line in sys.stdin:
        command, *rest = line.split()
        if command == "cpu":
            _answer({"cpu_ns": time.process_time_ns()})
        elif command == "exported":
            poll = 0.05 if slow else 0.002
            got = wait_exported(service.metrics, int(rest[0]), stall=float(rest[1]), poll=poll, beat=_answer)
            _answer({**got, "cpu_ns": time.process_time_ns()})
        elif command == "stop":
            report = service.stop(timeout=600 if slow else 30)
            _answer({"complete": report.complete, "exported": report.exported})
            return


def service_counts(metrics: Any) -> dict[str, int]:
    """A service's span counters (``serve.metrics``): what it received, scored, exported, and lost."""
    from otel_toolcall_eval.serve.metrics import EXPORTED, RECEIVED, REJECTED_SPANS, SCORED

    return {
        "received": metrics.total(RECEIVED),
        "scored": metrics.total(SCORED),
        "exported": metrics.total(EXPORTED, "ok"),
        "export_failed": metrics.total(EXPORTED, "failed"),
        "export_timed_out": metrics.total(EXPORTED, "timed_out"),
        "rejected": metrics.total(REJECTED_SPANS),
    }


def wait_exported(
    metrics: Any,
    want: int,
    *,
    stall: float,
    poll: float,
    beat: Callable[[dict[str, Any]], None],
    heartbeat: float = HEARTBEAT_SECONDS,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Any]:
    """Wait until the service exported ``want`` spans, and return its counts with a ``state``: ``done``; ``lost``
    at once when a span was refused or its export failed or went unanswered (it will never be exported: waiting
    longer would only hide it); ``stalled`` when no counter moved for ``stall`` seconds. No deadline while the
    counters move: how long a round takes is the machine's business, whether every span arrives is the bench's.
    ``beat`` gets the counts (state ``waiting``) every ``heartbeat`` seconds meanwhile."""
    last: dict[str, int] = {}
    moved = beaten = clock()
    while True:
        counts = service_counts(metrics)
        now = clock()
        if counts["exported"] >= want:
            return {**counts, "state": "done"}
        if any(counts[k] for k in LOST):
            return {**counts, "state": "lost"}
        if counts != last:
            last, moved = counts, now
        elif now - moved > stall:
            return {**counts, "state": "stalled"}
        if now - beaten >= heartbeat:
            beat({**counts, "state": "waiting"})
            beaten = now
        sleep(poll)


def _answer(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


class ServiceProcess:
    """One service child; ``prefix`` runs it under another program (``valgrind``, for the instruction counts: the
    child is then told it is slow). ``timeout``: how long one answer may take (a heartbeat comes every
    ``HEARTBEAT_SECONDS`` while it waits for spans); ``stall``: how long the service may show no progress at all."""

    def __init__(
        self, mode: str, sink_port: int, timeout: float, prefix: Sequence[str] = (), stall: float = STALL_SECONDS
    ) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
        if prefix:
            env["PYTHONHASHSEED"] = "0"  # set and dict layouts repeat from run to run
        self.mode = mode
        self.stall = stall
        self._timeout = timeout
        slow = ["--slow"] if prefix else []
        self._proc = subprocess.Popen(
            [*prefix, sys.executable, "-m", "benchmarks.serve", "--child", mode, "--sink-port", str(sink_port), *slow],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        self.grpc_port = int(self._read()["grpc_port"])
        self.exported = 0  # spans this service was asked to export so far

    def ask(self, command: str) -> dict[str, Any]:
        stdin = self._proc.stdin
        assert stdin is not None
        stdin.write(command + "\n")
        stdin.flush()
        return self._read()

    def wait_exported(self, want: int) -> dict[str, Any]:
        """The child's ``wait_exported`` answer, its heartbeats read past."""
        answer = self.ask(f"exported {want} {self.stall}")
        while answer.get("state") == "waiting":
            answer = self._read()
        return answer

    def _read(self) -> dict[str, Any]:
        stdout = self._proc.stdout
        assert stdout is not None
        result: list[str] = []
        reader = threading.Thread(target=lambda: result.append(stdout.readline()), daemon=True)
        reader.start()
        reader.join(self._timeout)
        if not result or not result[0]:
            self._proc.kill()
            raise RuntimeError(f"the {self.mode} service did not answer: {_tail(self._proc.stderr)}")
        answer: dict[str, Any] = json.loads(result[0])
        return answer

    def stop(self) -> dict[str, Any]:
        try:
            return self.ask("stop")
        finally:
            try:
                self._proc.wait(timeout=self._timeout)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(timeout=10)

    def stderr_tail(self) -> str:
        """What the child wrote to stderr (after it ended): callgrind's summary line for the instruction counts."""
        return _tail(self._proc.stderr)


def _tail(stream: IO[str] | None) -> str:
    return "" if stream is None else stream.read()[-2000:]


# --- the sink and the senders ------------------------------------------------------------------------------


class Sink:
    """A real gRPC ``TraceService`` on 127.0.0.1: per request, its arrival time and its spans' (trace id, name,
    attribute keys) (decoded after the answer, off the service's clock)."""

    def __init__(self) -> None:
        import grpc

        self._lock = threading.Lock()
        self._arrivals: list[tuple[float, bytes]] = []
        self._count = 0
        self._cond = threading.Condition(self._lock)

        def export(request: bytes, context: Any) -> bytes:
            now = time.monotonic()
            with self._cond:
                self._arrivals.append((now, request))
                self._cond.notify_all()
            return b""  # an empty ExportTraceServiceResponse

        handler = grpc.method_handlers_generic_handler(
            "opentelemetry.proto.collector.trace.v1.TraceService",
            {"Export": grpc.unary_unary_rpc_method_handler(export)},  # raw bytes in and out
        )
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="bench-sink"))
        self._server.add_generic_rpc_handlers((handler,))
        self.port = self._server.add_insecure_port("127.0.0.1:0")
        self._server.start()

    def take(self) -> list[tuple[float, bytes]]:
        with self._lock:
            out, self._arrivals = self._arrivals, []
            return out

    def close(self) -> None:
        self._server.stop(grace=None).wait(5)


@dataclass
class Arrived:
    at: float
    trace_id: bytes
    name: str
    keys: frozenset[str]


def decode(arrivals: Sequence[tuple[float, bytes]]) -> list[Arrived]:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    out = []
    for at, raw in arrivals:
        message = ExportTraceServiceRequest.FromString(raw)
        for rs in message.resource_spans:
            for ss in rs.scope_spans:
                for span in ss.spans:
                    out.append(Arrived(at, span.trace_id, span.name, frozenset(kv.key for kv in span.attributes)))
    return out


def recorded_traces(traces: int) -> list[list[Any]]:
    """The processor figures' agent traces (root, two chat turns, five tool calls), recorded from a real
    TracerProvider; each trace's spans as OTLP ``Span`` messages with their resource and scope."""
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
    message = encode_spans(exporter.get_finished_spans())
    by_trace: dict[bytes, list[Any]] = {}
    for rs in message.resource_spans:
        for ss in rs.scope_spans:
            for span in ss.spans:
                by_trace.setdefault(span.trace_id, []).append(span)
    return list(by_trace.values())


class Traffic:
    """Pre-encoded requests: ``TRACES_PER_REQUEST`` traces each, every trace id made unique per use."""

    def __init__(self, traces: list[list[Any]]) -> None:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

        self._traces = traces
        self._template = ExportTraceServiceRequest()
        rs = self._template.resource_spans.add()
        rs.resource.attributes.add(key="service.name").value.string_value = "records-assistant"
        rs.scope_spans.add().scope.name = "recorded-agent"
        self._serial = 0
        self.spans_per_trace = len(traces[0])

    def requests(self, traces_per_request: int = TRACES_PER_REQUEST) -> tuple[list[bytes], int]:
        """One pass over the recorded traces, as request bodies; returns them and the number of spans."""
        bodies, spans = [], 0
        for start in range(0, len(self._traces), traces_per_request):
            message = type(self._template)()
            message.CopyFrom(self._template)
            out = message.resource_spans[0].scope_spans[0].spans
            for trace in self._traces[start : start + traces_per_request]:
                self._serial += 1
                trace_id = self._serial.to_bytes(16, "big")
                for span in trace:
                    copy = out.add()
                    copy.CopyFrom(span)
                    copy.trace_id = trace_id
                    spans += 1
            bodies.append(message.SerializeToString())
        return bodies, spans


def send_all(port: int, bodies: Sequence[bytes], timeout: float = 60.0) -> list[float]:
    """Every body over gRPC from ``SENDERS`` threads (one channel each); returns each request's start time. A
    request refused or unanswered within ``timeout`` raises here (its spans would never arrive)."""
    import grpc

    starts = [0.0] * len(bodies)

    def sender(k: int) -> None:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            export: Any = channel.unary_unary(EXPORT_METHOD)  # raw bytes: the encoding was done before the round
            for i in range(k, len(bodies), SENDERS):
                starts[i] = time.monotonic()
                export(bodies[i], timeout=timeout)

    with futures.ThreadPoolExecutor(max_workers=SENDERS, thread_name_prefix="bench-sender") as pool:
        for sent in [pool.submit(sender, k) for k in range(SENDERS)]:
            sent.result()
    return starts


def wait_for(sink: Sink, service: ServiceProcess, spans: int) -> list[Arrived]:
    service.exported += spans
    answer = service.wait_exported(service.exported)
    if answer["state"] != "done":
        raise RuntimeError(
            f"the {service.mode} service exported {answer['exported']} of {service.exported} spans, {answer['state']}"
            f" (received {answer['received']}, scored {answer['scored']}, export failed {answer['export_failed']},"
            f" unanswered {answer['export_timed_out']}, refused {answer['rejected']})"
        )
    deadline = time.monotonic() + 60  # the exporter had its answer: the sink holds them
    arrivals: list[tuple[float, bytes]] = []
    got = 0
    while True:  # the exporter's answer came back, so the sink has them; decoded once complete
        batch = sink.take()
        arrivals += batch
        got += sum(_count(raw) for _, raw in batch)
        if got >= spans or time.monotonic() > deadline:
            break
        time.sleep(0.002)
    return decode(arrivals)


def _count(raw: bytes) -> int:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    message = ExportTraceServiceRequest.FromString(raw)
    return sum(len(ss.spans) for rs in message.resource_spans for ss in rs.scope_spans)


# --- the figures -------------------------------------------------------------------------------------------


def cost_round(sink: Sink, service: ServiceProcess, traffic: Traffic) -> float:
    bodies, spans = traffic.requests()
    before = service.ask("cpu")["cpu_ns"]
    send_all(service.grpc_port, bodies, timeout=max(60.0, service.stall))
    arrived = wait_for(sink, service, spans)
    after = service.ask("cpu")["cpu_ns"]
    if len(arrived) != spans:
        raise RuntimeError(f"{service.mode}: {len(arrived)} of {spans} spans reached the sink")
    check_scored(arrived, scored=service.mode == "score")
    return float(after - before) / spans


def check_scored(arrived: Sequence[Arrived], *, scored: bool) -> None:
    """Refuse to time a path that does not do what it says: the subject's tool spans carry their scores and every
    root a verdict; the pass-through's carry none."""
    from otel_toolcall_eval import attributes as A

    tools = [a for a in arrived if a.name.startswith("execute_tool")]
    roots = [a for a in arrived if a.name.startswith("invoke_agent")]
    marked = sum(A.SCHEMA_VALID in a.keys for a in tools)
    verdicts = sum(A.TRACE_COMPOSITE_OK in a.keys for a in roots)
    want = (len(tools), len(roots)) if scored else (0, 0)
    if (marked, verdicts) != want or not tools:
        raise AssertionError(f"scored={scored}: {marked}/{len(tools)} tool spans scored, {verdicts}/{len(roots)} roots")


def latency_run(
    sink: Sink, service: ServiceProcess, traffic: Traffic, rate: float, seconds: float
) -> tuple[list[float], float]:
    """One trace per request at ``rate`` spans/s (open loop: a request starts on schedule, not after the last
    answer) for ``seconds``; per span, the seconds from its request's start to its arrival at the sink, and the
    rate achieved."""
    import grpc

    bodies, spans = traffic.requests(traces_per_request=1)
    interval = traffic.spans_per_trace / rate
    count = min(len(bodies), max(1, int(seconds / interval)))
    bodies, spans = bodies[:count], count * traffic.spans_per_trace
    starts: dict[bytes, float] = {}
    pool = futures.ThreadPoolExecutor(max_workers=SENDERS, thread_name_prefix="bench-sender")
    with grpc.insecure_channel(f"127.0.0.1:{service.grpc_port}") as channel:
        export: Any = channel.unary_unary(EXPORT_METHOD)
        export(bodies[0], timeout=60)  # warm the channel; its spans count too
        starts[_trace_of(bodies[0])] = time.monotonic()
        begin = time.monotonic()
        pending = []
        for i, body in enumerate(bodies[1:], start=1):
            due = begin + i * interval
            delay = due - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            starts[_trace_of(body)] = time.monotonic()
            pending.append(pool.submit(export, body, timeout=60))
        for f in pending:
            f.result()
        elapsed = time.monotonic() - begin
    pool.shutdown()
    arrived = wait_for(sink, service, spans)
    return [a.at - starts[a.trace_id] for a in arrived if a.trace_id in starts], spans / max(elapsed, 1e-9)


def _trace_of(body: bytes) -> bytes:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    trace_id: bytes = ExportTraceServiceRequest.FromString(body).resource_spans[0].scope_spans[0].spans[0].trace_id
    return trace_id


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


INSTRUCTION_TRACES = 100  # per round under callgrind: 800 spans
INSTRUCTION_ROUNDS = 2  # measured rounds, after one warm-up round that both children run


def _instructions(sink: Sink, mode: str, traffic: Traffic, rounds: int, timeout: float, stall: float) -> int:
    """Instructions (callgrind's Ir, every thread) of one service child that takes ``rounds`` cost rounds."""
    service = ServiceProcess(
        mode,
        sink.port,
        timeout,
        prefix=("valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null"),
        stall=stall,
    )
    try:
        for _ in range(rounds):
            cost_round(sink, service, traffic)
        service.stop()
    finally:
        if service._proc.poll() is None:
            service._proc.kill()
    found = COLLECTED.search(service.stderr_tail())
    if found is None:
        raise RuntimeError(f"the {mode} service under callgrind reported no count")
    return int(found.group(1))


def instruction_counts(timeout: float, stall: float) -> dict[str, Any]:
    """Per span, the instructions the service executes (receivers, scoring, export: every thread), scoring and
    pass-through: for each, a child that takes one warm-up round and one that takes ``1 + INSTRUCTION_ROUNDS``,
    the difference divided by the spans of the extra rounds (start-up and warm-up cancel out). Under callgrind the
    threads run one at a time, so this is the work, without what two shared cores add to the time (cache misses,
    the GIL handed between the receiving threads and the scoring thread)."""
    sink = Sink()
    try:
        traffic = Traffic(recorded_traces(INSTRUCTION_TRACES))
        spans = INSTRUCTION_ROUNDS * INSTRUCTION_TRACES * traffic.spans_per_trace
        counts = {
            f"{mode}/{rounds}": _instructions(sink, mode, traffic, rounds, timeout, stall)
            for mode in ("pass", "score")
            for rounds in (1, 1 + INSTRUCTION_ROUNDS)
        }
    finally:
        sink.close()
    per_span = {m: (counts[f"{m}/{1 + INSTRUCTION_ROUNDS}"] - counts[f"{m}/1"]) / spans for m in ("pass", "score")}
    return {"spans": spans, "counts": counts, "per_span": per_span, "ratio": per_span["score"] / per_span["pass"]}


THROUGHPUT = (
    "serve.throughput",
    "scoring service, receive + score + export over OTLP/gRPC, CPU per span against the pass-through",
)
LATENCY = ("serve.latency", "latency the scoring service adds, request start to arrival at the next hop, p50 / p99")
COMPLETE = ("serve.complete", "every span the services accepted was exported when they stopped")
INSTRUCTIONS = (
    "serve.instructions",
    "scoring service, receive + score + export over OTLP/gRPC, instructions per span against the pass-through",
)


def _instruction_figure(sizes: Sizes) -> Figure:
    fig_id, title = INSTRUCTIONS
    if sizes.name == "quick":
        return unavailable(fig_id, title, "-", "not in --quick (minutes under callgrind)")
    if shutil.which("valgrind") is None:
        return unavailable(fig_id, title, "-", "valgrind not installed")
    r = instruction_counts(timeout=sizes.child_timeout, stall=CALLGRIND_STALL_SECONDS)
    return Figure(
        fig_id,
        title,
        f"{r['per_span']['score']:,.0f} instructions",
        f"{r['per_span']['pass']:,.0f} (pass-through)",
        r["ratio"],
        "-",
        "info",
        note=(
            f"callgrind, {r['spans']:,} spans after a warm-up round, start-up subtracted, every thread counted: "
            "the work, without what two shared cores add to its time; the target is the CPU-time figure's"
        ),
        data={"counts": r["counts"], "per_span": r["per_span"]},
    )


class Services:
    """The sink and the two service children (pass-through, scoring) of the CPU-time and latency parts."""

    def __init__(self, sizes: Sizes) -> None:
        self.sink = Sink()
        self.all: list[ServiceProcess] = []
        try:
            for mode in ("pass", "score"):
                self.all.append(ServiceProcess(mode, self.sink.port, sizes.child_timeout))
        except BaseException:
            self.close()
            raise
        self.passthrough, self.scoring = self.all

    def stop(self) -> list[Figure]:
        """Stop both; an error row when one did not export everything it accepted (a span lost at the end)."""
        stops = [s.stop() for s in self.all]
        if all(s["complete"] for s in stops):
            return []
        return [Figure(*COMPLETE, "-", "-", None, "-", "error", note=f"stop reports: {stops}")]

    def close(self) -> None:
        for s in self.all:
            if s._proc.poll() is None:
                s._proc.kill()
        self.sink.close()


def _throughput(services: Services, traffic: Traffic, traces: int, rounds: int) -> Figure:
    sink, passthrough, scoring = services.sink, services.passthrough, services.scoring
    cmp = interleave(
        lambda: cost_round(sink, passthrough, traffic),
        lambda: cost_round(sink, scoring, traffic),
        rounds,
    )
    spans = traffic.spans_per_trace * traces
    per_core = {k: 1e9 / v for k, v in (("score", cmp.subject_median), ("pass", cmp.baseline_median))}
    return Figure(
        *THROUGHPUT,
        f"{per_core['score']:,.0f} spans/s per core ({cmp.subject_median / 1000:.1f} us CPU/span)",
        f"{per_core['pass']:,.0f} spans/s per core ({cmp.baseline_median / 1000:.1f} us CPU/span, pass-through)",
        cmp.ratio,
        f"<= {TARGET}x cost",
        at_most(cmp.ratio, TARGET),
        note=f"{spans:,} spans per round in requests of {TRACES_PER_REQUEST} agent traces, {SENDERS} senders",
        data={"unit": "ns CPU/span", "spans": spans, **cmp.as_json()},
    )


def _latency(services: Services, spans_per_trace: int, rate: float, seconds: float) -> Figure:
    latencies: dict[str, list[float]] = {"pass": [], "score": []}
    rates: dict[str, list[float]] = {"pass": [], "score": []}
    paced = Traffic(recorded_traces(int(rate * seconds / 2 / spans_per_trace) + 1))
    p, s = services.passthrough, services.scoring
    for service in (p, s, s, p):  # ABBA, each run half the time
        got, achieved = latency_run(services.sink, service, paced, rate, seconds / 2)
        latencies[service.mode] += got
        rates[service.mode].append(achieved)
    pct = {k: (percentile(v, 0.5) * 1000, percentile(v, 0.99) * 1000) for k, v in latencies.items()}
    load = f"{statistics.median(rates['score']):,.0f} spans/s offered"
    return Figure(
        *LATENCY,
        f"p50 {pct['score'][0]:.1f} ms, p99 {pct['score'][1]:.1f} ms",
        f"p50 {pct['pass'][0]:.1f} ms, p99 {pct['pass'][1]:.1f} ms (pass-through)",
        pct["score"][1] / pct["pass"][1],
        "-",
        "info",
        note=(
            f"{load}, one 8-span trace per request, open loop; export batching delay "
            f"{SCHEDULE_DELAY_MS} ms in both; ratio of the p99s"
        ),
        data={
            "p50_ms": {k: round(v[0], 3) for k, v in pct.items()},
            "p99_ms": {k: round(v[1], 3) for k, v in pct.items()},
            "samples": {k: len(v) for k, v in latencies.items()},
            "achieved_spans_per_s": rates,
        },
    )


def _with_services(sizes: Sizes) -> list[Figure]:
    full = sizes.name == "full"
    traces = 300 if full else 40
    rate, seconds = (1000.0, 8.0) if full else (500.0, 1.5)
    services = Services(sizes)
    try:
        traffic = Traffic(recorded_traces(traces))
        return [
            *part([THROUGHPUT], lambda: [_throughput(services, traffic, traces, sizes.rounds)]),
            *part([LATENCY], lambda: [_latency(services, traffic.spans_per_trace, rate, seconds)]),
            *part([COMPLETE], services.stop),
        ]
    finally:
        services.close()


def run(sizes: Sizes) -> list[Figure]:
    """Three parts, each reported on its own (``harness.part``): CPU per span, latency, instructions; a part that
    fails (a span lost, a child that crashed or did not answer) is an error row, and the others keep their figures."""
    return [
        *part([THROUGHPUT, LATENCY], lambda: _with_services(sizes)),
        *part([INSTRUCTIONS], lambda: [_instruction_figure(sizes)]),
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.serve")
    parser.add_argument("--child", choices=["score", "pass"], required=True)
    parser.add_argument("--sink-port", type=int, required=True)
    parser.add_argument("--slow", action="store_true", help="under callgrind: the longest timeouts, slower polling")
    args = parser.parse_args(argv)
    _child(args.child, args.sink_port, args.slow)
    return 0


if __name__ == "__main__":
    sys.exit(main())
