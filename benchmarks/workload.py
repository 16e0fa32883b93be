"""The spans the processor figures send: an agent trace in GenAI semantic conventions, built before timing.

A trace is an ``invoke_agent`` root, a chat turn that offers the tools and requests ``authenticate``, its tool
span, a second chat turn that requests ``TOOL_CALLS`` parallel ``search_records`` calls, and those calls' tool
spans: the only spans timed. With ``POLICY_CONFIG`` every check runs on them: parse, unknown tool, schema
(validator cached), schema drift against the configured copy, outcome, duplicate, repeated failure, step budget,
must-not-call, required step, destructive tool, argument rule, and the enriched copy.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Span, Tracer

from otel_toolcall_eval import EvalConfig, ToolCallEvalProcessor

TOOL = "search_records"
TOOL_CALLS = 4  # timed tool calls per trace

# What a plain (non-tool) span of an instrumented service carries.
PLAIN_ATTRIBUTES: dict[str, Any] = {
    "http.request.method": "GET",
    "url.path": "/api/v1/records",
    "http.response.status_code": 200,
    "server.address": "records.internal",
    "server.port": 8080,
    "db.system": "postgresql",
}

AUTH_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"token": {"type": "string", "minLength": 8}},
    "required": ["token"],
    "additionalProperties": False,
}

SCHEMA_5: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "minLength": 1, "maxLength": 200},
        "limit": {"type": "integer", "minimum": 1, "maximum": 500},
        "sort": {"type": "string", "enum": ["date", "relevance", "name"]},
        "include_archived": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 10},
    },
    "required": ["query", "limit"],
    "additionalProperties": False,
}

SCHEMA_20: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "minLength": 1, "maxLength": 200},
        "limit": {"type": "integer", "minimum": 1, "maximum": 500},
        "offset": {"type": "integer", "minimum": 0},
        "sort": {"type": "string", "enum": ["date", "relevance", "name"]},
        "order": {"type": "string", "enum": ["asc", "desc"]},
        "include_archived": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 10},
        "owner": {"type": "string", "pattern": "^[a-z][a-z0-9_]*$"},
        "created_after": {"type": "string", "format": "date"},
        "created_before": {"type": "string", "format": "date"},
        "min_score": {"type": "number", "minimum": 0, "maximum": 1},
        "language": {"type": "string", "minLength": 2, "maxLength": 5},
        "region": {"type": "string", "enum": ["eu", "us", "apac"]},
        "fields": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
        "highlight": {"type": "boolean"},
        "timeout_ms": {"type": "integer", "minimum": 10, "maximum": 60000},
        "cursor": {"type": ["string", "null"]},
        "filters": {
            "type": "object",
            "properties": {"status": {"type": "string"}, "priority": {"type": "integer", "minimum": 0}},
            "additionalProperties": False,
        },
        "requester": {"type": "string", "format": "email"},
        "dry_run": {"type": "boolean"},
    },
    "required": ["query", "limit", "sort", "order", "owner", "region", "fields", "timeout_ms"],
    "additionalProperties": False,
}


def valid_arguments(fields: int, i: int) -> dict[str, Any]:
    """Schema-valid arguments, different for every ``i`` (so no call is a duplicate of another)."""
    base: dict[str, Any] = {
        "query": f"unpaid invoices batch {i}",
        "limit": 10 + i % 90,
        "sort": "date",
        "include_archived": False,
        "tags": ["finance", "q3"],
    }
    if fields == 5:
        return base
    base.update(
        offset=i % 7,
        order="desc",
        owner="acme_finance",
        created_after="2026-01-01",
        created_before="2026-06-30",
        min_score=0.5,
        language="en",
        region="eu",
        fields=["id", "amount", "due"],
        highlight=True,
        timeout_ms=2000,
        cursor=None,
        filters={"status": "open", "priority": 2},
        requester="ops@example.com",
        dry_run=False,
    )
    return base


def invalid_arguments(fields: int, i: int) -> dict[str, Any]:
    """Schema-invalid arguments as a model typically gets them wrong: one wrong type, one unknown key.

    Two errors to report. Each further error costs ~1.5-2 us more (jsonschema-rs builds every error object,
    with its message and paths, before the first is returned); see docs/performance.md.
    """
    args = valid_arguments(fields, i)
    args.update(limit=f"{10 + i % 90} rows", colour="red")
    return args


def definitions(schema: dict[str, Any]) -> str:
    """``gen_ai.tool.definitions`` as the model saw them (flat GenAI shape)."""
    return json.dumps(
        [
            {"type": "function", "name": "authenticate", "description": "Log in", "parameters": AUTH_SCHEMA},
            {"type": "function", "name": TOOL, "description": "Search the records", "parameters": schema},
            {"type": "function", "name": "delete_records", "description": "Delete", "parameters": {"type": "object"}},
            {"type": "function", "name": "confirm_action", "description": "Confirm", "parameters": {"type": "object"}},
        ]
    )


def policy_config(schema: dict[str, Any]) -> EvalConfig:
    """Every policy kind, the measured tool's schema also configured (so drift is computed)."""
    return EvalConfig.from_dict(
        {
            "tools": [{"name": TOOL, "parameters": schema}],
            "policies": {
                "step_budget": 20,
                "must_not_call": ["drop_database"],
                "required_steps": [{"tool": "authenticate", "before": [TOOL, "delete_records"]}],
                "destructive_tools": [{"tool": "delete_records", "confirm_with": ["confirm_action"]}],
                "argument_rules": [
                    {"tool": TOOL, "name": "bounded_page", "schema": {"properties": {"limit": {"maximum": 100}}}}
                ],
            },
        }
    )


