"""The shared test helpers, one module: test modules import from here (or from the fakes and receivers beside the
tests that use them), never from each other (tests/test_architecture.py checks it). The fixtures they share are
defined once, in tests/conftest.py.

First a real TracerProvider with the processor in front of an in-memory exporter and metric reader and the span
builders; then, by section, the inputs and helpers several suites share (recorded-trace inputs, offline runs, the
parity traces, the guard, the scoring service)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
import pytest
import yaml
from hypothesis import strategies as st
from opentelemetry.context import Context
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode, Tracer

from otel_toolcall_eval import EvalConfig, ToolCallEvalProcessor, records
from otel_toolcall_eval import attributes as A
from otel_toolcall_eval.attributes import PREFIX
from otel_toolcall_eval.cli import main
from otel_toolcall_eval.dataset.io import read_cases
from otel_toolcall_eval.dataset.models import DatasetCase
from otel_toolcall_eval.demo.agent import FAILURE_CLASSES, ScriptedAgent
from otel_toolcall_eval.guard import Guard
from otel_toolcall_eval.offline.prepare import Preparer
from otel_toolcall_eval.offline.runs import parse_run_line
from otel_toolcall_eval.offline.score import CaseResult, score_case
from otel_toolcall_eval.replay.otlp import encode_json

if TYPE_CHECKING:
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter

    from otel_toolcall_eval.serve import Service
    from tests.integration.otlp_receiver import GrpcTraceReceiver

# The package under test is the opt-in compiled build (setup.py; `make test-compiled`): its hot-path modules are
# mypyc extensions, whose functions check argument types at run time and call each other without a module lookup.
# A test that relies on either (a deliberately wrong type, a monkeypatched module function) skips there, marked.
COMPILED = not (records.__file__ or "").endswith(".py")

WEATHER_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1}},
    "required": ["city"],
    "additionalProperties": False,
}
WEATHER_TOOL = {"type": "function", "name": "get_weather", "description": "Weather", "parameters": WEATHER_SCHEMA}


@dataclass
class Pipeline:
    provider: TracerProvider
    tracer: Tracer
    exporter: InMemorySpanExporter
    processor: ToolCallEvalProcessor
    reader: InMemoryMetricReader

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def by_name(self, name: str) -> list[ReadableSpan]:
        return [s for s in self.spans() if s.name == name]

    def one(self, name: str) -> ReadableSpan:
        found = self.by_name(name)
        assert len(found) == 1, f"{len(found)} spans named {name!r}: {[s.name for s in self.spans()]}"
        return found[0]

    def metric_points(self, name: str) -> list[tuple[dict[str, Any], Any]]:
        return metric_points(self.reader, name)

    def metric_sum(self, name: str, **labels: str) -> float:
        return metric_sum(self.reader, name, **labels)


def metric_points(reader: InMemoryMetricReader, name: str) -> list[tuple[dict[str, Any], Any]]:
    """(labels, value) of every point of the metric ``name`` the reader holds (a histogram's value: its count)."""
    data = reader.get_metrics_data()
    out = []
    for rm in data.resource_metrics if data else ():
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                if metric.name == name:
                    for point in metric.data.data_points:
                        value = getattr(point, "value", None)
                        if value is None:
                            value = point.count
                        out.append((dict(point.attributes or {}), value))
    return out


def metric_sum(reader: InMemoryMetricReader, name: str, **labels: str) -> float:
    return sum(v for attrs, v in metric_points(reader, name) if all(attrs.get(k) == x for k, x in labels.items()))


def make_pipeline(config: EvalConfig | None = None, **kwargs: Any) -> Pipeline:
    exporter = InMemorySpanExporter()
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    processor = ToolCallEvalProcessor(SimpleSpanProcessor(exporter), config, meter_provider=meter_provider, **kwargs)
    provider = TracerProvider()
    provider.add_span_processor(processor)
    return Pipeline(provider, provider.get_tracer("test"), exporter, processor, reader)


def scores(span: ReadableSpan) -> dict[str, Any]:
    """The toolcall_eval.* attributes of a span, prefix stripped, sequences as lists."""
    return {
        k[len(PREFIX) :]: list(v) if isinstance(v, tuple) else v
        for k, v in (span.attributes or {}).items()
        if k.startswith(PREFIX)
    }


def genai_turn(
    tracer: Tracer,
    name: str,
    calls: Sequence[tuple[str, str, Any]] = (),
    replies: Sequence[tuple[str, str]] = (),
    tools: list[dict[str, Any]] | None = None,
) -> None:
    """A GenAI chat span offering ``tools``, answering ``replies`` ((call id, reply text): ``tool_call_response``
    parts in its input) and requesting ``calls`` ((call id, tool, arguments))."""
    attrs: dict[str, Any] = {"gen_ai.operation.name": "chat"}
    if tools is not None:
        attrs["gen_ai.tool.definitions"] = json.dumps(tools)
    if calls:
        parts = [{"type": "tool_call", "id": c, "name": n, "arguments": a} for c, n, a in calls]
        attrs["gen_ai.output.messages"] = json.dumps([{"role": "assistant", "parts": parts}])
    if replies:
        parts = [{"type": "tool_call_response", "id": c, "response": text} for c, text in replies]
        attrs["gen_ai.input.messages"] = json.dumps([{"role": "user", "parts": parts}])
    with tracer.start_as_current_span(name, attributes=attrs):
        pass


def chat_span(tracer: Tracer, tools: list[dict[str, Any]] | None = None, calls: list[tuple[str, str]] = ()) -> None:
    """A GenAI chat span that offers ``tools`` and requests ``calls`` ((id, name) pairs) in one turn."""
    attrs: dict[str, Any] = {"gen_ai.operation.name": "chat"}
    if tools is not None:
        attrs["gen_ai.tool.definitions"] = json.dumps(tools)
    if calls:
        parts = [{"type": "tool_call", "id": cid, "name": name, "arguments": {}} for cid, name in calls]
        attrs["gen_ai.output.messages"] = json.dumps([{"role": "assistant", "parts": parts}])
    with tracer.start_as_current_span("chat model", attributes=attrs):
        pass


def tool_span(
    tracer: Tracer,
    name: str,
    arguments: Any = None,
    *,
    call_id: str | None = None,
    result: Any = None,
    error: Exception | None = None,
    extra: dict[str, Any] | None = None,
) -> None:
    """A GenAI execute_tool span; ``error`` is recorded as status ERROR plus an exception event."""
    attrs: dict[str, Any] = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name}
    if arguments is not None:
        attrs["gen_ai.tool.call.arguments"] = arguments if isinstance(arguments, str) else json.dumps(arguments)
    if call_id is not None:
        attrs["gen_ai.tool.call.id"] = call_id
    if result is not None:
        attrs["gen_ai.tool.call.result"] = result
    attrs.update(extra or {})
    try:
        with tracer.start_as_current_span(f"execute_tool {name}", attributes=attrs):
            if error is not None:
                raise error
    except Exception as exc:
        if exc is not error:
            raise


