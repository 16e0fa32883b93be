"""One engine: a call gets the same verdicts through the processor, through ``replay`` and as a run line in ``eval``.

The two divergences a reviewer found between the online and offline paths are pinned first; then a property test
generates traces (valid, invalid, unparseable, bare and unrecorded arguments; offered, config-only and unknown tools;
duplicates, repeated failures, failed runs, every policy, parallel batches) and scores each three ways.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import Status, StatusCode

from otel_toolcall_eval import EvalConfig
from otel_toolcall_eval.dataset.models import DatasetCase
from otel_toolcall_eval.offline.prepare import Preparer
from otel_toolcall_eval.offline.runner import evaluate
from otel_toolcall_eval.offline.runs import parse_run_line
from otel_toolcall_eval.offline.score import score_case
from otel_toolcall_eval.replay import replay_spans
from otel_toolcall_eval.replay.otlp import encode_json, request_from_json, spans_from_request

from .helpers import make_pipeline, scores

SEARCH = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"], "additionalProperties": False}
EMAIL = {
    "type": "object",
    "properties": {"to": {"type": "string"}, "priority": {"enum": ["low", "high"]}},
    "required": ["to"],
}
EMAIL_CONFIGURED = {"type": "object", "properties": {"to": {"type": "string"}}, "required": ["to"]}
LOOKUP = {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}

# what the chat spans offer (the dataset case's ``available_tools``)
OFFERED = {
    "search": SEARCH,
    "ping": {"type": "object", "properties": {}},
    "send_email": EMAIL,
    "authenticate": {"type": "object", "properties": {}},
    "confirm": {"type": "object", "properties": {}},
    "delete_records": {"type": "object", "properties": {"filter": {}}},
    "delete_all": {"type": "object", "properties": {}},
}
CONFIG = EvalConfig.from_dict(
    {
        "tools": [
            {"name": "lookup", "parameters": LOOKUP},  # configured, never offered in the trace
            {"name": "send_email", "parameters": EMAIL_CONFIGURED},  # differs from the trace's: drift
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
ARGUMENTS: dict[str, list[Any]] = {
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
COMPARED = (
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


def _definitions(offered: list[str]) -> list[dict[str, Any]]:
    return [{"type": "function", "name": n, "parameters": OFFERED[n]} for n in offered]


def _encoded(arguments: Any) -> str | None:
    return None if arguments is None else arguments if isinstance(arguments, str) else json.dumps(arguments)


def _record_trace(turns: list[list[tuple[str, Any]]], offered: list[str], chat: list[bool], failed: bool) -> Any:
    """The trace a GenAI-instrumented agent emits: a root, per turn a chat span offering the tools and requesting
    that turn's calls (unless ``chat`` says the turn recorded none), then one execute_tool span per call."""
    pipe = make_pipeline(CONFIG)
    tracer = pipe.tracer
    with tracer.start_as_current_span("agent run"):
        for t, calls in enumerate(turns):
            if chat[t]:
                parts = [
                    {"type": "tool_call", "id": f"c{t}.{i}", "name": name}
                    | ({} if arguments is None else {"arguments": _encoded(arguments)})
                    for i, (name, arguments) in enumerate(calls)
                ]
                attrs = {
                    "gen_ai.operation.name": "chat",
                    "gen_ai.tool.definitions": json.dumps(_definitions(offered)),
                    "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": parts}]),
                }
                with tracer.start_as_current_span("chat", attributes=attrs):
                    pass
            for i, (name, arguments) in enumerate(calls):
                attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name}
                if chat[t]:
                    attrs["gen_ai.tool.call.id"] = f"c{t}.{i}"
                encoded = _encoded(arguments)
                if encoded is not None:
                    attrs["gen_ai.tool.call.arguments"] = encoded
                with tracer.start_as_current_span(f"execute_tool {name}", attributes=attrs) as span:
                    if failed:
                        span.set_status(Status(StatusCode.ERROR, "boom"))
                    else:
                        span.set_attribute("gen_ai.tool.call.result", "ok")
    return pipe


def _run_line(turns: list[list[tuple[str, Any]]], chat: list[bool], failed: bool) -> dict[str, Any]:
    calls = []
    for t, turn in enumerate(turns):
        for name, arguments in turn:
            call: dict[str, Any] = {"name": name, "arguments": arguments}
            if chat[t]:
                call["batch"] = t
            calls.append(call)
    return {"id": "case", "tool_calls": calls, **({"error": "boom"} if failed else {})}


def _case(offered: list[str]) -> DatasetCase:
    return DatasetCase.model_validate(
        {
            "id": "case",
            "user_input": "do it",
            "available_tools": _definitions(offered),
            "expected_tool_calls": [],
            "expected_no_tool": True,
        }
    )


def _tool_spans(spans: list[ReadableSpan]) -> list[dict[str, Any]]:
    tools = [s for s in spans if (s.attributes or {}).get("gen_ai.operation.name") == "execute_tool"]
    tools.sort(key=lambda s: s.end_time or 0)
    return [{k: scores(s).get(k) for k in COMPARED} for s in tools]


