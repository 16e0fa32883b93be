"""ToolCallEvalProcessor: forwarding, enrichment, the trace verdict, bounds, and never harming the application."""

from __future__ import annotations

import json
import logging
import sys
from typing import Any

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, set_span_in_context

from otel_toolcall_eval import ConventionRegistry, EvalConfig, ToolCallEvalProcessor, default_registry
from otel_toolcall_eval import attributes as A
from otel_toolcall_eval.conventions import AttributeConvention

from .helpers import WEATHER_TOOL, Recorder, chat_span, make_pipeline, scores, tool_span

# cost, latency, recovery and the tool list (tests/online/test_trace_stats.py checks those)
STATS = {a.name for a in A.TRACE_STATS_ATTRIBUTES}


def _provider(processor: SpanProcessor) -> TracerProvider:
    provider = TracerProvider()
    provider.add_span_processor(processor)
    return provider


def test_set_attribute_after_end_is_dropped_by_the_sdk() -> None:
    """The SDK fact the wrapper design rests on: a plain processor cannot add scores once a span ended."""

    class Late(SpanProcessor):
        def _on_ending(self, span: Span) -> None:
            span.set_attribute("late", 1)

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(Late())
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with provider.get_tracer("t").start_as_current_span("s"):
        pass
    assert "late" not in (exporter.get_finished_spans()[0].attributes or {})


def test_forwards_every_hook_to_every_downstream() -> None:
    a, b = Recorder(), Recorder()
    processor = ToolCallEvalProcessor([a, b])
    provider = _provider(processor)
    with provider.get_tracer("t").start_as_current_span("plain"):
        pass
    provider.force_flush()
    provider.shutdown()
    for rec in (a, b):
        assert rec.calls == ["on_start", "_on_ending", "on_end", "force_flush", "shutdown"]


def test_non_tool_span_is_forwarded_as_the_same_object() -> None:
    spy, rec = Recorder(), Recorder()
    provider = TracerProvider()
    provider.add_span_processor(spy)  # sees the ReadableSpan the SDK hands to every processor
    provider.add_span_processor(ToolCallEvalProcessor(rec))
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("root"):
        with tracer.start_as_current_span("db query", attributes={"db.system": "postgresql"}):
            pass
    assert rec.ended[0] is spy.ended[0]
    assert rec.ended[1] is spy.ended[1]
    assert rec.ended[1].name == "root"
    assert not scores(rec.ended[1])  # a plain trace: the root is left alone


def test_tool_span_scored_with_definitions_joined_from_chat_span() -> None:
    p = make_pipeline()
    with p.tracer.start_as_current_span("invoke_agent", attributes={"gen_ai.operation.name": "invoke_agent"}):
        chat_span(p.tracer, [WEATHER_TOOL], [("c1", "get_weather"), ("c2", "get_weather")])
        tool_span(p.tracer, "get_weather", {"city": "Paris"}, call_id="c1", result="sunny")
        tool_span(p.tracer, "get_weather", {"city": 3, "days": 0}, call_id="c2", result="?")
        chat_span(p.tracer, [WEATHER_TOOL], [("c3", "get_forecast")])
        tool_span(p.tracer, "get_forecast", {"city": "Paris"}, call_id="c3", result="rain")
    good, bad = p.by_name("execute_tool get_weather")
    assert scores(good) == {
        "convention": "genai",
        "outcome": "success",
        "step": 1,
        "batch": 1,
        "duplicate": False,
        "repeated_failure": False,
        "parse_ok": True,
        "tool_known": True,
        "schema_valid": True,
        "schema_source": "trace",
    }
    s = scores(bad)
    assert s["schema_valid"] is False and s["outcome"] == "malformed_call" and s["error_source"] == "schema"
    assert s["batch"] == 1 and s["step"] == 2
    assert any(e.startswith("/city") for e in s["schema_errors"])
    unknown = scores(p.one("execute_tool get_forecast"))
    assert unknown["tool_known"] is False and unknown["outcome"] == "malformed_call" and unknown["batch"] == 2
    assert "schema_valid" not in unknown  # no schema known for it
    root = {k: v for k, v in scores(p.one("invoke_agent")).items() if "toolcall_eval." + k not in STATS}
    assert root == {
        "trace.tool_calls": 3,
        "trace.errors": 2,
        "trace.over_budget": False,
        "trace.violations": 0,
        "trace.violation_weight": 0,
        "trace.unexecuted_calls": 0,
        "trace.unknown_tool_requests": 0,
        "trace.correct": False,
        "trace.composite_ok": False,
    }