def assert_replay_matches(
    raw: list[ReadableSpan], online: list[ReadableSpan], config: EvalConfig | None = None
) -> None:
    """Spans as recorded, encoded as OTLP JSON, decoded and replayed, get exactly the scores they got online."""
    from otel_toolcall_eval.replay import replay_spans
    from otel_toolcall_eval.replay.otlp import encode_json, request_from_json, spans_from_request

    document = json.loads(json.dumps(encode_json(raw)))
    replayed = replay_spans(spans_from_request(request_from_json(document)), config).spans

    def by_id(spans: list[ReadableSpan]) -> dict[int, dict[str, Any]]:
        return {s.context.span_id: scores(s) for s in spans if s.context is not None}

    assert by_id(replayed) == by_id(online)


def report_from_fork(work: Callable[[], Any]) -> Any:
    """Fork; the child runs ``work`` and sends its JSON-able result back through a pipe, then leaves without
    cleanup (as a pre-fork server's worker would not run the parent's atexit). The child's exit status must be 0."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.write(write, json.dumps(work()).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    with os.fdopen(read) as fh:
        report = json.loads(fh.read() or "null")
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "the forked child failed"
    return report


class Recorder(SpanProcessor):
    """A downstream processor that records every hook call."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.ended: list[ReadableSpan] = []

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        self.calls.append("on_start")

    def _on_ending(self, span: Span) -> None:
        self.calls.append("_on_ending")

    def on_end(self, span: ReadableSpan) -> None:
        self.calls.append("on_end")
        self.ended.append(span)

    def shutdown(self) -> None:
        self.calls.append("shutdown")

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        self.calls.append("force_flush")
        return True


LOOKUP_TOOL = {"type": "function", "name": "lookup", "parameters": {"type": "object"}}


def chat_turn(tracer: Any, *, tools: list[dict[str, Any]] | None = None, calls: list[tuple[str, str, dict[str, Any]]] = (),
          answer: str | None = None, model: str = "gpt-4o", tokens: tuple[int, int] = (100, 20)) -> None:  # fmt: skip
    attrs: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": model,
        "gen_ai.usage.input_tokens": tokens[0],
        "gen_ai.usage.output_tokens": tokens[1],
    }
    if tools is not None:
        attrs["gen_ai.tool.definitions"] = json.dumps(tools)
    parts: list[dict[str, Any]] = [{"type": "tool_call", "id": i, "name": n, "arguments": a} for i, n, a in calls]
    if answer is not None:
        parts.append({"type": "text", "content": answer})
    if parts:
        attrs["gen_ai.output.messages"] = json.dumps([{"role": "assistant", "parts": parts}])
    with tracer.start_as_current_span("chat", attributes=attrs):
        pass


