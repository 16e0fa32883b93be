"""The Vercel AI SDK's legacy span shape (``LegacyOpenTelemetry`` of @ai-sdk/otel, ai 7), as recorded by the real
SDK under Node (tests/integration/test_serve_node.py runs it): ``ai.toolCall`` tool spans, and model-call spans
(``ai.generateText.doGenerate``) that carry the tool definitions and the requested calls and end *after* the
tool span their request caused."""

from __future__ import annotations

import json

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_toolcall_eval import ToolCallEvalProcessor
from otel_toolcall_eval import attributes as A

WEATHER = {
    "type": "function",
    "name": "get_weather",
    "inputSchema": {
        "type": "object",
        "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        "required": ["city", "unit"],
    },
    "description": "Current weather in a city.",
}


def run() -> list[dict[str, object]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(ToolCallEvalProcessor(SimpleSpanProcessor(exporter)))
    tracer = provider.get_tracer("ai")
    with tracer.start_as_current_span("ai.generateText", attributes={"ai.operationId": "ai.generateText"}):
        steps = [
            ("c1", "get_weather", {"city": "Paris", "unit": "celsius"}),
            ("c2", "get_weather", {"city": "Oslo", "unit": "kelvin"}),
            ("c3", "book_flight", {"to": "Oslo"}),  # not offered: the SDK runs no tool span for it
        ]
        for call_id, name, args in steps:
            model_call = tracer.start_span(
                "ai.generateText.doGenerate",
                attributes={
                    "ai.operationId": "ai.generateText.doGenerate",
                    "ai.prompt.tools": [json.dumps(WEATHER)],
                    "ai.response.toolCalls": json.dumps([{"toolCallId": call_id, "toolName": name, "input": args}]),
                },
            )
            if name != "book_flight":
                attrs = {
                    "ai.operationId": "ai.toolCall",
                    "ai.toolCall.name": name,
                    "ai.toolCall.id": call_id,
                    "ai.toolCall.args": json.dumps(args),
                    "ai.toolCall.result": json.dumps(f"sunny in {args['city']}"),
                }
                tracer.start_span("ai.toolCall", attributes=attrs).end()
            model_call.end()  # after the tool span it caused
    provider.shutdown()
    return [dict(s.attributes or {}) for s in exporter.get_finished_spans()]


def test_legacy_spans_are_scored_and_late_requests_count_as_answered() -> None:
    spans = run()
    tools = [a for a in spans if A.OUTCOME in a]
    assert [a[A.CONVENTION] for a in tools] == ["vercel_ai", "vercel_ai"]
    assert [a[A.PARSE_OK] for a in tools] == [True, True]
    # the first call ran before any tool list arrived; the second is checked against it
    assert A.TOOL_KNOWN not in tools[0] and tools[1][A.TOOL_KNOWN] is True
    assert tools[1][A.SCHEMA_VALID] is False and tools[1][A.OUTCOME] == "malformed_call"
    root = next(a for a in spans if A.TRACE_CORRECT in a)
    assert root[A.TRACE_TOOL_CALLS] == 2
    assert root[A.TRACE_UNEXECUTED_CALLS] == 1  # only book_flight: the others' requests came after their calls ran
    assert root[A.TRACE_UNKNOWN_TOOL_REQUESTS] == 1
    assert root[A.TRACE_UNLISTED_CALLS] == 0


def test_a_tool_span_that_ends_before_its_request_is_not_unexecuted() -> None:
    """A real recording (@ai-sdk/otel GenAI spans, ``tests/fixtures/frameworks/vercel_ai-otel.json``) where the JS
    SDK's per-span clock (start = Date.now() in whole milliseconds, end = start + a precise duration) makes the
    second and third ``execute_tool`` spans end up to a millisecond *before* the ``chat`` spans that requested
    them. Sorted by end time (``replay``, and ``serve``, which scores each batch in end order) the tool span comes
    first: its call id must count as answered when the request arrives, not as a second unexecuted call."""
    from opentelemetry.sdk.trace import ReadableSpan

    from otel_toolcall_eval.replay import replay_spans
    from otel_toolcall_eval.replay.engine import end_order
    from tests.framework_scenario import EXPECTED, check, recorded

    spans = recorded("vercel_ai-otel")
    ordered = [span for group in end_order(spans) for span in group]
    tool_at: dict[str, int] = {}  # call id -> the position of its tool span, and of the chat span requesting it
    chat_at: dict[str, int] = {}
    for i, s in enumerate(ordered):
        a = s.attributes or {}
        if a.get("gen_ai.operation.name") == "execute_tool":
            tool_at[str(a["gen_ai.tool.call.id"])] = i
        elif a.get("gen_ai.operation.name") == "chat":
            for message in json.loads(str(a.get("gen_ai.output.messages", "[]"))):
                chat_at.update({p["id"]: i for p in message["parts"] if p["type"] == "tool_call"})
    assert [cid for cid, i in tool_at.items() if i < chat_at[cid]], "the recording no longer shows the skew"

    def root(out: list[ReadableSpan]) -> tuple[object, object]:
        check(out, EXPECTED["vercel_ai-otel"])
        attrs = next(dict(s.attributes or {}) for s in out if A.TRACE_CORRECT in (s.attributes or {}))
        return attrs[A.TRACE_UNEXECUTED_CALLS], attrs[A.TRACE_REQUEST_SCORED_CALLS]

    # book_flight only (no span ran for it): scored from the requests (issue 26), none left unexecuted
    assert root(replay_spans(spans).spans) == (0, 1)
    exporter = InMemorySpanExporter()
    processor = ToolCallEvalProcessor(SimpleSpanProcessor(exporter))
    for span in ordered:  # serve's order: each batch in end order
        processor.on_end(span)
    processor.shutdown()
    assert root(list(exporter.get_finished_spans())) == (0, 1)