def test_enriched_copy_preserves_the_span() -> None:
    rec = Recorder()
    provider = _provider(ToolCallEvalProcessor(rec))
    tracer = provider.get_tracer("scope-x", "1.2")
    with tracer.start_as_current_span("root"):
        tool_span(tracer, "t", {"a": 1}, error=TimeoutError("slow"))
    original_attrs = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "t",
        "gen_ai.tool.call.arguments": '{"a": 1}',
    }
    span = rec.ended[0]
    assert type(span).__name__ == "EnrichedSpan"
    assert {k: v for k, v in span.attributes.items() if not k.startswith(A.PREFIX)} == original_attrs
    assert span.status.status_code.name == "ERROR"
    assert [e.name for e in span.events] == ["exception"]
    assert span.instrumentation_scope is not None and span.instrumentation_scope.name == "scope-x"
    assert span.parent is not None and span.parent.span_id == rec.ended[1].context.span_id
    assert scores(span)["outcome"] == "execution_failed" and scores(span)["error_source"] == "exception"


def test_config_none_runs_config_free_checks() -> None:
    p = make_pipeline(None)
    with p.tracer.start_as_current_span("root"):
        tool_span(p.tracer, "lookup", '{"q": "x"')
        tool_span(p.tracer, "lookup", {"q": "x"})
        tool_span(p.tracer, "lookup", {"q": "X "})
    broken, first, dup = p.by_name("execute_tool lookup")
    assert scores(broken)["parse_ok"] is False and scores(broken)["outcome"] == "malformed_call"
    assert "tool_known" not in scores(first) and "over_budget" not in scores(first)
    assert scores(dup)["duplicate"] is True
    root = scores(p.one("root"))
    assert root["trace.tool_calls"] == 3 and root["trace.composite_ok"] is False


def test_config_schema_used_when_trace_has_none_and_drift_flagged() -> None:
    config = EvalConfig.from_dict(
        {"tools": [{"name": "get_weather", "parameters": {"type": "object", "required": ["city", "unit"]}}]}
    )
    p = make_pipeline(config)
    with p.tracer.start_as_current_span("root"):
        tool_span(p.tracer, "get_weather", {"city": "Paris"})
    s = scores(p.one("execute_tool get_weather"))
    assert s["schema_source"] == "config" and s["schema_valid"] is False and "schema_drift" not in s
    with p.tracer.start_as_current_span("root2"):
        chat_span(p.tracer, [WEATHER_TOOL])
        tool_span(p.tracer, "get_weather", {"city": "Paris"})
    s2 = scores(p.by_name("execute_tool get_weather")[1])
    assert s2["schema_source"] == "trace" and s2["schema_valid"] is True and s2["schema_drift"] is True


def test_policies_and_composite_on_root() -> None:
    config = EvalConfig.from_dict(
        {
            "policies": {
                "step_budget": 2,
                "must_not_call": ["wipe"],
                "required_steps": [{"tool": "auth", "before": ["write"]}],
            }
        }
    )
    p = make_pipeline(config)
    with p.tracer.start_as_current_span("root"):
        chat_span(p.tracer, None, [("w", "write")])
        tool_span(p.tracer, "write", {"x": 1}, call_id="w")
        chat_span(p.tracer, None, [("x", "wipe")])
        tool_span(p.tracer, "wipe", {}, call_id="x")
        tool_span(p.tracer, "read", {})
    write, wipe, read = (scores(p.one(f"execute_tool {n}")) for n in ("write", "wipe", "read"))
    assert write["violations"] == ["missing_required_step:auth"]
    assert wipe["violations"] == ["must_not_call"]
    assert read["over_budget"] is True and "violations" not in read
    root = scores(p.one("root"))
    assert root["trace.violations"] == 2 and root["trace.over_budget"] is True and root["trace.errors"] == 0
    assert root["trace.violation_weight"] == 2
    assert root["trace.correct"] is False and root["trace.composite_ok"] is False


def test_clean_trace_is_composite_ok_and_remote_parent_is_a_local_root() -> None:
    p = make_pipeline(EvalConfig.from_dict({"policies": {"step_budget": 3}}))
    remote = SpanContext(trace_id=0xABC, span_id=0xDEF, is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED))
    ctx = set_span_in_context(NonRecordingSpan(remote))
    with p.tracer.start_as_current_span("server", context=ctx):
        chat_span(p.tracer, [WEATHER_TOOL])
        tool_span(p.tracer, "get_weather", {"city": "Oslo"}, result="cold")
    root = scores(p.one("server"))
    assert root["trace.composite_ok"] is True and root["trace.tool_calls"] == 1
    assert p.processor.traces_in_flight == 0