def session_turn(
    tracer: Tracer,
    conversation: str | None,
    *,
    city: str = "Paris",
    fail: bool = False,
    on: str = "root",
    key: str = A.GEN_AI_CONVERSATION_ID,
) -> None:
    """One agent turn: a root, a chat span offering the tool, one tool call; the id on the root or the chat span."""
    root_attrs = {key: conversation} if conversation is not None and on == "root" else {}
    with tracer.start_as_current_span("invoke_agent", attributes=root_attrs):
        chat_attrs: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.tool.definitions": json.dumps([WEATHER_TOOL]),
        }
        if conversation is not None and on == "chat":
            chat_attrs[key] = conversation
        with tracer.start_as_current_span("chat", attributes=chat_attrs):
            pass
        if conversation is not None and on == "plain":
            with tracer.start_as_current_span("agent step", attributes={key: conversation}):
                pass
        tool_span(tracer, "get_weather", {"city": city}, error=ValueError("no such city") if fail else None)


class TimerSteps:
    """An injected ``wait``: the timer thread blocks in it until the test lets one tick through (or stop)."""

    def __init__(self) -> None:
        self._go = threading.Semaphore(0)
        self._at_wait = threading.Semaphore(0)
        self.periods: list[float] = []

    def wait(self, stop: threading.Event, seconds: float) -> bool:
        self.periods.append(seconds)
        self._at_wait.release()
        while not self._go.acquire(timeout=0.01):
            if stop.is_set():
                return True
        return stop.is_set()

    def reached_wait(self) -> None:
        assert self._at_wait.acquire(timeout=10), "the timer thread never waited"

    def tick(self) -> None:
        """One tick; returns once the thread is back in its wait (the tick done)."""
        self._go.release()
        self.reached_wait()


@dataclass
class Stages:
    """The online pipeline's stages on their own (``online/call.py``, ``turn.py``, ``finish.py``), over one trace
    store, held-spans table and metric reader, without a processor or a pipeline: what the held spans forward
    lands in ``forwarded``, what the store lets go of in ``dropped``."""

    store: Any
    held: Any
    calls: Any
    turns: Any
    finish: Any
    reader: InMemoryMetricReader
    forwarded: list[ReadableSpan]
    dropped: list[tuple[int, str]]

    def metric_sum(self, name: str, **labels: str) -> float:
        return metric_sum(self.reader, name, **labels)


def make_stages(config: EvalConfig | None = None) -> Stages:
    from otel_toolcall_eval.conventions.llm_spans import DefinitionCache
    from otel_toolcall_eval.engine import Scorer
    from otel_toolcall_eval.online.call import CallStage
    from otel_toolcall_eval.online.contain import Contained
    from otel_toolcall_eval.online.finish import FinishStage
    from otel_toolcall_eval.online.held_spans import HeldSpans
    from otel_toolcall_eval.online.metrics import EvalMetrics
    from otel_toolcall_eval.online.trace_state import TraceStore
    from otel_toolcall_eval.online.turn import TurnStage

    config = config or EvalConfig()
    limits = config.limits
    reader = InMemoryMetricReader()
    metrics = EvalMetrics(MeterProvider(metric_readers=[reader]))
    contained = Contained(metrics.record_error)
    forwarded: list[ReadableSpan] = []
    dropped: list[tuple[int, str]] = []
    store = TraceStore(
        limits.max_traces, limits.trace_ttl_seconds, lambda tid, _, reason: dropped.append((tid, reason))
    )
    held = HeldSpans(
        max_spans=limits.max_held_spans,
        max_per_trace=limits.max_held_spans_per_trace,
        max_seconds=limits.max_hold_seconds,
        forward=forwarded.append,
        on_unclassified=metrics.record_unclassified,
    )
    scorer = Scorer(config.policy(), key_failed_first_calls=True)
    prices = config.pricing.table()
    calls = CallStage(
        scorer, store, metrics, held, contained, max_calls=limits.max_calls_per_trace, segments=False, histograms=True
    )
    turns = TurnStage(DefinitionCache(max_bytes=limits.max_cache_bytes), limits, prices, metrics, held, contained)
    finish = FinishStage(
        config.policies.step_budget,
        config.tool_definitions(),
        prices,
        None,
        metrics,
        held,
        contained,
        max_cache_bytes=limits.max_cache_bytes,
        histograms=True,
    )
    return Stages(store, held, calls, turns, finish, reader, forwarded, dropped)


def readable_span(
    span_id: int, name: str = "execute_tool get_weather", trace_id: int = 1, parent: int | None = None
) -> ReadableSpan:
    """An ended span made directly (no tracer): what a stage reads of it is its ids, kind and scope."""
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope
    from opentelemetry.trace import SpanContext

    context = SpanContext(trace_id, span_id, is_remote=False)
    parent_context = None if parent is None else SpanContext(trace_id, parent, is_remote=False)
    return ReadableSpan(name, context, parent_context, instrumentation_scope=InstrumentationScope("test"))


# --- recorded-trace inputs (replay) --------------------------------------------------------------------------------


