"""The one scenario every agent framework runs, and what its verdicts must be.

Shared by the real integration tests (``tests/integration/test_agent_frameworks*.py``, which run the frameworks)
and the unit suite (``tests/conventions/test_framework_fixtures.py``, which re-enacts the spans they recorded under
``tests/fixtures/frameworks/`` through the processor, without the frameworks installed).

The scenario, one model turn per call so that completion order is scenario order:

1. ``get_weather(city="Paris", unit="celsius")``: valid
2. ``get_weather(city="Rome", unit="fahrenheit")``: a second valid call (not a duplicate)
3. ``get_weather(city="Oslo", unit="kelvin")``: ``unit`` is an enum of celsius/fahrenheit: schema-invalid
4. ``book_flight(to="Oslo")``: a tool the agent does not have
5. ``get_population(city="Paris")``: a tool that raises ``ConnectionError``
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_toolcall_eval import attributes as A
from otel_toolcall_eval.replay.otlp import request_from_json, spans_from_request

FIXTURES = Path(__file__).parent / "fixtures" / "frameworks"
RECORD_ENV = "TOOLCALL_EVAL_RECORD_FIXTURES"  # set to 1 to rewrite the fixtures from a real run

UNITS = ["celsius", "fahrenheit"]
WEATHER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": UNITS}},
    "required": ["city", "unit"],
}
POPULATION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
}
CALLS: list[tuple[str, dict[str, Any]]] = [
    ("get_weather", {"city": "Paris", "unit": "celsius"}),
    ("get_weather", {"city": "Rome", "unit": "fahrenheit"}),
    ("get_weather", {"city": "Oslo", "unit": "kelvin"}),
    ("book_flight", {"to": "Oslo"}),
    ("get_population", {"city": "Paris"}),
]
CALL_IDS = ["call_valid_1", "call_valid_2", "call_bad_enum", "call_unknown", "call_raises"]
FINAL_TEXT = "Done."
# the usage every fake model answer reports (tests/integration/scripted_openai.py: input, output tokens)
USAGE = (10, 5)


def get_weather(city: str, unit: str) -> str:
    """Current weather in a city."""
    return f"sunny, 21 degrees {unit}, in {city}"


def get_population(city: str) -> int:
    """Population of a city."""
    raise ConnectionError("census service unreachable")


KEYS = (A.OUTCOME, A.ERROR_SOURCE, A.PARSE_OK, A.TOOL_KNOWN, A.SCHEMA_VALID)


def call(
    outcome: str,
    error_source: str | None = None,
    *,
    parse_ok: bool | None = None,
    tool_known: bool | None = None,
    schema_valid: bool | None = None,
) -> dict[str, Any]:
    """The expected scores of one call; None means the attribute must be absent (no evidence recorded)."""
    values = (outcome, error_source, parse_ok, tool_known, schema_valid)
    return dict(zip(KEYS, values, strict=True))


@dataclass(frozen=True)
class Expected:
    """Per scored tool span in step order: the tool's name and its scores; then the root's verdict."""

    calls: list[tuple[str, dict[str, Any]]]
    correct: bool
    errors: int
    unknown_tool_requests: int | None = None  # None: the attribute must be absent
    verdict: bool = True  # False: no root may carry a verdict (nothing in the trace to score)
    model_calls: int | None = None  # checked when set: each model request once, however many spans record it
    # checked with model_calls: the root's (input, output) tokens, by default each request's ``USAGE`` once;
    # (None, None): absent, as when the model calls recorded no token count (never "0 tokens" without evidence)
    tokens: tuple[int | None, int | None] | None = None
    # calls that ran on no tool span, scored from the requests (``toolcall_eval.requested.N.*`` on model spans), in
    # step order; the root counts them among its tool calls
    requested: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    # (checked, invalid) calls validated when a schema arrived after them (``trace.late_schema.*``); None: absent
    late_schema: tuple[int, int] | None = None
    # checked when set: the tools the trace listed (``trace.tool_list.count``) and, of the calls scored before that
    # list came, those not on it (``trace.unlisted_calls``)
    tool_list: tuple[int, int] | None = None
    # (checked, failed) calls that read as a success on spans that cannot record an error, whose reply in the next
    # model request was read (``trace.late_outcome.*``); None: absent
    late_outcome: tuple[int, int] | None = None
    # requested calls whose replies could not be matched by position (their conversation's history broke before
    # them: ``trace.unmatched_requests``); None: absent
    unmatched: int | None = None


def scored(spans: Sequence[ReadableSpan]) -> list[ReadableSpan]:
    """Tool spans that carry a verdict (not the wrapping second instrumentation of a call), in step order."""
    found = [s for s in spans if A.OUTCOME in (s.attributes or {})]
    return sorted(found, key=lambda s: int((s.attributes or {})[A.STEP]))


def roots_with_verdict(spans: Sequence[ReadableSpan]) -> list[ReadableSpan]:
    return [s for s in spans if A.TRACE_CORRECT in (s.attributes or {})]


def check(spans: Sequence[ReadableSpan], expected: Expected) -> None:
    """Assert every call kind's scores and the one root verdict."""
    tools = scored(spans)
    got = [(_tool_name(s), {k: (s.attributes or {}).get(k) for k in KEYS}) for s in tools]
    assert got == expected.calls
    assert requested_scores(spans) == expected.requested
    roots = roots_with_verdict(spans)
    if not expected.verdict:
        assert roots == [], [s.name for s in roots]
        return
    assert len(roots) == 1, [s.name for s in roots]  # a trace without tool activity gets no verdict
    root = dict(roots[0].attributes or {})
    assert root[A.TRACE_TOOL_CALLS] == len(expected.calls) + len(expected.requested)
    assert root.get(A.TRACE_REQUEST_SCORED_CALLS) == (len(expected.requested) or None)
    assert root[A.TRACE_ERRORS] == expected.errors
    assert root[A.TRACE_CORRECT] is expected.correct
    assert root[A.TRACE_COMPOSITE_OK] is (expected.correct and expected.errors == 0)
    assert root.get(A.TRACE_UNKNOWN_TOOL_REQUESTS) == expected.unknown_tool_requests
    if expected.model_calls is not None:
        assert root[A.TRACE_MODEL_CALLS] == expected.model_calls
        want = expected.tokens or (USAGE[0] * expected.model_calls, USAGE[1] * expected.model_calls)
        assert (root.get(A.TRACE_INPUT_TOKENS), root.get(A.TRACE_OUTPUT_TOKENS)) == want
    late = (root.get(A.TRACE_LATE_SCHEMA_CHECKED), root.get(A.TRACE_LATE_SCHEMA_INVALID))
    assert late == (expected.late_schema or (None, None))
    if expected.tool_list is not None:
        assert (root.get(A.TRACE_TOOL_LIST_COUNT), root.get(A.TRACE_UNLISTED_CALLS)) == expected.tool_list
    read = (root.get(A.TRACE_LATE_OUTCOME_CHECKED), root.get(A.TRACE_LATE_OUTCOME_FAILED))
    assert read == (expected.late_outcome or (None, None))
    assert root.get(A.TRACE_UNMATCHED_REQUESTS) == expected.unmatched