def test_genai_trace_without_tool_calls_gets_a_verdict() -> None:
    p = make_pipeline()
    with p.tracer.start_as_current_span("agent"):
        chat_span(p.tracer, [WEATHER_TOOL])
    root = scores(p.one("agent"))
    assert root["trace.tool_calls"] == 0 and root["trace.composite_ok"] is True


def test_metrics_counters_after_a_scripted_run() -> None:
    config = EvalConfig.from_dict({"policies": {"must_not_call": ["wipe"], "step_budget": 10}})
    p = make_pipeline(config)
    for _ in range(3):
        with p.tracer.start_as_current_span("ok-trace"):
            chat_span(p.tracer, [WEATHER_TOOL])
            tool_span(p.tracer, "get_weather", {"city": "Rome"}, result="warm")
    with p.tracer.start_as_current_span("bad-trace"):
        chat_span(p.tracer, [WEATHER_TOOL, {"name": "wipe", "parameters": {"type": "object"}}])
        tool_span(p.tracer, "get_weather", {"city": 1})
        tool_span(p.tracer, "wipe", {}, error=RuntimeError("denied"))
        tool_span(p.tracer, "made_up_tool", {})
    assert p.metric_sum("toolcall_eval.tool_calls", tool="get_weather", outcome="success") == 3
    assert p.metric_sum("toolcall_eval.tool_calls", tool="get_weather", outcome="malformed_call") == 1
    assert p.metric_sum("toolcall_eval.tool_calls", tool="wipe", outcome="execution_failed") == 1
    assert p.metric_sum("toolcall_eval.tool_calls", tool="_unknown") == 1  # invented names don't become labels
    assert p.metric_sum("toolcall_eval.violations", violation="must_not_call") == 1
    assert p.metric_sum("toolcall_eval.violations", violation="schema_invalid") == 1
    assert p.metric_sum("toolcall_eval.traces", composite_ok="true", finalized_by="root") == 3
    assert p.metric_sum("toolcall_eval.traces", composite_ok="false", finalized_by="root") == 1
    assert p.metric_sum("toolcall_eval.trace.tool_calls") == 4  # histogram: one count per trace


# --- never harm the application ------------------------------------------------------------------
def test_a_raising_convention_never_reaches_the_application(caplog: pytest.LogCaptureFixture) -> None:
    class Broken(AttributeConvention):
        def extract(self, span: Any, attrs: Any) -> Any:
            raise ZeroDivisionError("bug")

    registry = default_registry()
    registry.register(Broken("broken", "x.kind", frozenset({"tool"})))
    p = make_pipeline(conventions=registry)
    with caplog.at_level(logging.WARNING, logger="otel_toolcall_eval"):
        for _ in range(5):
            with p.tracer.start_as_current_span("t", attributes={"x.kind": "tool"}):
                pass
    spans = p.spans()
    assert len(spans) == 5
    assert all(scores(s) == {"eval_error": "ZeroDivisionError"} for s in spans)
    assert p.metric_sum("toolcall_eval.internal_errors", stage="evaluate") == 5
    assert len([r for r in caplog.records if "forwarded unscored" in r.message]) == 1  # rate-limited


def test_a_raising_downstream_does_not_raise_into_the_application() -> None:
    class Exploding(Recorder):
        def on_end(self, span: ReadableSpan) -> None:
            raise OSError("disk full")

    after = Recorder()
    provider = _provider(ToolCallEvalProcessor([Exploding(), after]))
    tracer = provider.get_tracer("t")
    tool_span(tracer, "t", {})
    assert len(after.ended) == 1