JAEGER_TRACE = {
    "traceID": "00000000000000000000000000abcdef",
    "spans": [
        {
            "traceID": "00000000000000000000000000abcdef",
            "spanID": "0000000000000001",
            "operationName": "invoke_agent",
            "references": [],
            "startTime": 1_700_000_000_000_000,
            "duration": 5000,
            "tags": [{"key": "gen_ai.operation.name", "type": "string", "value": "invoke_agent"}],
            "logs": [],
            "processID": "p1",
        },
        {
            "traceID": "00000000000000000000000000abcdef",
            "spanID": "0000000000000002",
            "operationName": "chat",
            "references": [
                {"refType": "CHILD_OF", "traceID": "00000000000000000000000000abcdef", "spanID": "0000000000000001"}
            ],
            "startTime": 1_700_000_000_000_100,
            "duration": 1000,
            "tags": [
                {"key": "gen_ai.operation.name", "type": "string", "value": "chat"},
                {
                    "key": "gen_ai.tool.definitions",
                    "type": "string",
                    "value": json.dumps([{"name": "lookup", "parameters": {"type": "object", "required": ["q"]}}]),
                },
                {"key": "span.kind", "type": "string", "value": "client"},
            ],
            "logs": [],
            "processID": "p1",
        },
        {
            "traceID": "00000000000000000000000000abcdef",
            "spanID": "0000000000000003",
            "operationName": "execute_tool lookup",
            "references": [
                {"refType": "CHILD_OF", "traceID": "00000000000000000000000000abcdef", "spanID": "0000000000000001"}
            ],
            "startTime": 1_700_000_000_001_200,
            "duration": 800,
            "tags": [
                {"key": "gen_ai.operation.name", "type": "string", "value": "execute_tool"},
                {"key": "gen_ai.tool.name", "type": "string", "value": "lookup"},
                {"key": "gen_ai.tool.call.arguments", "type": "string", "value": '{"q": "x"}'},
                {"key": "retries", "type": "int64", "value": 2},
                {"key": "otel.status_code", "type": "string", "value": "ERROR"},
                {"key": "otel.status_description", "type": "string", "value": "backend down"},
                {"key": "error", "type": "bool", "value": True},
            ],
            "logs": [
                {
                    "timestamp": 1_700_000_000_001_900,
                    "fields": [
                        {"key": "event", "type": "string", "value": "exception"},
                        {"key": "exception.type", "type": "string", "value": "ConnectionError"},
                    ],
                }
            ],
            "processID": "p1",
        },
    ],
    "processes": {"p1": {"serviceName": "agent-svc", "tags": [{"key": "host.name", "type": "string", "value": "h1"}]}},
}

OTLP_TRACE_ID = "0af7651916cd43dd8448eb211c80319c"

OTLP_SPAN: dict[str, Any] = {
    "traceId": OTLP_TRACE_ID,
    "spanId": "b7ad6b7169203331",
    "name": "execute_tool lookup",
    "startTimeUnixNano": "1700000000000000000",
    "endTimeUnixNano": "1700000000100000000",
    "attributes": [
        {"key": "gen_ai.operation.name", "value": {"stringValue": "execute_tool"}},
        {"key": "gen_ai.tool.name", "value": {"stringValue": "lookup"}},
    ],
}


def otlp_document(span: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"resourceSpans": [{"scopeSpans": [{"spans": [span or OTLP_SPAN]}]}]}


# --- what an agent did on the dataset template's cases (offline eval) ----------------------------------------------


# What an agent did on the template's five cases: every case right (in the shapes of three providers).
_EVENT = '{"title": "Dentist", "start": "2025-03-05T15:00"}'

_REMINDER = '{"text": "Dentist", "at": "2025-03-04 09:00:00"}'

GOOD: dict[str, list[dict[str, Any]]] = {
    "order-status": [{"name": "get_order", "arguments": '{"order_id": "12345", "include_history": false}'}],
    "dentist-and-reminder": [
        {"id": "c1", "type": "function", "function": {"name": "create_event", "arguments": _EVENT}, "batch": 1},
        {"id": "c2", "type": "function", "function": {"name": "create_reminder", "arguments": _REMINDER}, "batch": 1},
    ],
    "move-standup": [
        {"type": "tool_use", "id": "t1", "name": "list_events", "input": {"date": "2025-03-06"}},
        {
            "type": "tool_use",
            "id": "t2",
            "name": "update_event",
            "input": {"event_id": "e1", "start": "2025-03-06T14:00:00"},
        },
    ],
    "thanks": [],
    "clear-calendar": [{"name": "confirm_action", "arguments": {"summary": "Delete every event?"}}],
}

# The same agent after a bad change: a parse failure, a missed call, a swapped order, an unnecessary call.
BAD: dict[str, list[dict[str, Any]]] = {
    **GOOD,
    "order-status": [{"name": "get_order", "arguments": '{"order_id": 12345'}],
    "dentist-and-reminder": [{"name": "create_event", "arguments": {"title": "Dentist", "start": "2025-03-05T15:00"}}],
    "move-standup": list(reversed(GOOD["move-standup"])),
    "thanks": [{"name": "get_order", "arguments": {"order_id": "12345"}}],
}