def requested_scores(spans: Sequence[ReadableSpan]) -> list[tuple[str, dict[str, Any]]]:
    """The calls scored from the requests (``toolcall_eval.requested.<N>.*`` on the model spans), in step order."""
    found: list[tuple[int, str, dict[str, Any]]] = []
    for span in spans:
        calls: dict[str, dict[str, Any]] = {}
        for key, value in (span.attributes or {}).items():
            if key.startswith(A.REQUESTED_PREFIX):
                index, _, name = key.removeprefix(A.REQUESTED_PREFIX).partition(".")
                calls.setdefault(index, {})[A.PREFIX + name] = value
        for call in calls.values():
            assert call[A.CONVENTION] == "request"
            found.append((int(call[A.STEP]), str(call[A.PREFIX + "tool"]), {k: call.get(k) for k in KEYS}))
    return [(name, scores) for _, name, scores in sorted(found, key=lambda item: item[0])]


def _tool_name(span: ReadableSpan) -> str:
    a = span.attributes or {}
    for key in (A.OPENINFERENCE_TOOL_NAME, A.GEN_AI_TOOL_NAME, A.VERCEL_AI_TOOL_CALL_NAME, A.TRACELOOP_ENTITY_NAME):
        if key in a:
            return str(a[key])
    # DSPy's tool spans: named ``<tool>.__call__``; the MCP SDK's client spans ``MCP send tools/call <tool>``
    return span.name.removesuffix(".__call__").removeprefix("MCP send tools/call ")


def fixture_path(name: str) -> Path:
    return FIXTURES / f"{name}.json"


def record(name: str, raw: Sequence[ReadableSpan]) -> None:
    """Write the spans as recorded (before scoring) as OTLP JSON, when ``TOOLCALL_EVAL_RECORD_FIXTURES=1``."""
    if os.environ.get(RECORD_ENV) != "1":
        return
    from otel_toolcall_eval.replay.otlp import encode_json

    document = encode_json(list(raw))
    for resource in document.get("resourceSpans", ()):
        for scope in resource.get("scopeSpans", ()):
            kept = _read_whole(scope.get("scope", {}).get("name", ""))
            for span in scope.get("spans", ()):
                _trim(span, kept)
    FIXTURES.mkdir(parents=True, exist_ok=True)
    fixture_path(name).write_text(json.dumps(document, indent=None, sort_keys=True, separators=(",", ":")) + "\n")


_TOOL_KINDS = ({"key": "openinference.span.kind", "value": {"stringValue": "TOOL"}},)
_KEEP = 400  # characters kept of a long framework repr (``input.value``/``output.value``) or span event
_CUT = frozenset({"input.value", "output.value"})  # on spans that are not tool spans; nothing else is read there


def _read_whole(scope: str) -> frozenset[str]:
    """The attributes the shape table's row of ``scope`` reads reprs from (Haystack's ``input.value``: its tools and
    replies), kept whole: cut, they would not read."""
    from otel_toolcall_eval.conventions.shapes import shape_named

    row = shape_named(scope)
    slices = (row.definitions_repr, row.replies_repr) if row is not None else ()
    return frozenset(s.attribute for s in slices if s is not None)


def _trim(span: dict[str, Any], kept: frozenset[str] = frozenset()) -> None:
    """Keep fixtures small and free of the machine: stack traces go, and long values (prompts, framework reprs)
    are cut on every span but tool spans, whose attributes are kept whole, and but what ``kept`` names."""
    attributes = span.get("attributes", [])
    is_tool = any(a in _TOOL_KINDS for a in attributes) or any(
        a.get("key") == "gen_ai.operation.name" and a.get("value", {}).get("stringValue") == "execute_tool"
        for a in attributes
    )
    if not is_tool:
        _cut(attributes, _CUT - kept)
    for event in span.get("events", ()):
        event["attributes"] = [a for a in event.get("attributes", ()) if a.get("key") != "exception.stacktrace"]
        if not is_tool:
            _cut(event["attributes"], None)