@pytest.mark.parametrize(
    "attributes",
    [
        {"gen_ai.operation.name": "execute_tool"},  # no tool name
        {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": 42, "gen_ai.tool.call.arguments": 7},
        {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "t", "gen_ai.tool.call.arguments": [1, 2]},
        {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "t",
            "gen_ai.tool.call.arguments": '{"a": "\udcff"}',
        },
        {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "t",
            "gen_ai.tool.call.arguments": "[" * 10_000 + "]" * 10_000,
        },
        {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "t",
            "gen_ai.tool.call.arguments": '{"a": "' + "x" * 10_000_000 + '"}',
        },
        {"gen_ai.operation.name": "chat", "gen_ai.tool.definitions": "not json"},
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.tool.definitions": '[{"name": 3}, 5, {"name": "x", "parameters": "{bad"}]',
        },
        {"gen_ai.operation.name": "chat", "gen_ai.output.messages": '[{"parts": "nope"}, 3]'},
        {"openinference.span.kind": "LLM", "llm.tools.0.tool.json_schema": "{", "llm.output_messages.x.message": 1},
    ],
)
def test_spans_of_every_shape_are_forwarded(attributes: dict[str, Any]) -> None:
    p = make_pipeline()
    with p.tracer.start_as_current_span("root"), p.tracer.start_as_current_span("odd", attributes=attributes):
        pass
    odd = p.one("odd")
    assert "eval_error" not in scores(odd)
    kept = {k for k in odd.attributes if not k.startswith(A.PREFIX)}
    assert kept == set(attributes)  # nothing of the original lost
    if attributes.get("gen_ai.operation.name") == "execute_tool":
        assert "outcome" in scores(odd)
    assert len(p.spans()) == 2


def test_oversized_and_deep_arguments_are_scored_as_such() -> None:
    p = make_pipeline(EvalConfig.from_dict({"limits": {"max_argument_bytes": 30_000}}))
    with p.tracer.start_as_current_span("root"):
        tool_span(p.tracer, "big", {"a": "x" * 50_000})
        tool_span(p.tracer, "deep", "[" * 10_000 + "]" * 10_000)
    big, deep = scores(p.one("execute_tool big")), scores(p.one("execute_tool deep"))
    assert big["arguments_oversized"] is True and "parse_ok" not in big and big["outcome"] == "success"
    assert deep["parse_ok"] is False and deep["outcome"] == "malformed_call"


def test_raw_readable_span_without_context_or_attributes_is_forwarded() -> None:
    rec = Recorder()
    processor = ToolCallEvalProcessor(rec)
    bare = ReadableSpan(name="bare")
    processor.on_end(bare)
    weird = ReadableSpan(name=None, context=SpanContext(1, 2, False), attributes=None)  # type: ignore[arg-type]
    processor.on_end(weird)
    assert rec.ended == [bare, weird]


# --- bounds --------------------------------------------------------------------------------------
def test_trace_state_lru_bound_records_dropped_traces() -> None:
    p = make_pipeline(EvalConfig.from_dict({"limits": {"max_traces": 5}}))
    tracer = p.tracer
    for _ in range(20):
        root = tracer.start_span("never-ending-root")  # roots that never end
        with tracer.start_as_current_span("tool", context=set_span_in_context(root)) as s:
            s.set_attributes({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "t"})
    assert p.processor.traces_in_flight == 5
    assert p.metric_sum("toolcall_eval.state.dropped", reason="evicted") == 15
    assert p.metric_sum("toolcall_eval.traces", finalized_by="evicted") == 15


def test_trace_state_ttl_expires_and_records_verdict() -> None:
    now = [1000.0]
    p = make_pipeline(EvalConfig.from_dict({"limits": {"trace_ttl_seconds": 10}}))
    p.processor._pipeline.store._clock = lambda: now[0]
    root = p.tracer.start_span("root")
    with p.tracer.start_as_current_span("tool", context=set_span_in_context(root)) as s:
        s.set_attributes({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "t"})
    assert p.processor.traces_in_flight == 1
    now[0] += 11
    p.provider.force_flush()
    assert p.processor.traces_in_flight == 0
    assert p.metric_sum("toolcall_eval.traces", finalized_by="expired", composite_ok="true") == 1


def test_shutdown_records_unfinished_traces() -> None:
    p = make_pipeline()
    root = p.tracer.start_span("root")
    tool_span_ctx = set_span_in_context(root)
    with p.tracer.start_as_current_span("tool", context=tool_span_ctx) as s:
        s.set_attributes({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "t"})
    p.provider.shutdown()
    assert p.metric_sum("toolcall_eval.traces", finalized_by="shutdown") == 1


# --- configuration errors fail fast --------------------------------------------------------------
def test_bad_downstream_and_config_fail_fast() -> None:
    with pytest.raises(TypeError, match="downstream"):
        ToolCallEvalProcessor([])
    with pytest.raises(TypeError, match="downstream"):
        ToolCallEvalProcessor([object()])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="config"):
        ToolCallEvalProcessor(Recorder(), config={"policies": {}})  # type: ignore[arg-type]