def write_run(
    tmp_path: Path,
    calls: dict[str, list[dict[str, Any]]],
    name: str = "run.jsonl",
    extra: dict[str, dict[str, Any]] | None = None,
) -> Path:
    path = tmp_path / name
    more = extra or {}
    lines = [json.dumps({"id": case_id, "tool_calls": c, **more.get(case_id, {})}) for case_id, c in calls.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


ORDER_TOOLS = [
    {"name": "get_order", "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}}},
    {"name": "delete_all", "parameters": {"type": "object", "properties": {}}},
]


def dataset_case(expected: list[dict[str, Any]], **extra: Any) -> DatasetCase:
    data: dict[str, Any] = {"id": "c1", "user_input": "u", "expected_tool_calls": expected, **extra}
    if not expected:
        data["expected_no_tool"] = True
    return DatasetCase.model_validate(data)


def score_run_calls(
    case: DatasetCase, calls: list[dict[str, Any]], prep: Preparer | None = None, **run: Any
) -> CaseResult:
    prep = prep or Preparer(EvalConfig())
    entry = parse_run_line("run.jsonl", 1, orjson.dumps({"id": case.id, "tool_calls": calls, **run}))
    return score_case(prep.prepare(case, 1), entry, prep)


# --- the demo agent's raw spans as a file (harvest, replay) --------------------------------------------------------


def record_demo_traces(path: Path, failures: dict[str, float], traces: int = 12, seed: int = 5) -> Path:
    """The demo's raw spans (no processor: as recorded before it was deployed) in the Collector's JSON lines."""
    raw = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(raw))
    agent = ScriptedAgent(provider.get_tracer("demo"), seed=seed)
    for _ in range(traces):
        agent.run(failures)
    provider.shutdown()
    path.write_text(json.dumps(encode_json(list(raw.get_finished_spans()))) + "\n")
    return path


# --- Collector configurations --------------------------------------------------------------------------------------


def check_pipelines(config: Mapping[str, Any], name: str) -> None:
    """Pipelines reference only defined components, and every defined component is used."""
    defined = {kind: set(config.get(kind) or {}) for kind in ("receivers", "processors", "exporters", "connectors")}
    used: dict[str, set[str]] = {kind: set() for kind in defined}
    connector_in: set[str] = set()
    connector_out: set[str] = set()
    for pipeline_id, pipeline in config["service"]["pipelines"].items():
        signal = pipeline_id.split("/")[0]
        assert signal in {"traces", "metrics", "logs"}, f"{name}: pipeline {pipeline_id}: unknown signal"
        assert pipeline.get("receivers") and pipeline.get("exporters"), f"{name}: pipeline {pipeline_id} is incomplete"
        for kind in ("receivers", "processors", "exporters"):
            for component in pipeline.get(kind, []):
                where = f"{name}: pipeline {pipeline_id} {kind[:-1]} {component}"
                if kind != "processors" and component in defined["connectors"]:
                    (connector_in if kind == "exporters" else connector_out).add(component)
                    used["connectors"].add(component)
                    continue
                assert component in defined[kind], f"{where} is not defined"
                used[kind].add(component)
    for kind in defined:
        assert defined[kind] == used[kind], f"{name}: {kind} defined but unused: {sorted(defined[kind] - used[kind])}"
    assert connector_in == connector_out == defined["connectors"], f"{name}: a connector needs both ends"
    for extension in config["service"].get("extensions", []):
        assert extension in (config.get("extensions") or {}), f"{name}: extension {extension} is not defined"
    assert set(config["service"].get("extensions", [])) == set(config.get("extensions") or {})


# --- one engine: the verdicts compared between the processor, replay and eval (parity tests) -----------------------


PARITY_SEARCH = {
    "type": "object",
    "properties": {"q": {"type": "string"}},
    "required": ["q"],
    "additionalProperties": False,
}

PARITY_EMAIL = {
    "type": "object",
    "properties": {"to": {"type": "string"}, "priority": {"enum": ["low", "high"]}},
    "required": ["to"],
}

PARITY_EMAIL_CONFIGURED = {"type": "object", "properties": {"to": {"type": "string"}}, "required": ["to"]}

PARITY_LOOKUP = {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}

# what the chat spans offer (the dataset case's ``available_tools``)
PARITY_OFFERED = {
    "search": PARITY_SEARCH,
    "ping": {"type": "object", "properties": {}},
    "send_email": PARITY_EMAIL,
    "authenticate": {"type": "object", "properties": {}},
    "confirm": {"type": "object", "properties": {}},
    "delete_records": {"type": "object", "properties": {"filter": {}}},
    "delete_all": {"type": "object", "properties": {}},
}

PARITY_CONFIG = EvalConfig.from_dict(
    {
        "tools": [
            {"name": "lookup", "parameters": PARITY_LOOKUP},  # configured, never offered in the trace
            {"name": "send_email", "parameters": PARITY_EMAIL_CONFIGURED},  # differs from the trace's: drift
        ],
        "policies": {
            "must_not_call": ["delete_all"],
            "required_steps": [{"tool": "authenticate", "before": ["send_email"]}],
            "destructive_tools": [{"tool": "delete_records", "confirm_with": ["confirm"], "irreversibility": 3}],
            "argument_rules": [{"tool": "delete_records", "name": "unscoped", "schema": {"required": ["filter"]}}],
            "step_budget": 6,
        },
    }
)

UNRECORDED: Any = None  # arguments not recorded (content capture off)

PARITY_ARGUMENTS: dict[str, list[Any]] = {
    "search": [{"q": "paris"}, {"q": 3}, "{broken", UNRECORDED, "paris", {"q": "paris", "x": 1}],
    "ping": [{}, UNRECORDED, ""],
    "send_email": [{"to": "a@b.c"}, {"to": "a@b.c", "priority": "urgent"}, {"to": "a@b.c", "cc": "x"}, {}, UNRECORDED],
    "authenticate": [{}, "{broken"],
    "confirm": [{}],
    "delete_records": [{"filter": {"id": 1}}, {}],
    "delete_all": [{}],
    "lookup": [{"id": 1}, {"id": "x"}, UNRECORDED],
    "ghost": [{}, UNRECORDED],  # neither offered nor configured
}

PARITY_COMPARED = (
    "step",
    "batch",
    "outcome",
    "error_source",
    "parse_ok",
    "tool_known",
    "schema_valid",
    "schema_errors",
    "schema_source",
    "schema_drift",
    "duplicate",
    "repeated_failure",
    "over_budget",
    "violations",
    "undeclared_arguments",
)


def tool_definitions(offered: list[str]) -> list[dict[str, Any]]:
    return [{"type": "function", "name": n, "parameters": PARITY_OFFERED[n]} for n in offered]


def encoded_arguments(arguments: Any) -> str | None:
    return None if arguments is None else arguments if isinstance(arguments, str) else json.dumps(arguments)


def parity_tool_rows(spans: list[ReadableSpan]) -> list[dict[str, Any]]:
    tools = [s for s in spans if (s.attributes or {}).get("gen_ai.operation.name") == "execute_tool"]
    tools.sort(key=lambda s: s.end_time or 0)
    return [{k: scores(s).get(k) for k in PARITY_COMPARED} for s in tools]


def offline_rows(checks: list[Any]) -> list[dict[str, Any]]:
    """The ``PARITY_COMPARED`` verdicts of each scored call, as the processor writes them."""
    out = []
    for c in checks:
        row: dict[str, Any] = {
            "step": c.step,
            "batch": c.batch,
            "outcome": c.outcome.value,
            "error_source": c.error_source,
            "parse_ok": c.parse_ok,
            "tool_known": c.tool_known,
            "schema_valid": c.schema_valid,
            "schema_errors": list(c.schema_errors) or None,
            "schema_source": c.schema_source,
            "schema_drift": c.schema_drift,
            "duplicate": c.duplicate,
            "repeated_failure": c.repeated_failure,
            "over_budget": c.over_budget,
            "violations": list(c.violations) or None,
            "undeclared_arguments": list(c.undeclared_arguments) or None,
        }
        out.append(row)
    return out


def online_rows(spans: list[ReadableSpan]) -> list[dict[str, Any]]:
    rows = parity_tool_rows(spans)
    for row in rows:  # the processor writes false booleans; absent ones are None on both sides
        for key in ("duplicate", "repeated_failure"):
            row[key] = bool(row[key])
    return rows


def harvested(tmp_path: Path, pipes: list[Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``harvest`` over the traces written as one OTLP JSON file: the rows and the run lines, by case id."""
    source, config = tmp_path / "traces.json", tmp_path / "config.yaml"
    spans = [s for pipe in pipes for s in pipe.spans()]
    source.write_text(json.dumps(encode_json(spans)))
    config.write_text(yaml.safe_dump(PARITY_CONFIG.model_dump(mode="json", exclude_none=True)))
    cases, runs = tmp_path / "cases.jsonl", tmp_path / "runs.jsonl"
    for target in (cases, runs):
        target.unlink(missing_ok=True)
    command = ["harvest", str(source), "--where", "tool =~ .", "--config", str(config), "--out", str(cases)]
    assert main([*command, "--runs-out", str(runs)]) == 0
    lines = [orjson.loads(line) for line in runs.read_bytes().splitlines()]
    return {c.id: c for c in read_cases(cases)}, {line["id"]: line for line in lines}


def harvested_offline(case: Any, line: dict[str, Any]) -> tuple[list[dict[str, Any]], list[str | None]]:
    prep = Preparer(PARITY_CONFIG)
    result = score_case(prep.prepare(case), parse_run_line("runs.jsonl", 1, orjson.dumps(line)), prep)
    rows = offline_rows(result.checks)
    return rows, list(result.call_recovery) if result.call_recovery else [None] * len(rows)


def harvested_online(pipe: Any) -> tuple[list[dict[str, Any]], list[str | None]]:
    spans = pipe.spans()
    tools = sorted(
        (s for s in spans if (s.attributes or {}).get("gen_ai.operation.name") == "execute_tool"),
        key=lambda s: s.end_time or 0,
    )
    return online_rows(spans), [scores(s).get("recovery.class") for s in tools]


def record_parity_trace(turns: list[list[tuple[str, Any]]], offered: list[str], chat: list[bool], failed: bool) -> Any:
    """The trace a GenAI-instrumented agent emits: a root, per turn a chat span offering the tools and requesting
    that turn's calls (unless ``chat`` says the turn recorded none), then one execute_tool span per call."""
    pipe = make_pipeline(PARITY_CONFIG)
    tracer = pipe.tracer
    with tracer.start_as_current_span("agent run"):
        for t, calls in enumerate(turns):
            if chat[t]:
                parts = [
                    {"type": "tool_call", "id": f"c{t}.{i}", "name": name}
                    | ({} if arguments is None else {"arguments": encoded_arguments(arguments)})
                    for i, (name, arguments) in enumerate(calls)
                ]
                attrs = {
                    "gen_ai.operation.name": "chat",
                    "gen_ai.tool.definitions": json.dumps(tool_definitions(offered)),
                    "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": parts}]),
                }
                with tracer.start_as_current_span("chat", attributes=attrs):
                    pass
            for i, (name, arguments) in enumerate(calls):
                attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name}
                if chat[t]:
                    attrs["gen_ai.tool.call.id"] = f"c{t}.{i}"
                encoded = encoded_arguments(arguments)
                if encoded is not None:
                    attrs["gen_ai.tool.call.arguments"] = encoded
                with tracer.start_as_current_span(f"execute_tool {name}", attributes=attrs) as span:
                    if failed:
                        span.set_status(Status(StatusCode.ERROR, "boom"))
                    else:
                        span.set_attribute("gen_ai.tool.call.result", "ok")
    return pipe


