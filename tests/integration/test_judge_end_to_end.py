"""Processor + judge + a local fake provider: verdict spans in the judged trace, events, metrics, lifecycle.

A real TracerProvider, LoggerProvider and MeterProvider with in-memory exporters; the judge talks HTTP to a
server on 127.0.0.1 that answers like OpenAI's chat completions.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Tracer

from otel_toolcall_eval import EvalConfig, ToolCallEvalProcessor
from otel_toolcall_eval import attributes as A
from otel_toolcall_eval.judge import emit

from ..helpers import WEATHER_TOOL, tool_span
from .judge_server import OPENAI_KEY, FakeJudgeServer, Hold, Received, fake_judge_server

pytestmark = pytest.mark.integration

REQUEST = "Will it rain in Paris tomorrow? I need to know whether to take an umbrella."


@dataclass
class Stack:
    server: FakeJudgeServer
    provider: TracerProvider
    tracer: Tracer
    exporter: InMemorySpanExporter
    logs: InMemoryLogRecordExporter
    reader: InMemoryMetricReader
    processor: ToolCallEvalProcessor

    def spans(self, prefix: str = "") -> list[ReadableSpan]:
        return [s for s in self.exporter.get_finished_spans() if s.name.startswith(prefix)]

    def verdicts(self) -> list[ReadableSpan]:
        return self.spans(emit.SPAN_PREFIX)

    def by_question(self) -> dict[str, ReadableSpan]:
        return {str((s.attributes or {})[A.GEN_AI_EVALUATION_NAME]): s for s in self.verdicts()}

    def metric(self, name: str, **labels: str) -> float:
        data = self.reader.get_metrics_data()
        total = 0.0
        for rm in data.resource_metrics if data else ():
            for sm in rm.scope_metrics:
                for m in sm.metrics:
                    if m.name != name:
                        continue
                    for point in m.data.data_points:
                        if all((point.attributes or {}).get(k) == v for k, v in labels.items()):
                            total += getattr(point, "value", None) or getattr(point, "count", 0)
        return total

    def sampled(self) -> list[bool]:
        return [bool((s.attributes or {})[A.JUDGE_SAMPLED]) for s in self.spans("execute_tool")]


def pick(request: Received) -> str:
    return "handed_back" if "handed_back" in request.labels else request.labels[0]


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeJudgeServer]:
    monkeypatch.setenv("E2E_JUDGE_KEY", OPENAI_KEY)
    with fake_judge_server() as fake:
        fake.pick = pick
        yield fake


_STACKS: list[Stack] = []


@pytest.fixture(autouse=True)
def _shutdown() -> Iterator[None]:
    yield
    while _STACKS:
        stack = _STACKS.pop()
        stack.provider.shutdown()
        assert stack.processor.judge is not None and not stack.processor.judge.worker.alive


def make_stack(
    server: FakeJudgeServer,
    tools: list[dict[str, Any]] | None = None,
    resource: Resource | None = None,
    **judge: Any,
) -> Stack:
    section: dict[str, Any] = {
        "provider": "openai",
        "model": "gpt-4o-mini",
        "base_url": server.openai_url,
        "api_key_env": "E2E_JUDGE_KEY",
        "price": {"input_per_million": 0.15, "output_per_million": 0.6},
        "budget": {"amount": 5},
        "sampling": {"initial_rate": 1.0, "update_interval_seconds": 3600},
        "retry_backoff_seconds": 0.01,
    }
    section.update(judge)
    config = EvalConfig.from_dict({"judge": section, "tools": tools or []})
    exporter, logs, reader = InMemorySpanExporter(), InMemoryLogRecordExporter(), InMemoryMetricReader()
    logger_provider = LoggerProvider()
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    provider = TracerProvider(resource=resource) if resource is not None else TracerProvider()
    processor = ToolCallEvalProcessor(
        SimpleSpanProcessor(exporter),
        config,
        meter_provider=MeterProvider(metric_readers=[reader]),
        tracer_provider=provider,
        logger_provider=logger_provider,
    )
    provider.add_span_processor(processor)
    stack = Stack(server, provider, provider.get_tracer("agent"), exporter, logs, reader, processor)
    _STACKS.append(stack)
    return stack


def chat(tracer: Tracer, *, request: str | None = None, text: str | None = None, calls: list[str] = ()) -> None:
    """A GenAI chat span: the user's request as input, the model's text and requested calls as output."""
    attrs: dict[str, Any] = {"gen_ai.operation.name": "chat", "gen_ai.tool.definitions": json.dumps([WEATHER_TOOL])}
    if request is not None:
        messages = [
            {"role": "system", "parts": [{"type": "text", "content": "You are a helpful assistant."}]},
            {"role": "user", "parts": [{"type": "text", "content": request}]},
        ]
        attrs["gen_ai.input.messages"] = json.dumps(messages)
    parts: list[dict[str, Any]] = [{"type": "text", "content": text}] if text else []
    parts += [{"type": "tool_call", "id": f"call_{n}", "name": n, "arguments": {"city": "Paris"}} for n in calls]
    if parts:
        attrs["gen_ai.output.messages"] = json.dumps([{"role": "assistant", "parts": parts}])
    with tracer.start_as_current_span("chat gpt-4o", attributes=attrs):
        pass


def weather_turn(stack: Stack, *, error: Exception | None = None, reaction: str | None = None) -> None:
    with stack.tracer.start_as_current_span("invoke_agent", attributes={"gen_ai.operation.name": "invoke_agent"}):
        chat(stack.tracer, request=REQUEST, calls=["get_weather"])
        tool_span(stack.tracer, "get_weather", {"city": "Paris", "days": 1}, call_id="call_get_weather", error=error)
        if reaction is not None:
            chat(stack.tracer, text=reaction)


def test_verdicts_are_linked_children_of_the_judged_span_with_events_and_metrics(server: FakeJudgeServer) -> None:
    stack = make_stack(server)
    weather_turn(stack)
    assert stack.processor.force_flush(20_000)
    (tool,) = stack.spans("execute_tool")
    assert tool.attributes is not None and tool.attributes[A.JUDGE_SAMPLED] is True
    verdicts = stack.by_question()
    assert set(verdicts) == {"tool_appropriateness", "tool_necessity"}  # no free text, no failure: two questions
    for name, span in verdicts.items():
        assert span.name == f"toolcall_eval.judge {name}"
        assert span.context.trace_id == tool.context.trace_id  # inside the judged trace
        assert span.parent is not None and span.parent.span_id == tool.context.span_id and not span.parent.is_remote
        assert [link.context.span_id for link in span.links] == [tool.context.span_id]
        attrs = span.attributes or {}
        assert attrs[A.GEN_AI_EVALUATION_SCORE_VALUE] == 1.0 and attrs[A.JUDGE_COST] > 0
        assert attrs[A.JUDGE_MODEL] == "gpt-4o-mini-2024-07-18"
    # the request reached the questions that need it, from the chat span's input messages
    assert all(r.data["request"] == REQUEST for r in server.requests)
    # the GenAI evaluation events: log records in the judged span's context
    records = [r.log_record for r in stack.logs.get_finished_logs()]
    assert sorted(str((r.attributes or {})[A.GEN_AI_EVALUATION_NAME]) for r in records) == sorted(verdicts)
    for record in records:
        assert record.event_name == A.GEN_AI_EVALUATION_RESULT
        assert (record.trace_id, record.span_id) == (tool.context.trace_id, tool.context.span_id)
        assert (record.attributes or {})[A.GEN_AI_EVALUATION_SCORE_LABEL] in ("appropriate", "necessary")
    # metrics
    assert stack.metric(emit.VERDICTS, question="tool_necessity", label="necessary") == 1
    assert stack.metric(emit.VERDICTS) == 2 and stack.metric(emit.ERRORS) == 0
    spans_cost = sum(float((s.attributes or {})[A.JUDGE_COST]) for s in verdicts.values())
    assert stack.metric(emit.COST) == pytest.approx(spans_cost)
    assert stack.metric(emit.TOKENS, type="input") == sum(
        int((s.attributes or {})[A.JUDGE_INPUT_TOKENS]) for s in verdicts.values()
    )
    assert stack.metric(emit.SAMPLE_RATE) == 1.0
    # the trace's own verdict is still on the root
    (root,) = stack.spans("invoke_agent")
    assert (root.attributes or {})[A.TRACE_TOOL_CALLS] == 1


def test_verdict_spans_reach_the_wire_with_their_link_and_parent(
    server: FakeJudgeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real OTLP/HTTP exporter to a receiver on 127.0.0.1: what Jaeger or Tempo would store."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    from .otlp_receiver import HttpTraceReceiver, attributes

    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    receiver = HttpTraceReceiver()
    try:
        config = EvalConfig.from_dict(
            {
                "judge": {
                    "provider": "openai",
                    "model": "gpt-4o-mini",
                    "base_url": server.openai_url,
                    "api_key_env": "E2E_JUDGE_KEY",
                    "price": {"input_per_million": 0.15, "output_per_million": 0.6},
                    "budget": {"amount": 5},
                    "sampling": {"initial_rate": 1.0},
                    "questions": ["tool_necessity"],
                }
            }
        )
        provider = TracerProvider()
        exporting = BatchSpanProcessor(OTLPSpanExporter(endpoint=receiver.endpoint, timeout=5))
        processor = ToolCallEvalProcessor(exporting, config, tracer_provider=provider)
        provider.add_span_processor(processor)
        with provider.get_tracer("agent").start_as_current_span("invoke_agent") as root:
            chat(provider.get_tracer("agent"), request=REQUEST, calls=["get_weather"])
            tool_span(provider.get_tracer("agent"), "get_weather", {"city": "Paris"})
        assert processor.force_flush(20_000)
        wire = {w.span.name: w.span for w in receiver.wait_for_spans(4)}
        provider.shutdown()
    finally:
        receiver.close()
    tool, verdict = wire["execute_tool get_weather"], wire["toolcall_eval.judge tool_necessity"]
    assert verdict.trace_id == tool.trace_id == root.get_span_context().trace_id.to_bytes(16, "big")
    assert verdict.parent_span_id == tool.span_id
    assert [(link.trace_id, link.span_id) for link in verdict.links] == [(tool.trace_id, tool.span_id)]
    attrs = attributes(verdict.attributes)
    assert attrs[A.GEN_AI_EVALUATION_SCORE_LABEL] == "necessary" and attrs[A.JUDGE_COST] > 0
    assert attributes(tool.attributes)[A.JUDGE_SAMPLED] is True


def test_unparented_verdicts_are_traces_of_their_own_linked_to_the_call(server: FakeJudgeServer) -> None:
    stack = make_stack(server, parent_to_judged_span=False, questions=["tool_necessity"])
    weather_turn(stack)
    assert stack.processor.force_flush(20_000)
    (tool,) = stack.spans("execute_tool")
    (verdict,) = stack.verdicts()
    assert verdict.parent is None and verdict.context.trace_id != tool.context.trace_id
    assert verdict.links[0].context.span_id == tool.context.span_id
    assert verdict.links[0].context.trace_id == tool.context.trace_id


def test_error_handling_reads_the_models_reaction_to_the_failure(server: FakeJudgeServer) -> None:
    stack = make_stack(server)
    weather_turn(stack, error=ConnectionError("weather service unreachable"), reaction="Sorry, I could not get it.")
    assert stack.processor.force_flush(20_000)
    verdicts = stack.by_question()
    assert set(verdicts) == {"tool_appropriateness", "tool_necessity", "error_handling"}
    assert (verdicts["error_handling"].attributes or {})[A.GEN_AI_EVALUATION_SCORE_LABEL] == "handed_back"
    (asked,) = [r.data for r in server.requests if "reaction" in r.data]
    assert asked["reaction"] == {"next_model_output": "Sorry, I could not get it.", "next_tool_calls_requested": []}
    assert asked["error"]["exception_type"] == "ConnectionError"
    assert asked["error"]["message"] == "weather service unreachable"
    assert "request" not in asked  # error handling does not need the request: it does not get it


def test_a_retry_after_the_failure_is_the_reaction_when_no_chat_span_follows(server: FakeJudgeServer) -> None:
    stack = make_stack(server, questions=["error_handling"])
    with stack.tracer.start_as_current_span("agent"):  # no chat spans at all
        tool_span(stack.tracer, "get_weather", {"city": "Pari"}, error=ValueError("unknown city"))
        assert stack.processor.force_flush(20_000)
        assert server.requests == []  # the failed call waits in the trace's state for its reaction
        tool_span(stack.tracer, "get_weather", {"city": "Paris"}, result='{"rain": 0.8}')
    assert stack.processor.force_flush(20_000)
    (asked,) = [r.data for r in server.requests]
    assert asked["reaction"] == {
        "later_tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}, "outcome": "success"}]
    }
    assert len(stack.verdicts()) == 1


def test_the_configured_tools_stand_in_when_the_trace_carries_no_definitions(server: FakeJudgeServer) -> None:
    tools = [
        {"name": n, "description": f"{n} tool", "parameters": {"type": "object"}} for n in ("get_weather", "search")
    ]
    stack = make_stack(server, tools=tools, questions=["tool_appropriateness"])
    with stack.tracer.start_as_current_span("invoke_agent", attributes={"gen_ai.operation.name": "invoke_agent"}):
        attrs = {
            "gen_ai.operation.name": "chat",
            "gen_ai.input.messages": json.dumps([{"role": "user", "content": REQUEST}]),
        }
        with stack.tracer.start_as_current_span("chat", attributes=attrs):  # no gen_ai.tool.definitions
            pass
        tool_span(stack.tracer, "get_weather", {"city": "Paris"})
    assert stack.processor.force_flush(20_000)
    (asked,) = [r.data for r in server.requests]
    assert asked == {"request": REQUEST, "tool_name": "get_weather", "available_tools": ["get_weather", "search"]}


def test_a_verdict_before_the_root_ends_does_not_end_the_trace(server: FakeJudgeServer) -> None:
    stack = make_stack(server, questions=["tool_appropriateness"])
    with stack.tracer.start_as_current_span("invoke_agent", attributes={"gen_ai.operation.name": "invoke_agent"}):
        chat(stack.tracer, request=REQUEST, calls=["get_weather"])
        tool_span(stack.tracer, "get_weather", {"city": "Paris"})
        assert stack.processor.force_flush(20_000)
        assert len(stack.verdicts()) == 1  # emitted while the trace is still running
        tool_span(stack.tracer, "get_weather", {"city": "Lyon"})
    (root,) = stack.spans("invoke_agent")
    assert (root.attributes or {})[A.TRACE_TOOL_CALLS] == 2  # the trace's state survived the verdict span


def test_verdict_metrics_carry_the_judged_traces_service_agent_and_version(server: FakeJudgeServer) -> None:
    """A verdict that comes before its trace's root (which names the agent) waits for it, then counts with the
    trace's source, as the trace's own metrics do (issue 30)."""
    resource = Resource.create({"service.name": "travel", "service.version": "1.5.0"})
    stack = make_stack(server, resource=resource, questions=["tool_appropriateness"])
    root = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "planner"}
    with stack.tracer.start_as_current_span("invoke_agent planner", attributes=root):
        chat(stack.tracer, request=REQUEST, calls=["get_weather"])
        tool_span(stack.tracer, "get_weather", {"city": "Paris"})
        assert stack.processor.force_flush(20_000)
        assert len(stack.verdicts()) == 1 and stack.metric(emit.VERDICTS) == 0  # answered; the agent not named yet
    source = {"service.name": "travel", "gen_ai.agent.name": "planner", "service.version": "1.5.0"}
    assert stack.metric(emit.VERDICTS, **source, question="tool_appropriateness") == 1
    assert stack.metric(emit.COST, **source) > 0 and stack.metric(emit.TOKENS, **source, type="input") > 0
    assert stack.metric(emit.DURATION, **source) == 1
    assert stack.metric("toolcall_eval.traces", **source) == 1  # the same source as the trace's


def test_force_flush_waits_for_slow_verdicts_and_shutdown_drains(server: FakeJudgeServer) -> None:
    stack = make_stack(server, questions=["tool_necessity"], concurrency=2)
    server.delay = 0.2
    for _ in range(4):
        weather_turn(stack)
    assert stack.processor.force_flush(20_000)
    assert len(stack.verdicts()) == 4  # right after force_flush returned: nothing left in flight
    for _ in range(4):
        weather_turn(stack)
    stack.provider.shutdown()  # shuts the processor down: the judge drains its queue first
    assert len(stack.verdicts()) == 8
    assert stack.metric(emit.DROPPED) == 0


def test_shutdown_stops_at_its_timeout_and_counts_what_it_dropped(server: FakeJudgeServer) -> None:
    stack = make_stack(server, questions=["tool_necessity"], concurrency=1, shutdown_timeout_seconds=0.3)
    release = threading.Event()
    server.script.extend(Hold(release) for _ in range(5))
    for _ in range(5):
        weather_turn(stack)
    judge = stack.processor.judge
    assert judge is not None
    assert judge.shutdown() == 5  # one cancelled in flight, four never started
    release.set()
    assert stack.metric(emit.DROPPED, reason="shutdown") == 5
    if judge.worker._thread is not None:  # the cancellation may finish on the worker's thread after the deadline
        judge.worker._thread.join(10)
    assert not judge.worker.alive
    weather_turn(stack)  # sampled after shutdown: dropped, counted, never queued
    assert stack.sampled()[-1] is False
    assert stack.metric(emit.DROPPED, reason="shutdown") == 6


def test_queue_overflow_is_dropped_and_counted_and_never_blocks_the_application(server: FakeJudgeServer) -> None:
    stack = make_stack(server, questions=["tool_necessity"], concurrency=1, queue_size=2)
    release = threading.Event()
    server.script.extend(Hold(release) for _ in range(3))
    weather_turn(stack)
    deadline = time.monotonic() + 10
    while server.in_flight < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert stack.metric(emit.QUEUE_SIZE) == 0  # the first call is in flight, not queued
    app = threading.Thread(target=lambda: [weather_turn(stack) for _ in range(40)])
    app.start()
    app.join(20)
    assert not app.is_alive()  # the judge is stuck; the application is not
    assert stack.sampled() == [True, True, True] + [False] * 38
    assert stack.metric(emit.DROPPED, reason="queue_full") == 38
    assert stack.metric(emit.QUEUE_SIZE) == 2
    release.set()
    assert stack.processor.force_flush(20_000)
    assert len(stack.verdicts()) == 3


def test_questions_without_their_data_are_skipped_and_counted(server: FakeJudgeServer) -> None:
    stack = make_stack(server, questions=["tool_appropriateness", "error_handling"])
    with stack.tracer.start_as_current_span("agent"):  # no chat span: no request recorded
        tool_span(stack.tracer, "get_weather", {"city": "Paris"}, error=RuntimeError("down"))
    assert stack.processor.force_flush(20_000)
    assert stack.verdicts() == [] and server.requests == []
    assert stack.metric(emit.SKIPPED, question="tool_appropriateness", reason="missing_request") == 1
    assert stack.metric(emit.SKIPPED, question="error_handling", reason="missing_reaction") == 1


def test_budget_exhausted_drops_instead_of_overspending(server: FakeJudgeServer) -> None:
    # one call's worst case (prompt bytes + 512 tokens at 0.15/M, 300 output tokens at 0.6/M) is about 0.0003
    stack = make_stack(server, questions=["tool_necessity"], budget={"amount": 0.0005})
    for _ in range(5):
        weather_turn(stack)
    assert stack.processor.force_flush(20_000)
    judged = len(stack.verdicts())
    assert 1 <= judged <= 3
    assert stack.metric(emit.DROPPED, reason="budget") == 5 - judged
    judge = stack.processor.judge
    assert judge is not None and judge.ledger.spent() <= 0.0005


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_after_fork_the_child_judges_its_own_calls_not_its_parents(server: FakeJudgeServer) -> None:
    stack = make_stack(server, questions=["tool_necessity"], concurrency=1)
    release = threading.Event()
    server.script.append(Hold(release))
    weather_turn(stack)
    weather_turn(stack)  # parent: one in flight (held), one queued
    judge = stack.processor.judge
    assert judge is not None
    deadline = time.monotonic() + 10
    while server.in_flight < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        code = 1
        try:
            os.close(read)
            inherited = (judge.worker.queued, judge.worker.unfinished, judge.worker.alive)
            stack.exporter.clear()
            weather_turn(stack)
            flushed = judge.force_flush(10_000)
            verdicts = len(stack.verdicts())
            os.write(write, json.dumps([inherited, flushed, verdicts]).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    _, status = os.waitpid(pid, 0)
    with os.fdopen(read) as fh:
        report = json.loads(fh.read() or "null")
    assert os.waitstatus_to_exitcode(status) == 0, report
    inherited, flushed, verdicts = report
    assert inherited == [0, 0, False]  # the child did not inherit the parent's queue or a dead thread
    assert flushed is True and verdicts == 1  # its own call, judged by its own worker
    release.set()
    assert judge.force_flush(20_000)
    parent_verdicts = [s for s in stack.verdicts() if s.name.endswith("tool_necessity")]
    assert len(parent_verdicts) == 2  # the parent's two, judged once, by the parent
    assert len(server.requests) == 3


def test_prometheus_names_are_the_documented_ones(server: FakeJudgeServer) -> None:
    """The real Prometheus exporter renders every judge metric under the name docs/judge.md gives."""
    from opentelemetry.exporter.prometheus import PrometheusMetricReader
    from prometheus_client import CollectorRegistry, generate_latest

    registry = CollectorRegistry()
    reader = PrometheusMetricReader(registry=registry)
    meters = MeterProvider(metric_readers=[reader])
    telemetry = emit.JudgeTelemetry(
        provider="openai",
        model="m",
        parent_to_judged_span=True,
        tracer_provider=TracerProvider(),
        logger_provider=LoggerProvider(),
        meter_provider=meters,
        queue_size=lambda: 2,
        agreement=lambda: [("q", 0.7, 0.6)],
    )
    telemetry.emit(
        emit.Verdict("q", label="ok", score=1.0, cost=0.01, input_tokens=10, output_tokens=2, start_ns=1, end_ns=2),
        trace_id=1,
        span_id=1,
    )
    telemetry.emit(emit.Verdict("q", error="timeout"), trace_id=1, span_id=1)
    telemetry.dropped("queue_full")
    telemetry.over_reported("q", 0.5)
    telemetry.skipped("q", "missing_request")
    text = generate_latest(registry).decode()
    names = {line.split("{")[0].split(" ")[0] for line in text.splitlines() if not line.startswith("#")}
    assert {m.prometheus for m in emit.JUDGE_METRICS} <= names
    meters.shutdown()


def test_a_share_of_online_verdicts_goes_to_a_labelling_file(server: FakeJudgeServer, tmp_path: Path) -> None:
    """``judge.labelling``: verdicts with the data the judge saw, in the verdicts format ``judge queue`` reads."""
    from otel_toolcall_eval.judge.fingerprint import fingerprints
    from otel_toolcall_eval.judge.verdicts import read_verdicts

    kept = tmp_path / "online-verdicts.jsonl"
    stack = make_stack(server, labelling={"file": str(kept), "share": 1.0, "max_items": 3})
    weather_turn(stack)
    weather_turn(stack)
    assert stack.processor.force_flush(20_000)
    lines = read_verdicts(kept)
    assert len(lines) == 3  # four verdicts, bounded by max_items
    tools = {f"{s.context.trace_id:032x}:{s.context.span_id:016x}" for s in stack.spans("execute_tool")}
    assert {line["item"] for line in lines} <= tools
    judge = stack.processor.judge
    assert judge is not None
    prints = fingerprints(judge.config)
    for line in lines:
        assert line["fingerprint"] == prints[line["question"]] and line["label"] is not None
        assert line["data"]["request"] == REQUEST and line["data"]["tool_name"] == "get_weather"
        assert line["tool"] == "get_weather" and line["flagged"] is False
        assert line["tool_call"]["tool_name"] == "get_weather" and line["tool_call"]["arguments"]["city"] == "Paris"

    none = tmp_path / "none.jsonl"
    stack = make_stack(server, labelling={"file": str(none), "share": 1e-12})
    weather_turn(stack)
    assert stack.processor.force_flush(20_000)
    assert not none.exists()  # a deterministic share: this call's draw is above it
