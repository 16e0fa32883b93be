"""``ToolCallEvalSpanExporter``: the processor's scores through a wrapped exporter, every span once."""

from __future__ import annotations

from collections.abc import Sequence

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_toolcall_eval import EvalConfig
from otel_toolcall_eval import attributes as A
from otel_toolcall_eval.span_exporter import ToolCallEvalSpanExporter


class _Counting(InMemorySpanExporter):
    def __init__(self) -> None:
        super().__init__()
        self.batches = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.batches += 1
        return super().export(spans)


def _run(config: EvalConfig) -> _Counting:
    inner = _Counting()
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(ToolCallEvalSpanExporter(inner, config)))
    tracer = provider.get_tracer("t")
    for _ in range(3):
        with tracer.start_as_current_span("invoke_agent"):
            for args in ('{"city": "Paris"}', '{"town": 1}', "{"):
                with tracer.start_as_current_span(
                    "execute_tool get_weather",
                    attributes={
                        "gen_ai.operation.name": "execute_tool",
                        "gen_ai.tool.name": "get_weather",
                        "gen_ai.tool.call.arguments": args,
                    },
                ):
                    pass
    provider.shutdown()
    return inner


CONFIG = EvalConfig.from_dict(
    {
        "tools": [
            {
                "name": "get_weather",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
            }
        ]
    }
)


def test_each_span_is_exported_once_scored() -> None:
    inner = _run(CONFIG)
    spans = inner.get_finished_spans()
    assert len(spans) == 12 and len({s.context.span_id for s in spans if s.context}) == 12
    tools = [dict(s.attributes or {}) for s in spans if s.name.startswith("execute_tool")]
    assert sorted(str(t.get(A.OUTCOME)) for t in tools) == ["malformed_call"] * 6 + ["success"] * 3
    roots = [dict(s.attributes or {}) for s in spans if s.name == "invoke_agent"]
    assert [r[A.TRACE_COMPOSITE_OK] for r in roots] == [False] * 3


def test_held_failed_spans_go_out_by_shutdown_at_the_latest() -> None:
    held = EvalConfig.from_dict({**CONFIG.model_dump(exclude_defaults=True), "limits": {"max_held_spans": 100}})
    assert len(_run(held).get_finished_spans()) == 12