PARITY_NAMES = st.sampled_from(sorted(PARITY_ARGUMENTS))


@st.composite
def parity_traces(draw: st.DrawFn) -> tuple[list[list[tuple[str, Any]]], list[str], list[bool], bool]:
    n_turns = draw(st.integers(1, 4))
    turns = []
    for _ in range(n_turns):
        calls = []
        for name in draw(st.lists(PARITY_NAMES, min_size=1, max_size=3)):
            calls.append((name, draw(st.sampled_from(PARITY_ARGUMENTS[name]))))
        turns.append(calls)
    offered = draw(st.lists(st.sampled_from(sorted(PARITY_OFFERED)), unique=True, max_size=len(PARITY_OFFERED)))
    chat = draw(st.lists(st.booleans(), min_size=n_turns, max_size=n_turns))
    if not offered:
        chat = [False] * n_turns  # no chat span: the trace offered nothing, as the case lists nothing
    else:
        # the first turn's chat span offers the tools before any call: online, a call is judged against the tools
        # offered so far (a trace whose definitions arrive late is issue 13's), offline against the case's list
        chat[0] = True
    return turns, offered, chat, draw(st.booleans())


# --- the guard (tests/guard) ---------------------------------------------------------------------------------------


GUARD_CONFIG: dict[str, Any] = {
    "tools": [
        {
            "name": "search",
            "parameters": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
        },
        {"name": "login", "parameters": {"type": "object", "properties": {}}},
        {"name": "confirm", "parameters": {"type": "object", "properties": {}}},
        {"name": "send_email", "parameters": {"type": "object", "properties": {"to": {"type": "string"}}}},
        {"name": "delete_records", "parameters": {"type": "object", "properties": {"filter": {}}}},
        {"name": "wipe", "parameters": {"type": "object"}},
    ],
    "policies": {
        "must_not_call": ["wipe"],
        "required_steps": [{"tool": "login", "before": ["send_email"]}],
        "destructive_tools": [{"tool": "delete_records", "confirm_with": ["confirm"]}],
        "argument_rules": [{"tool": "delete_records", "name": "unscoped_delete", "schema": {"required": ["filter"]}}],
        "undeclared_arguments": "fail",
        "step_budget": 5,
    },
}