def _chat(defs: str, calls: list[tuple[str, str]]) -> dict[str, Any]:
    parts = [{"type": "tool_call", "id": cid, "name": name, "arguments": {}} for cid, name in calls]
    return {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "gpt-5-mini",
        "gen_ai.tool.definitions": defs,
        "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": parts}]),
    }


def _tool(name: str, call_id: str, arguments: dict[str, Any], result: str) -> dict[str, Any]:
    return {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": name,
        "gen_ai.tool.call.id": call_id,
        "gen_ai.tool.call.arguments": json.dumps(arguments),
        "gen_ai.tool.call.result": result,
    }


@dataclass(frozen=True)
class AgentTrace:
    """The attributes of every span of one agent trace, prepared before any timing."""

    root: dict[str, Any]
    turn1: dict[str, Any]
    auth: dict[str, Any]
    turn2: dict[str, Any]
    calls: tuple[dict[str, Any], ...]


def end_agent_trace(tracer: Tracer, t: AgentTrace, end_call: Callable[[Span, int], None] | None = None) -> None:
    """End one agent trace's spans in the order an agent ends them: the first turn, ``authenticate``, the second
    turn, its tool calls, the root. ``end_call(span, k)`` ends the k-th of those calls (default: ``span.end()``)."""
    with tracer.start_as_current_span("invoke_agent", attributes=t.root):
        with tracer.start_as_current_span("chat", attributes=t.turn1):
            pass
        with tracer.start_as_current_span("execute_tool authenticate", attributes=t.auth):
            pass
        with tracer.start_as_current_span("chat", attributes=t.turn2):
            pass
        for k, call in enumerate(t.calls):
            if end_call is None:
                with tracer.start_as_current_span("execute_tool", attributes=call):
                    pass
            else:
                end_call(tracer.start_span("execute_tool", attributes=call), k)


def agent_traces(count: int, *, fields: int, valid: bool, calls: int = TOOL_CALLS, seed: int = 0) -> list[AgentTrace]:
    schema = SCHEMA_5 if fields == 5 else SCHEMA_20
    defs = definitions(schema)
    make_args = valid_arguments if valid else invalid_arguments
    out = []
    for t in range(count):
        ids = [f"call_{seed}_{t}_{k}" for k in range(calls)]
        out.append(
            AgentTrace(
                root={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "records-assistant"},
                turn1=_chat(defs, [(f"auth_{seed}_{t}", "authenticate")]),
                auth=_tool("authenticate", f"auth_{seed}_{t}", {"token": "s3cr3t-token"}, '{"ok": true}'),
                turn2=_chat(defs, [(cid, TOOL) for cid in ids]),
                calls=tuple(
                    _tool(TOOL, cid, make_args(fields, t * calls + k), '{"count": 3, "items": [1, 2, 3]}')
                    for k, cid in enumerate(ids)
                ),
            )
        )
    return out


class NoopExporter(SpanExporter):
    """Exports nothing: the figures measure the application thread, not a network."""

    def export(self, spans: Any) -> SpanExportResult:
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        return None


@dataclass
class Pipeline:
    provider: TracerProvider
    tracer: Tracer
    processor: ToolCallEvalProcessor | None

    def close(self) -> None:
        self.provider.shutdown()


def pipeline(config: EvalConfig | None, *, with_processor: bool, **processor_kwargs: Any) -> Pipeline:
    """A TracerProvider with a BatchSpanProcessor and a no-op exporter, optionally behind the processor.

    The processor's metrics go to a real SDK MeterProvider with a reader attached (never collected), so the
    counter updates cost what they cost in an application that exports metrics.
    """
    bsp = BatchSpanProcessor(NoopExporter())
    processor = None
    provider = TracerProvider()
    if with_processor:
        meters = MeterProvider(metric_readers=[InMemoryMetricReader()])
        processor = ToolCallEvalProcessor(bsp, config, meter_provider=meters, **processor_kwargs)
        provider.add_span_processor(processor)
    else:
        provider.add_span_processor(bsp)
    return Pipeline(provider, provider.get_tracer("benchmarks"), processor)


def capture_span(attributes: dict[str, Any], name: str = "span") -> ReadableSpan:
    """One ended span as processors receive it (for figures that time a single processor step)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    provider.get_tracer("benchmarks").start_span(name, attributes=attributes).end()
    provider.shutdown()
    return exporter.get_finished_spans()[0]