def _cut(attributes: list[dict[str, Any]], keys: frozenset[str] | None = _CUT) -> None:
    for attribute in attributes:
        if keys is not None and attribute.get("key") not in keys:
            continue
        value = attribute.get("value", {})
        text = value.get("stringValue")
        if isinstance(text, str) and len(text) > _KEEP:
            value["stringValue"] = text[:_KEEP] + "..."


def _content(tool_known: bool | None, raised_by: str = "exception") -> list[tuple[str, dict[str, Any]]]:
    """Arguments and schemas recorded: every call kind gets its verdict (the unknown tool runs no tool span)."""
    ok = call("success", parse_ok=True, tool_known=tool_known, schema_valid=True)
    return [
        ("get_weather", ok),
        ("get_weather", ok),
        ("get_weather", call("malformed_call", "schema", parse_ok=True, tool_known=tool_known, schema_valid=False)),
        (
            "get_population",
            call("execution_failed", raised_by, parse_ok=True, tool_known=tool_known, schema_valid=True),
        ),
    ]


def _hidden(enum_outcome: tuple[str, str | None] = ("success", None), raised_by: str = "exception") -> list[Any]:
    """Inputs hidden: no arguments, so no parse or schema verdict (never "valid" without evidence); outcomes stay."""
    return [
        ("get_weather", call("success")),
        ("get_weather", call("success")),
        ("get_weather", call(*enum_outcome)),
        ("get_population", call("execution_failed", raised_by)),
    ]


def _langgraph_js(content: bool | None) -> list[tuple[str, dict[str, Any]]]:
    if content is None:
        return [("get_weather", call("success")), ("get_weather", call("success")), _failed(None)]
    ok = call("success", parse_ok=True, tool_known=True, schema_valid=True)
    return [("get_weather", ok), ("get_weather", ok), _failed(True)]


def _failed(content: bool | None) -> tuple[str, dict[str, Any]]:
    if content is None:
        return ("get_population", call("execution_failed", "exception"))
    verdicts = {"parse_ok": True, "tool_known": True, "schema_valid": True}
    return ("get_population", call("execution_failed", "exception", **verdicts))


def _strands() -> list[tuple[str, dict[str, Any]]]:
    ok = call("success", parse_ok=True, schema_valid=True)
    return [
        ("get_weather", ok),
        ("get_weather", ok),
        ("get_weather", call("malformed_call", "schema", parse_ok=True, schema_valid=False)),
        ("book_flight", call("malformed_call", "unknown_tool", parse_ok=True, tool_known=False)),
        ("get_population", call("execution_failed", "exception", parse_ok=True, schema_valid=True)),
    ]


def _autogen(parse_ok: bool | None) -> list[tuple[str, dict[str, Any]]]:
    ok = call("success", parse_ok=parse_ok)
    return [
        ("get_weather", ok),
        ("get_weather", ok),
        ("get_weather", call("malformed_call", "input_rejected", parse_ok=parse_ok)),
        ("get_population", call("execution_failed", "exception", parse_ok=parse_ok)),
    ]


def _adk(parse_ok: bool | None, schema: bool | None, *, first_unlisted: bool = False) -> list[Any]:
    ok = call("success", parse_ok=parse_ok, tool_known=True, schema_valid=schema)
    bad_enum = call("malformed_call", "schema", parse_ok=True, tool_known=True, schema_valid=False) if schema else ok
    first = call("success", parse_ok=parse_ok) if first_unlisted else ok
    return [
        ("get_weather", first),
        ("get_weather", ok),
        ("get_weather", bad_enum),
        ("book_flight", call("malformed_call", "unknown_tool", parse_ok=parse_ok, tool_known=False)),
        (
            "get_population",
            call("execution_failed", "exception", parse_ok=parse_ok, tool_known=True, schema_valid=schema),
        ),
    ]


def _openai_v2(parse_ok: bool | None) -> list[tuple[str, dict[str, Any]]]:
    ok = call("success", parse_ok=parse_ok)
    return [
        ("get_weather", ok),
        ("get_weather", ok),
        ("get_weather", ok),
        ("book_flight", call("malformed_call", "unknown_tool", parse_ok=parse_ok, tool_known=False)),
        ("get_population", call("execution_failed", "error.type", parse_ok=parse_ok)),
    ]


def _crewai_listener() -> list[tuple[str, dict[str, Any]]]:
    ok = call("success", parse_ok=True, tool_known=True)
    return [
        ("get_weather", ok),
        ("get_weather", ok),
        ("get_weather", call("malformed_call", "input_rejected", parse_ok=True, tool_known=True)),
        ("book_flight", call("malformed_call", "unknown_tool", parse_ok=True, tool_known=False)),
        ("get_population", call("execution_failed", "status", parse_ok=True, tool_known=True)),
    ]


def _openllmetry_hidden() -> list[tuple[str, dict[str, Any]]]:
    ok = call("success", tool_known=True)
    return [
        ("get_weather", ok),
        ("get_weather", ok),
        ("get_weather", call("malformed_call", "input_rejected", tool_known=True)),
        ("get_population", call("execution_failed", "exception", tool_known=True)),
    ]


def _dspy(parse_ok: bool | None) -> list[tuple[str, dict[str, Any]]]:
    """AutoGen's verdicts (the framework rejects the bad enum itself, nothing lists the tools), then ``finish``."""
    return [*_autogen(parse_ok), ("finish", call("success", parse_ok=parse_ok))]