class Recorded:
    def __init__(self, config: dict[str, Any] | None = None, **kwargs: Any) -> None:
        self.exporter = InMemorySpanExporter()
        provider = TracerProvider(resource=Resource.get_empty())  # no service: the guard's counters carry no source
        provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.reader = InMemoryMetricReader()
        self.tracer_provider = provider
        self.tracer = provider.get_tracer("test")
        self.guard = Guard(EvalConfig.from_dict(config or GUARD_CONFIG), tracer_provider=provider,
                           meter_provider=MeterProvider(metric_readers=[self.reader]), **kwargs)  # fmt: skip

    def spans(self) -> list[Any]:
        return list(self.exporter.get_finished_spans())

    def metric(self, name: str) -> dict[tuple[tuple[str, Any], ...], int]:
        data = self.reader.get_metrics_data()
        out = {}
        for rm in data.resource_metrics if data else ():
            for sm in rm.scope_metrics:
                for m in sm.metrics:
                    if m.name == name:
                        for p in m.data.data_points:
                            out[tuple(sorted(p.attributes.items()))] = p.value
        return out


REFUND_POLICIES = {
    "policies": {
        "must_not_call": ["delete_all"],
        "destructive_tools": [{"tool": "refund", "confirm_with": ["confirm"]}],
    }
}

REFUND_SCRIPT = [
    ("call_1", "delete_all", {}),
    ("call_2", "refund", {"order": 7}),
    ("call_3", "confirm", {}),
    ("call_4", "refund", {"order": 7}),
]


# --- the scoring service (serve) and its integration tests ---------------------------------------------------------