def _offline(offered: list[str], line: dict[str, Any]) -> list[dict[str, Any]]:
    prep = Preparer(CONFIG)
    result = score_case(prep.prepare(_case(offered)), parse_run_line("run.jsonl", 1, orjson.dumps(line)), prep)
    return offline_rows(result.checks)


def offline_rows(checks: list[Any]) -> list[dict[str, Any]]:
    """The ``COMPARED`` verdicts of each scored call, as the processor writes them."""
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


def _online_rows(spans: list[ReadableSpan]) -> list[dict[str, Any]]:
    rows = _tool_spans(spans)
    for row in rows:  # the processor writes false booleans; absent ones are None on both sides
        for key in ("duplicate", "repeated_failure"):
            row[key] = bool(row[key])
    return rows


def _replayed(spans: list[ReadableSpan]) -> list[ReadableSpan]:
    document = json.loads(json.dumps(encode_json(spans)))
    return replay_spans(spans_from_request(request_from_json(document)), CONFIG).spans


# --- the two divergences, pinned ------------------------------------------------------------------------------


def test_a_configured_tool_the_trace_did_not_offer_is_known_on_every_path() -> None:
    """The config defines ``lookup``, the trace offers only ``search``, the agent calls ``lookup``: one meaning of
    "known" (offered or configured), so a ``required_steps`` prerequisite counts in production and in CI alike."""
    turns, chat = [[("lookup", {"id": 1})]], [True]
    pipe = _record_trace(turns, ["search"], chat, failed=False)
    online = _online_rows(pipe.spans())
    assert online[0]["tool_known"] is True and online[0]["outcome"] == "success"
    offline = _offline(["search"], _run_line(turns, chat, failed=False))
    assert offline[0]["tool_known"] is True and offline[0]["outcome"] == "success"
    assert offline == online


def test_calls_without_recorded_arguments_are_not_duplicates_on_any_path(tmp_path: Path) -> None:
    """Two ``ping`` calls whose arguments were not recorded (``harvest --runs-out`` writes ``"arguments": null``
    then) cannot be told apart: neither path calls the second a duplicate, nor inflates duplicate_call_rate."""
    turns, chat = [[("ping", UNRECORDED)], [("ping", UNRECORDED)]], [True, True]
    pipe = _record_trace(turns, ["ping"], chat, failed=False)
    assert [r["duplicate"] for r in _online_rows(pipe.spans())] == [False, False]
    line = _run_line(turns, chat, failed=False)
    assert [r["duplicate"] for r in _offline(["ping"], line)] == [False, False]
    dataset, runs = tmp_path / "cases.jsonl", tmp_path / "run.jsonl"
    dataset.write_text(_case(["ping"]).model_dump_json() + "\n")
    runs.write_text(json.dumps(line) + "\n")
    report = evaluate(dataset, [runs], CONFIG).report
    assert report["summary"]["duplicate_call_rate"] == 0.0


# --- the property ------------------------------------------------------------------------------------------------

NAMES = st.sampled_from(sorted(ARGUMENTS))


@st.composite
def traces(draw: st.DrawFn) -> tuple[list[list[tuple[str, Any]]], list[str], list[bool], bool]:
    n_turns = draw(st.integers(1, 4))
    turns = []
    for _ in range(n_turns):
        calls = []
        for name in draw(st.lists(NAMES, min_size=1, max_size=3)):
            calls.append((name, draw(st.sampled_from(ARGUMENTS[name]))))
        turns.append(calls)
    offered = draw(st.lists(st.sampled_from(sorted(OFFERED)), unique=True, max_size=len(OFFERED)))
    chat = draw(st.lists(st.booleans(), min_size=n_turns, max_size=n_turns))
    if not offered:
        chat = [False] * n_turns  # no chat span: the trace offered nothing, as the case lists nothing
    else:
        # the first turn's chat span offers the tools before any call: online, a call is judged against the tools
        # offered so far (a trace whose definitions arrive late is issue 13's), offline against the case's list
        chat[0] = True
    return turns, offered, chat, draw(st.booleans())


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trace=traces())
# a call whose id the request named without arguments, beside another call of its tool's name that has some: it
# borrows nothing (a by-name fallback once gave it the other call's arguments)
@example(
    trace=([[("search", None), ("authenticate", {}), ("search", {"q": "paris"})]], ["authenticate"], [True], False)
)
def test_processor_replay_and_eval_give_identical_per_call_verdicts(
    trace: tuple[list[list[tuple[str, Any]]], list[str], list[bool], bool],
) -> None:
    turns, offered, chat, failed = trace
    pipe = _record_trace(turns, offered, chat, failed)
    spans = pipe.spans()
    online = _online_rows(spans)
    assert len(online) == sum(len(t) for t in turns)
    assert _online_rows(_replayed(spans)) == online
    offline = _offline(offered if any(chat) else [], _run_line(turns, chat, failed))
    assert offline == online