def _anthropic(content: bool | None) -> list[tuple[str, dict[str, Any]]]:
    ok = call("success", parse_ok=content)
    rejected = (
        call("malformed_call", "input_rejected", parse_ok=True) if content else call("execution_failed", "error.type")
    )
    return [
        ("get_weather", ok),
        ("get_weather", ok),
        ("get_weather", rejected),
        ("get_population", call("execution_failed", "error.type", parse_ok=content)),
    ]


def _google_genai(parse_ok: bool | None) -> list[tuple[str, dict[str, Any]]]:
    ok = call("success", parse_ok=parse_ok)
    return [*[("get_weather", ok)] * 3, ("get_population", call("execution_failed", "error.type", parse_ok=parse_ok))]


def _agno_hidden() -> list[tuple[str, dict[str, Any]]]:
    return [
        ("get_weather", call("success")),
        ("get_weather", call("success")),
        ("get_weather", call("malformed_call", "input_rejected")),
        ("get_population", call("execution_failed", "status")),
    ]


def _mcp1(content: bool | None) -> list[tuple[str, dict[str, Any]]]:
    ok = call("success", parse_ok=content)
    failed = call("execution_failed", "error.type")
    return [
        ("get_weather", ok),
        ("get_weather", ok),
        ("get_weather", call("malformed_call", "input_rejected", parse_ok=True) if content else failed),
        ("book_flight", call("malformed_call", "unknown_tool", parse_ok=True, tool_known=False) if content else failed),
        ("get_population", call("execution_failed", "error.type", parse_ok=content)),
    ]


def _from_requests() -> list[tuple[str, dict[str, Any]]]:
    """Calls scored from the requests alone (no tool span ran): each against the definitions and schemas the model
    was offered, its outcome from the reply the next request carried back: its ``is_error`` where the
    instrumentation keeps it (OpenInference, in the request body), else the reply's text (OpenLLMetry's GenAI parts)."""
    raised = call("execution_failed", "error.type", parse_ok=True, tool_known=True, schema_valid=True)
    return [*_content(True)[:3], _UNKNOWN_BY_DEFINITIONS, ("get_population", raised)]


def _mcp2(content: bool | None) -> list[tuple[str, dict[str, Any]]]:
    if content:
        return [*_content(True, "error.type")[:3], _UNKNOWN_BY_DEFINITIONS, _content(True, "error.type")[3]]
    failed = call("execution_failed", "error.type")
    return [("get_weather", call("success")), ("get_weather", call("success")), ("get_weather", failed),
            ("book_flight", failed), ("get_population", failed)]  # fmt: skip


_UNKNOWN_BY_DEFINITIONS = ("book_flight", call("malformed_call", "unknown_tool", parse_ok=True, tool_known=False))
# A mixed trace (its other calls ran on tool spans) whose unknown tool ran on none: its request, answered by the next
# request's reply (by call id), is scored from the requests like a trace with no tool span at all (issue 26), so it
# is a malformed call of the verdict, no longer only one of ``trace.unknown_tool_requests``; the calls with spans are
# not counted again. Hidden arguments (pydantic-ai's ``include_content=False``): no parse verdict.
_SPANLESS = [_UNKNOWN_BY_DEFINITIONS]
_SPANLESS_HIDDEN = [("book_flight", call("malformed_call", "unknown_tool", tool_known=False))]


def _semantic_kernel(parse_ok: bool | None) -> list[tuple[str, dict[str, Any]]]:
    """Its tools under the plugin's name; it parses the bad enum itself ("Parameter unit is expected to be parsed to
    <enum 'Unit'> but is not."): rejected, not run."""
    ok = call("success", parse_ok=parse_ok)
    return [
        ("Weather-get_weather", ok),
        ("Weather-get_weather", ok),
        ("Weather-get_weather", call("malformed_call", "input_rejected", parse_ok=parse_ok)),
        ("Weather-get_population", call("execution_failed", "exception", parse_ok=parse_ok)),
    ]


def _litellm_stamped() -> list[tuple[str, dict[str, Any]]]:
    """The application's own tool spans (arguments recorded); the definitions only on the root, which ends last."""
    ok = call("success", parse_ok=True)
    return [
        *[("get_weather", ok)] * 3,
        ("book_flight", call("malformed_call", "unknown_tool", parse_ok=True, tool_known=False)),
        ("get_population", call("execution_failed", "exception", parse_ok=True)),
    ]


# LlamaIndex's mock LLM reports no usage, nor do DSPy's LM spans record the fake's: no token count anywhere
NO_USAGE = (None, None)

FINAL_ANSWER = ("final_answer", call("success", parse_ok=True, tool_known=True, schema_valid=True))