DEMO_CONFIG = Path(__file__).parents[1] / "src" / "otel_toolcall_eval" / "demo" / "toolcall-eval.yaml"

FAILURES = dict.fromkeys(FAILURE_CLASSES, 0.3)


def wait_until(predicate: Callable[[], bool], what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.02)


def config_for(receiver: GrpcTraceReceiver, **serve: Any) -> EvalConfig:
    base = EvalConfig.load(DEMO_CONFIG)
    export = {"endpoint": receiver.endpoint, "protocol": "grpc", "schedule_delay_millis": 20, **serve.pop("export", {})}
    # no root grace window: these tests wait for roots at the next hop (the window's: test_cross_service.py)
    data = {"http_port": 0, "grpc_port": 0, "root_grace_seconds": 0, "export": export, **serve}
    return base.model_copy(update={"serve": type(base.serve).model_validate(data)})


def agent_traces(exporter: SpanExporter | None, config: EvalConfig, traces: int, seed: int) -> list[ReadableSpan]:
    """Run the scripted agent; its raw spans go to ``exporter``, and the spans the in-process processor scores
    (the reference) are returned."""
    reference = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource({"service.name": "agent-under-test", "deployment.environment": "t"}))
    if exporter is not None:
        provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=20))
    provider.add_span_processor(ToolCallEvalProcessor(SimpleSpanProcessor(reference), config))
    agent = ScriptedAgent(provider.get_tracer("agent.scripted", "1.2.3"), seed=seed)
    for _ in range(traces):
        agent.run(FAILURES)
    provider.force_flush()
    provider.shutdown()
    return list(reference.get_finished_spans())


def plain_spans(count: int, seed: int) -> list[ReadableSpan]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("burst")
    with tracer.start_as_current_span(f"root {seed}"):
        for i in range(count - 1):
            with tracer.start_as_current_span(f"child {i}"):
                pass
    return list(exporter.get_finished_spans())


class GatedExporter(SpanExporter):
    """The real exporter to the receiver, held until the test opens the gate: a next hop that is slow."""

    def __init__(self, inner: SpanExporter) -> None:
        self.inner = inner
        self.gate = threading.Event()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if not self.gate.wait(30):
            return SpanExportResult.FAILURE
        return self.inner.export(spans)

    def shutdown(self) -> None:
        self.gate.set()
        self.inner.shutdown()


def free_port() -> int:
    """A port free a moment ago (the Prometheus client takes no port 0 it could report back)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def agent_exporter(svc: Service) -> GrpcSpanExporter:
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter

    return GrpcSpanExporter(endpoint=f"http://127.0.0.1:{svc.grpc_port}", insecure=True)


NODE_PROJECT = Path(__file__).parent / "integration" / "node"


def node_ready() -> None:
    missing = shutil.which("node") is None or not (NODE_PROJECT / "node_modules" / "ai").is_dir()
    if missing:
        if os.environ.get("CI"):
            raise AssertionError("node or tests/integration/node/node_modules is missing (.ci/run runs make node-deps)")
        pytest.skip("node and `make node-deps` (npm ci in tests/integration/node) are needed")


def scored_spans(receiver: GrpcTraceReceiver) -> list[ReadableSpan]:
    """What the next hop received, decoded back into spans (the service's own decoder)."""
    from otel_toolcall_eval.serve.decode import PROTOBUF, decode_spans

    return [
        span for request in receiver.requests for span in decode_spans(request.SerializeToString(), PROTOBUF, 1_000_000)
    ]


def wait_for_root_verdict(receiver: GrpcTraceReceiver) -> list[ReadableSpan]:
    wait_until(
        lambda: any(A.TRACE_CORRECT in (s.attributes or {}) for s in scored_spans(receiver)), "the root's verdict"
    )
    return scored_spans(receiver)


def demo_spans(runs: int, failure_rate: float, seed: int) -> list[ReadableSpan]:
    """The demo agent's spans as the SDK ended them, unscored: ``runs`` requests, every failure class at the rate."""
    raw = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(raw))
    agent = ScriptedAgent(provider.get_tracer("demo"), seed=seed)
    for _ in range(runs):
        agent.run(dict.fromkeys(FAILURE_CLASSES, failure_rate))
    provider.shutdown()
    return list(raw.get_finished_spans())


class OfferedJudge:
    """A judge (``judge.hook.JudgeHook``) that records what it is offered and samples every call: the hosted LLM
    behind a real judge cannot run here, and what is under test is that the call reaches it."""

    def __init__(self) -> None:
        self.offered: list[tuple[int, records.ToolCallRecord, records.CallScore, Any]] = []

    def offer(self, trace_id: int, record: records.ToolCallRecord, score: records.CallScore, tools: Any, /) -> bool:
        self.offered.append((trace_id, record, score, tools))
        return True

    def observe_llm_span(self, trace_id: int, attrs: Any, /) -> None:
        pass

    def trace_done(self, trace_id: int, source: tuple[str, str, str], /) -> None:
        pass

    def force_flush(self, deadline: Any, /) -> bool:
        return True

    def shutdown(self, deadline: Any, /) -> object:
        return None