def test_user_convention_registry() -> None:
    mine = AttributeConvention(
        name="acme",
        detect_key="acme.kind",
        detect_values=frozenset({"tool"}),
        name_keys=("acme.tool",),
        argument_keys=("acme.args",),
    )
    registry = ConventionRegistry([mine])
    p = make_pipeline(conventions=registry)
    with p.tracer.start_as_current_span("root"):
        with p.tracer.start_as_current_span(
            "x", attributes={"acme.kind": "tool", "acme.tool": "f", "acme.args": '{"a":1}'}
        ):
            pass
        tool_span(p.tracer, "genai_tool", {})  # not in this registry: untouched
    assert scores(p.one("x"))["convention"] == "acme"
    assert scores(p.one("execute_tool genai_tool")) == {}


def test_json_helper_is_used_for_arguments_objects() -> None:
    # arguments recorded as a JSON object string with unicode and nested values round-trip into the schema check
    p = make_pipeline()
    tool = {"name": "t", "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}
    with p.tracer.start_as_current_span("root"):
        chat_span(p.tracer, [tool])
        tool_span(p.tracer, "t", json.dumps({"q": "Zürich ✓"}))
    assert scores(p.one("execute_tool t"))["schema_valid"] is True
    assert sys.getrecursionlimit() > 0


def test_two_processors_on_one_meter_provider_add_up() -> None:
    """The counters are observable tallies shared per meter: a second processor must not hide the first's counts."""
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader])
    providers = []
    for _ in range(2):
        provider = TracerProvider(resource=Resource.create({"service.name": "svc"}))
        provider.add_span_processor(ToolCallEvalProcessor(Recorder(), meter_provider=meters))
        providers.append(provider)
    for n, provider in enumerate(providers, start=1):
        tracer = provider.get_tracer("t")
        for _ in range(n):  # 1 call through the first processor, 2 through the second
            with tracer.start_as_current_span("root"):
                tool_span(tracer, "lookup", {"q": "x"})
    data = reader.get_metrics_data()
    points = [
        (dict(p.attributes or {}), p.value)
        for rm in data.resource_metrics
        for sm in rm.scope_metrics
        for m in sm.metrics
        if m.name == "toolcall_eval.tool_calls"
        for p in m.data.data_points
    ]
    assert points == [({"service.name": "svc", "tool": "lookup", "outcome": "success"}, 3)]


def test_requested_calls_no_tool_span_answered_are_counted() -> None:
    p = make_pipeline()
    with p.tracer.start_as_current_span("root"):
        chat_span(p.tracer, [WEATHER_TOOL], [("c1", "get_weather"), ("c2", "made_up_tool")])
        tool_span(p.tracer, "get_weather", {"city": "Oslo"}, call_id="c1")
        chat_span(p.tracer, [WEATHER_TOOL], [("c3", "get_weather")])
        tool_span(p.tracer, "get_weather", {"city": "Rome"})  # no call id: claimed by name
    root = scores(p.one("root"))
    assert root["trace.unexecuted_calls"] == 1  # made_up_tool was asked for and never ran
    # ... and the model was never offered it: a wrong-tool decision, though no tool span shows it
    assert root["trace.unknown_tool_requests"] == 1
    assert root["trace.tool_calls"] == 2 and root["trace.correct"] is False and root["trace.composite_ok"] is False
    assert p.metric_sum("toolcall_eval.violations", tool="_unknown", violation="unknown_tool") == 1
    assert p.metric_sum("toolcall_eval.traces", composite_ok="false") == 1
    # a request for an offered tool that no span answered (say, an uninstrumented tool) stays informational
    k = make_pipeline()
    with k.tracer.start_as_current_span("root"):
        chat_span(k.tracer, [WEATHER_TOOL], [("c1", "get_weather"), ("c2", "get_weather")])
        tool_span(k.tracer, "get_weather", {"city": "Oslo"}, call_id="c1")
    root = scores(k.one("root"))
    assert (root["trace.unexecuted_calls"], root["trace.unknown_tool_requests"]) == (1, 0)
    assert root["trace.composite_ok"] is True
    # with no tool list at all (no definitions, none configured) nothing tells a known tool: not counted
    n = make_pipeline()
    with n.tracer.start_as_current_span("root"):
        chat_span(n.tracer, None, [("c1", "anything")])
    assert scores(n.one("root"))["trace.unknown_tool_requests"] == 0
    q = make_pipeline()
    with q.tracer.start_as_current_span("root"):
        tool_span(q.tracer, "get_weather", {"city": "Oslo"})
    assert "trace.unexecuted_calls" not in scores(q.one("root"))  # no requests recorded: nothing to say