EXPECTED: dict[str, Expected] = {
    # LlamaIndex records no usable definitions (``llm.tools`` holds the tool objects' repr), so tool_known stays
    # absent; the tool span's own ``tool.parameters`` is the schema; "Tool book_flight not found" goes back to the
    # model in the next LLM span's input messages, which ties it to the request.
    "llama_index-content": Expected(
        _content(None),
        correct=False,
        errors=3,
        unknown_tool_requests=0,
        requested=_SPANLESS,
        model_calls=6,
        tokens=NO_USAGE,
    ),
    # hidden inputs/outputs: the unknown-tool reply and the arguments are redacted; LlamaIndex runs the bad enum.
    # Six requests either way, without tokens or (hidden) output messages: its ``_prepare_chat_with_tools`` step,
    # marked ``LLM`` too, is no request (its row: ``not_requests``)
    "llama_index-hidden": Expected(_hidden(), correct=True, errors=1, model_calls=6, tokens=NO_USAGE),
    # smolagents: ``final_answer`` is a tool call too; the unknown tool fails its step span, no tool span
    "smolagents-content": Expected(
        [*_content(True), FINAL_ANSWER], correct=False, errors=2, unknown_tool_requests=1, model_calls=6
    ),
    "smolagents-hidden": Expected(
        [*_hidden(), ("final_answer", call("success"))], correct=True, errors=1, model_calls=6
    ),
    # OpenAI Agents SDK: it rejects the bad enum itself (status ERROR, details redacted) and ends the run on the
    # unknown tool (ModelBehaviorError, recorded on no span: the request on the response span is the evidence)
    "openai_agents-content": Expected(
        _content(True, "status"), correct=False, errors=2, unknown_tool_requests=1, model_calls=5
    ),
    "openai_agents-hidden": Expected(
        _hidden(("execution_failed", "status"), "status"), correct=True, errors=2, model_calls=5
    ),
    # Strands rejects the bad enum itself (the schema on the tool span says why) and runs a tool span for the
    # unknown tool ("Unknown tool: book_flight"); the definitions come on the root span, after every tool span
    "strands-default": Expected(_strands(), correct=False, errors=3, model_calls=6),
    "strands-latest": Expected(_strands(), correct=False, errors=3, model_calls=6),
    # AutoGen records neither arguments, results nor definitions, and rejects the bad enum itself (ValidationError);
    # it runs no span for the unknown tool and tells the model "tool 'book_flight' not found in any workbench".
    # Its agent-creation trace gets no verdict. With content capture the official OpenAI instrumentation's chat
    # spans carry the requested calls: their arguments (by call id) and that reply become evidence.
    "autogen-default": Expected(_autogen(None), correct=False, errors=2, model_calls=6),
    "autogen-capture": Expected(
        _autogen(True), correct=False, errors=3, unknown_tool_requests=0, requested=_SPANLESS, model_calls=6
    ),
    # Google ADK runs a tool span for the unknown tool (error.type ValueError, "no tool with that name") and lists
    # the tools on every generate_content span; it runs the bad enum unchecked, and ends the run on the raising tool
    "adk-default": Expected(_adk(None, None), correct=False, errors=2, model_calls=5),
    "adk-latest": Expected(_adk(True, True), correct=False, errors=3, unknown_tool_requests=0, model_calls=5),
    # legacy: the definitions come inside the call_llm span, which ends after its own turn's tool span: the first
    # call is scored before any tool list (its tool_known absent), the root checks it against the list later
    # CrewAI, wrapper mode: one trace, the chat spans' schemas; the unknown tool runs no tool span, and the model is
    # told "not found" in its next turn's input
    "crewai-wrapper": Expected(
        _content(True), correct=False, errors=3, unknown_tool_requests=0, requested=_SPANLESS, model_calls=6
    ),
    # event-listener mode: the only definitions are CrewAI's own ``llm.tools``, whose parameters are Python reprs
    # (no JSON Schema: names only, so no schema verdict); CrewAI rejects the bad enum itself ("arguments validation
    # failed"), runs a span marked OK for the unknown tool ("not found"), and the OpenAI instrumentor's chat spans
    # are roots of traces of their own (no verdict: an instrumented client's own root span)
    "crewai-listener": Expected(_crewai_listener(), correct=False, errors=3, model_calls=6),
    # a hand-written loop on the plain OpenAI client (official instrumentation, util-genai tool spans): 2.4b0 records
    # no tool definitions, so no schema or tool-list verdict; the loop runs the bad enum unchecked, and its own
    # "unknown tool: book_flight" (KeyError) on the tool span names the unknown tool
    "openai_v2-default": Expected(_openai_v2(None), correct=False, errors=2, model_calls=6),
    "openai_v2-capture": Expected(_openai_v2(True), correct=False, errors=2, unknown_tool_requests=0, model_calls=6),
    # (its arguments validated then: ``trace.late_schema``)
    "adk-legacy": Expected(
        _adk(True, True, first_unlisted=True), correct=False, errors=3, late_schema=(1, 0), model_calls=5
    ),
    # The Vercel AI SDK (ai 7) with @ai-sdk/otel's OpenTelemetry integration (tests/integration/node/vercel_agent.mjs,
    # TELEMETRY=otel, as the service received it, scores stripped): GenAI ``execute_tool`` spans; it runs the bad enum unchecked (a JSON
    # Schema tool without a validator) and no span for the unknown tool, whose request is on its ``chat`` span.
    # This recording is one where the JS SDK's clock puts a tool span's end before its request's ``chat`` span
    # (each JS span's start is Date.now(), whole milliseconds, plus a precise duration: up to 1 ms of skew).
    "vercel_ai-otel": Expected(
        _content(True), correct=False, errors=3, unknown_tool_requests=0, requested=_SPANLESS, model_calls=6
    ),
    # LangGraph.js (StateGraph + prebuilt ToolNode, OpenInference's LangChain instrumentation, Node): LangChain.js
    # validates the arguments before the tool starts, so the bad enum runs no tool span; the unknown tool neither.
    # Its LLM spans record no call ids, on the requested calls or on the tool messages, so each request is matched
    # to its reply by position (its row: ``positional_calls``): the bad enum ("did not match expected schema") and
    # the unknown tool ('Tool "book_flight" not found') are scored from the requests. The single-argument tool
    # records its bare value (``Paris``). Hidden: no arguments, no definitions, no requests.
    "langgraph_js-content": Expected(
        _langgraph_js(True),
        correct=False,
        errors=3,
        unknown_tool_requests=0,
        requested=[_content(True)[2], _UNKNOWN_BY_DEFINITIONS],
        model_calls=6,
    ),
    "langgraph_js-hidden": Expected(_langgraph_js(None), correct=True, errors=1, model_calls=6),
    # The OpenAI Agents SDK for JS (@openai/agents 0.20, OpenInference's trace processor for it; Node, through
    # serve; tests/integration/node/openai_agents.mjs): unlike the Python SDK it only JSON-parses the arguments of
    # a JSON Schema tool, so the bad enum runs (the schema check flags it); the raising tool is answered "An error
    # occurred" on a span with status ERROR and the exception event; with ``toolNotFoundBehavior:
    # 'return_error_to_model'`` the unknown tool runs no span, its request (a tool not offered) is on the response
    # span. Hidden: no arguments, definitions or requests, so the bad enum is a success.
    "openai_agents_js-content": Expected(
        _content(True), correct=False, errors=3, unknown_tool_requests=0, requested=_SPANLESS, model_calls=6
    ),
    "openai_agents_js-hidden": Expected(_hidden(), correct=True, errors=1, model_calls=6),
    # LangGraph + OpenLLMetry's LangChain instrumentation: its own wrapper (``{"input_str", "inputs", "kwargs":
    # {"tool_call_id"}, ...}``) under ``gen_ai.tool.call.arguments``, unwrapped by its scope's row (shapes.py);
    # definitions and requests on the chat spans; ToolNode validates the bad enum inside the tool span (pydantic's
    # ValidationError: the schema says why) and runs no span for the unknown tool ("is not a valid tool")
    "langgraph_openllmetry-content": Expected(
        _content(True), correct=False, errors=3, unknown_tool_requests=0, requested=_SPANLESS
    ),
    # ``TRACELOOP_TRACE_CONTENT=false``: no arguments, results or requested calls; the definitions stay (names known)
    # and pydantic's "1 validation error for get_weather" says the bad enum was rejected; the unknown tool is unseen
    "langgraph_openllmetry-hidden": Expected(_openllmetry_hidden(), correct=False, errors=2),
    # DSPy ReAct + OpenInference: the tool name only in the span name (``get_weather.__call__``), the arguments as
    # ``{"kwargs": {...}}``; DSPy's ``Tool`` rejects the bad enum itself ("Arg unit is invalid"); no definitions or
    # requested calls anywhere (ReAct parses them from text), so no schema or tool-list verdict; ``finish`` is a call
    "dspy-content": Expected(_dspy(True), correct=False, errors=2, model_calls=6, tokens=NO_USAGE),
    "dspy-hidden": Expected(_dspy(None), correct=False, errors=2, model_calls=6, tokens=NO_USAGE),
    # The Anthropic SDK's tool runner with its own tracing: ``execute_tool`` spans with the call id; no definitions
    # anywhere. By default nothing of a failure but ``error.type=tool_error``: its rejection of the bad enum cannot be
    # told from the raising tool (both execution failures, so the trace reads correct); with content, the result's
    # content blocks ("Invalid arguments for function get_weather") say it, and the unknown tool's request (no span)
    # is answered "not found" in the next request's messages
    "anthropic_sdk-default": Expected(_anthropic(None), correct=True, errors=2),
    "anthropic_sdk-content": Expected(
        _anthropic(True), correct=False, errors=3, unknown_tool_requests=0, requested=_SPANLESS, model_calls=6
    ),
    # the same with OpenLLMetry's instrumentation of the client too: two spans of every request (one
    # ``gen_ai.response.id``), six model calls all the same; its chat spans add the definitions, so every verdict
    "anthropic_sdk_openllmetry-content": Expected(
        _content(True, "error.type"),
        correct=False,
        errors=3,
        unknown_tool_requests=0,
        requested=_SPANLESS,
        model_calls=6,
    ),
    # The same tool runner with its own tracing off, under an instrumentation of the model calls only (OpenInference's,
    # OpenLLMetry's), in an application's root span: the tools run on no span. With content the requests are the only
    # evidence, and each call is scored from them (``engine.requested``): its name against the definitions (two
    # tools), its arguments against the schema, its outcome from the ``tool_result`` the next request carries
    # (OpenInference keeps the request body's ``is_error``; OpenLLMetry's GenAI parts drop it, so the raising tool's
    # reply is a success there). Hidden: nothing of the calls is recorded, so no verdict at all.
    "anthropic_openinference-content": Expected(
        [], correct=False, errors=3, unknown_tool_requests=0, requested=_from_requests(), model_calls=6
    ),
    "anthropic_openinference-hidden": Expected([], correct=False, errors=0, verdict=False),
    # OpenLLMetry's GenAI parts drop the ``tool_result``'s ``is_error`` (its row: ``records_error_flag``): the raising
    # tool's reply text, the tool runner's ``repr`` of the exception, says it failed
    "anthropic_openllmetry-content": Expected(
        [], correct=False, errors=3, unknown_tool_requests=0, requested=_from_requests(), model_calls=6
    ),
    "anthropic_openllmetry-hidden": Expected([], correct=False, errors=0, verdict=False),
    # google-genai's automatic function calling + the official instrumentation: it cannot convert a Literal argument
    # (the unit is a plain string, so "kelvin" runs) and raises on a tool it does not have (not requested); one
    # ``generate_content`` span wraps the whole loop and ends after the tool spans, so its definitions (parameters
    # null: no schema) are checked on the root (``trace.unlisted_calls``), not per call
    "google_genai-default": Expected(_google_genai(None), correct=True, errors=1),
    "google_genai-capture": Expected(_google_genai(True), correct=True, errors=1),
    # Agno + OpenInference: arguments in ``input.value`` and again in ``tool.parameters`` (the spec's place for the
    # schema), where hidden inputs leave them: read neither as arguments nor as a schema there (its row), so hidden
    # means no parse verdict; Agno validates the bad enum itself (pydantic's text in the status) and runs no span for
    # the unknown tool; its raising tool is a status ERROR with the message as output
    "agno-content": Expected(
        _content(True, "status"), correct=False, errors=3, unknown_tool_requests=0, requested=_SPANLESS
    ),
    "agno-hidden": Expected(_agno_hidden(), correct=False, errors=2),
    # MCP 1.x client sessions + OpenLLMetry's MCP instrumentation (a tool loop on an uninstrumented OpenAI client):
    # ``{"tool_name", "arguments"}`` and ``{"result", "is_error"}`` wrappers (its row); the server's own replies say
    # it all: pydantic's "validation error" (rejected), "Unknown tool: book_flight", the raising tool's error. No
    # definitions are read (only the ``tools/list`` span's output has them). Without content the replies are gone:
    # every failure is a ``tool_error`` execution failure, so the trace reads correct
    "mcp1_openllmetry-content": Expected(_mcp1(True), correct=False, errors=3),
    "mcp1_openllmetry-hidden": Expected(_mcp1(None), correct=True, errors=3),
    # A tool loop on ``litellm.completion`` with LiteLLM's OTel callback, whose tools run under the application's own
    # ``execute_tool`` spans (arguments recorded, "unknown tool: X" raised for a tool it lacks), in its root span.
    # LiteLLM writes each request's chat attributes onto that root, the last one logged over the others: the root
    # still carries the trace's verdict, as one model call with its tokens (not six, not twice); the definitions come
    # with the root, after every tool span, so no call gets a schema verdict of its own: the root validates them
    # then (``trace.late_schema``: the bad enum, which the loop ran unchecked). Hidden
    # (``turn_off_message_logging``): the root without messages or tools, so no schema at all. With
    # ``USE_OTEL_LITELLM_REQUEST_SPAN=true`` each request is a ``litellm_request`` span: every verdict, six calls
    "litellm-default": Expected(_litellm_stamped(), correct=False, errors=2, model_calls=1, late_schema=(4, 1)),
    "litellm-hidden": Expected(_litellm_stamped(), correct=False, errors=2, model_calls=1),
    "litellm-request_spans": Expected(_adk(True, True), correct=False, errors=3, model_calls=6),
    # BeeAI's RequirementAgent + OpenInference: the arguments inside its ``{"input", "options"}`` start event (its
    # row strips it); each tool error also becomes a nameless ``error`` child span, not a call (its row); BeeAI
    # rejects the bad enum itself (``ToolInputValidationError``); its chat model rejects the unknown tool's request
    # and asks again inside one model run, whose span keeps the second answer: six requests, five model calls, the
    # unknown tool unseen; ``final_answer`` is a call. Hidden: the exception alone says the input was rejected
    "beeai-content": Expected(
        [*_content(True), FINAL_ANSWER], correct=False, errors=2, unknown_tool_requests=0, model_calls=5
    ),
    "beeai-hidden": Expected(
        [*_autogen(None), ("final_answer", call("success"))], correct=False, errors=2, model_calls=5
    ),
    # pydantic-ai 2.68 instrumented through logfire 5.4 (``logfire.instrument_pydantic_ai()``): its own GenAI spans,
    # read as recorded; the run ends on the raising tool. Without content (``include_content=False``) the requests
    # and definitions keep their names: the unknown tool is still seen, its rejection of the bad enum still malformed
    "pydantic_ai_logfire-content": Expected(
        _content(True), correct=False, errors=3, unknown_tool_requests=0, requested=_SPANLESS, model_calls=5
    ),
    "pydantic_ai_logfire-hidden": Expected(
        _openllmetry_hidden(),
        correct=False,
        errors=3,
        unknown_tool_requests=0,
        requested=_SPANLESS_HIDDEN,
        model_calls=5,
    ),
    # The MCP Python SDK 2.x's own server spans (``tools/call <tool>``, execute_tool) under a tool loop on the OpenAI
    # client with OpenInference's instrumentation: no setting of the SDK records arguments or results, and the span's
    # id is the JSON-RPC one, so each call borrows the arguments of the one waiting request of its tool's name (the
    # model's, on the ChatCompletion span); the definitions are on the same spans. The server rejects the bad enum
    # and the unknown tool itself (``error.type = tool_error``): the borrowed arguments and the definitions say why.
    # Hidden requests: nothing but ``tool_error`` says any call failed, so the trace reads correct with three errors.
    # The scope's row says its spans cannot record a reply's error (its client spans cannot): the two calls that read
    # as a success are checked against their replies too (``trace.late_outcome``: 2 read, none failed)
    "mcp2-content": Expected(
        _mcp2(True), correct=False, errors=3, unknown_tool_requests=0, model_calls=6, late_outcome=(2, 0)
    ),
    "mcp2-hidden": Expected(_mcp2(None), correct=True, errors=3, model_calls=6),
    # the server in a process of its own (stdio): the agent's trace holds only the SDK's client spans (``MCP send
    # tools/call <tool>``, the tool name in the span name), which record no error of a result (``isError`` is a
    # reply, not an exception; its row: ``records_error_flag``): the raising tool's span reads as a success; the
    # reply the next request carries back for its call id ("Error executing tool get_population") says it failed,
    # and the root counts it (``trace.late_outcome``: the three calls that read as a success checked, one failed).
    # Arguments borrowed by name as above: schema and unknown tool still get their verdicts
    "mcp2_stdio-content": Expected(
        _mcp2(True),
        correct=False,
        errors=3,
        unknown_tool_requests=0,
        model_calls=6,
        late_outcome=(3, 1),
    ),
    # Semantic Kernel's own diagnostics (``SEMANTICKERNEL_EXPERIMENTAL_GENAI_ENABLE_OTEL_DIAGNOSTICS``): ``execute_tool``
    # spans with the call id, no arguments; the definitions only on the root ``invoke_agent`` span, which ends after
    # every tool span (names checked there: ``trace.unlisted_calls``); its chat spans carry no content (SK logs the
    # messages as log records, not on spans), so the unknown tool (no span, "is not part of the provided tools") is
    # unseen in either mode. ``..._SENSITIVE``: arguments and results on the tool spans, validated against the
    # root's schemas when it ends (the bad enum: ``trace.late_schema.invalid``)
    "semantic_kernel-plain": Expected(_semantic_kernel(None), correct=False, errors=2, model_calls=6),
    # SK's default, diagnostics off: its ``execute_tool`` spans are written all the same, under an
    # ``AutoFunctionInvocationLoop`` root (no agent or chat spans): the outcomes, no model calls; the tool list by
    # name from that root's ``sk.available_functions`` (its row)
    "semantic_kernel-off": Expected(_semantic_kernel(None), correct=False, errors=2, tool_list=(2, 0)),
    # no agent: a ``Kernel`` with automatic function calling (``FunctionChoiceBehavior.Auto``), diagnostics with
    # content: no ``invoke_agent`` span, so no schemas; the functions offered only by name, in the
    # ``AutoFunctionInvocationLoop`` span's ``sk.available_functions`` (its row), which ends after the tool spans: the
    # names checked there (``trace.unlisted_calls`` 0, the tool list on the root)
    "semantic_kernel-kernel": Expected(
        _semantic_kernel(True), correct=False, errors=2, model_calls=6, tool_list=(2, 0)
    ),
    "semantic_kernel-sensitive": Expected(
        _semantic_kernel(True), correct=False, errors=2, model_calls=6, late_schema=(4, 1)
    ),
    # Haystack's ``Agent`` + OpenInference: no span of a tool run (the Agent invokes its tools outside any component
    # span); the LLM spans list the requested calls without ids, and the tools and the replies only as Python reprs
    # inside ``input.value`` (its row: ``ReprSlice``, read bounded, never evaluated). Each call is scored from the
    # requests, its reply found by position (the k-th tool message answers the k-th call): schemas from the
    # ``Tool(...)`` reprs (the bad enum), the unknown tool by the definitions (Haystack's "Tool 'book_flight' not
    # found", error=True), the raising tool by its ``ToolCallResult(error=True)``. Hidden: nothing, no verdict.
    "haystack-content": Expected(
        [], correct=False, errors=3, unknown_tool_requests=0, requested=_from_requests(), model_calls=6
    ),
    "haystack-hidden": Expected([], correct=False, errors=0, verdict=False),
    # Two Haystack agents in one trace: an orchestrator (the valid ``get_weather``, ``ask_travel_agent``, the bad
    # enum) whose ``ask_travel_agent`` tool runs a second agent (the unknown ``book_flight``, the raising
    # ``get_population``) in between. Each ``Agent.run`` is a conversation of its own (its row): the inner agent's
    # positions do not take the outer's, so ``ask_travel_agent`` is scored when the orchestrator's next request
    # carries its reply (counted per trace, its calls took the outer's positions and it was never scored); the
    # ``book_flight`` unknown (the trace lists the three tools both agents were offered), seven requests
    "haystack-two_agents": Expected(
        [],
        correct=False,
        errors=3,
        unknown_tool_requests=0,
        requested=[
            _content(True)[0],
            _UNKNOWN_BY_DEFINITIONS,
            (
                "get_population",
                call("execution_failed", "error.type", parse_ok=True, tool_known=True, schema_valid=True),
            ),
            ("ask_travel_agent", call("success", parse_ok=True, tool_known=True, schema_valid=True)),
            _content(True)[2],
        ],
        model_calls=7,
    ),
    # Haystack's ``CompactionHook`` (``SlidingWindowCompactor``) trims the conversation before the third request and
    # the sixth: each of those requests starts an epoch of positions of its own (its messages do not extend the
    # previous request's), and the call waiting at each break (the second ``get_weather``, ``get_population``) is
    # not matched by position across it: unmatched, counted (``trace.unmatched_requests``, unexecuted), never scored
    # with another call's reply. After the first break the bad enum and the unknown tool are matched within the new
    # epoch; the trace's errors are the two it can see
    "haystack-compacted": Expected(
        [],
        correct=False,
        errors=2,
        unknown_tool_requests=0,
        requested=[_content(True)[0], _content(True)[2], _UNKNOWN_BY_DEFINITIONS],
        model_calls=6,
        unmatched=2,
    ),
}


def recorded(name: str) -> list[ReadableSpan]:
    return list(spans_from_request(request_from_json(json.loads(fixture_path(name).read_text()))))


@dataclass
class Run:
    provider: TracerProvider
    exporter: InMemorySpanExporter
    raw: InMemorySpanExporter

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def finish(self, name: str) -> None:
        """Record the raw spans as the fixture ``name`` and assert the scenario's verdicts on the scored ones."""
        self.provider.force_flush()
        record(name, self.raw.get_finished_spans())
        check(self.spans(), EXPECTED[name])