def _mcp_client_span(tracer: Any, name: str, arguments: dict[str, Any]) -> Any:
    """An MCP client ``tools/call`` span (the agent's side of the call), as a context manager."""
    attrs = {
        "mcp.method.name": "tools/call",
        "gen_ai.tool.name": name,
        "gen_ai.tool.call.arguments": json.dumps(arguments),
        "jsonrpc.request.id": "7",
    }
    return tracer.start_as_current_span(f"tools/call {name}", attributes=attrs)


def test_a_second_instrumentation_of_the_same_call_is_counted_once() -> None:
    """An MCP client span around the in-process server's execute_tool span is one call, not a duplicate."""
    p = make_pipeline(EvalConfig.from_dict({"policies": {"step_budget": 1}}))
    with p.tracer.start_as_current_span("root"):
        chat_span(p.tracer, [WEATHER_TOOL], [("c1", "get_weather")])
        with _mcp_client_span(p.tracer, "get_weather", {"city": "Oslo"}):
            tool_span(p.tracer, "get_weather", {"city": " oslo"}, call_id="c1", result='{"t": 3}')
    inner, outer = p.one("execute_tool get_weather"), p.one("tools/call get_weather")
    assert scores(inner)["duplicate"] is False and scores(inner)["step"] == 1
    assert scores(outer) == {"convention": "mcp", "same_call_as": f"{inner.context.span_id:016x}"}
    root = scores(p.one("root"))
    assert root["trace.tool_calls"] == 1 and root["trace.over_budget"] is False and root["trace.composite_ok"] is True
    assert p.metric_sum("toolcall_eval.tool_calls") == 1


def test_a_nested_call_of_the_same_tool_with_other_arguments_is_its_own_call() -> None:
    p = make_pipeline()
    with p.tracer.start_as_current_span("root"):
        with _mcp_client_span(p.tracer, "get_weather", {"city": "Oslo"}):
            tool_span(p.tracer, "get_weather", {"city": "Rome"})
        with _mcp_client_span(p.tracer, "lookup", {"city": "Rome"}):
            tool_span(p.tracer, "get_weather", {"city": "Rome"})
    assert all("same_call_as" not in scores(s) for s in p.spans())
    assert scores(p.one("root"))["trace.tool_calls"] == 4


def test_calls_without_recorded_arguments_are_never_repeats_of_each_other() -> None:
    """GenAI content capture is opt-in: with no arguments recorded two calls cannot be told apart, so neither is a
    duplicate or a repeated failure; with arguments recorded the same pair is."""
    p = make_pipeline()
    with p.tracer.start_as_current_span("root"):
        for _ in range(2):
            tool_span(p.tracer, "get_weather", error=RuntimeError("down"))
        for _ in range(2):
            tool_span(p.tracer, "get_weather", {"city": "Oslo"}, error=RuntimeError("down"))
    calls = [scores(s) for s in p.by_name("execute_tool get_weather")]
    assert [(c["duplicate"], c["repeated_failure"]) for c in calls] == [
        (False, False),
        (False, False),
        (False, False),
        (True, True),
    ]


def test_undeclared_arguments_are_written_on_the_tool_span_and_fail_it_when_configured() -> None:
    open_schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    tool = {"type": "function", "name": "get_weather", "parameters": open_schema}
    for config, violations in (
        (None, None),
        (EvalConfig.from_dict({"policies": {"undeclared_arguments": "fail"}}), ["undeclared_argument"]),
    ):
        p = make_pipeline(config)
        with p.tracer.start_as_current_span("root"):
            chat_span(p.tracer, [tool], [("c1", "get_weather")])
            tool_span(p.tracer, "get_weather", {"city": "Paris", "units": "metric"}, call_id="c1", result="sunny")
        s = scores(p.one("execute_tool get_weather"))
        assert s["schema_valid"] is True and list(s["undeclared_arguments"]) == ["units"]
        assert (None if "violations" not in s else list(s["violations"])) == violations
        assert scores(p.one("root"))["trace.composite_ok"] is (violations is None)
